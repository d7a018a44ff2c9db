# global-discovery-mcs — build, generate, lint and test.
#
#   make tools      pinned tools into bin/ and node_modules/, each kept once per machine (hack/lib/toolcache.sh)
#   make generate   generated API code (Go, OpenAPI, TypeScript, Python) from api/proto
#   make build      every binary into bin/, each in its module alone (GOWORK=off), as `go install` builds it
#   make tidy       each released module tidy as it builds alone, at the workspace's versions
#   make image      the image as an OCI tarball in dist/, with no Docker engine
#   make release    binaries, chart package and image tarball for every platform in dist/
#   make test       lint, generated-code check, unit and integration tests (what CI runs), then the
#                   ten slowest tests
#   make demo       a whole clusterset on this machine (3 clusters, registry, controllers, discovery); Ctrl-C stops it;
#                   as root on real nodes with the chart installed (NODES= for host processes)
#   make e2e        the end-to-end tests: that clusterset with fault figures, then the manual on real nodes
#   make run        mcs-registry alone with the memory store on :9090/:8080/:9091
#   make help       this list

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

ROOT    := $(CURDIR)
BIN     := $(ROOT)/bin
MODULES := internal api registry controller admin gds-client test examples/go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BUF     := $(ROOT)/node_modules/.bin/buf
GO_TEST_FLAGS ?= -count=1
# Our modules are vetted and tested as hack/build-binaries.sh builds them (trimmed, static):
# a package built with other settings is another build, so mixing them compiled every
# dependency twice on a cold machine. The pinned tools keep their own settings.
export GOFLAGS := -buildvcs=false -trimpath
lint generate check-generate test-compile test-unit fuzz test-integration: export CGO_ENABLED := 0

.PHONY: test-all modules test-compile test-times tools-gotestsum tidy check-tidy demo e2e tools-coredns tools-golangci-lint tools-helm release image docker-build docker-push all tools tools-proto tools-k8s tools-npm generate check-generate lint build test test-unit test-integration fuzz run clean

all: build

help:
	@sed -n '3,/^$$/p' Makefile | sed -e 's/^# \{0,1\}//'

## Tools -------------------------------------------------------------------------------

# Each tool is built once per machine and kept (hack/lib/toolcache.sh); `make test` builds
# the ones only the test module runs beside its other work (test-all).
tools: tools-npm tools-proto tools-gotestsum tools-k8s tools-coredns tools-helm tools-promtool tools-golangci-lint

tools-npm: node_modules/.installed
node_modules/.installed: package.json package-lock.json api/gen/ts/package.json examples/ts/package.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

tools-proto:
	bash hack/install-go-tools.sh tools/proto

# gotestsum runs `make test`'s suites: go test's own output, and each suite's test2json
# events in .cache/test for the timing summary (test/cmd/testtimes).
tools-gotestsum:
	bash hack/install-go-tools.sh tools/gotestsum

tools-k8s:
	bash hack/build-k8s.sh

tools-coredns:
	bash hack/build-coredns.sh

tools-helm:
	bash hack/build-helm.sh

tools-promtool:
	bash hack/build-promtool.sh

# golangci-lint, pinned by tools/golangci-lint/go.mod (its checks: .golangci.yml).
tools-golangci-lint:
	bash hack/install-go-tools.sh tools/golangci-lint

## Generated code ----------------------------------------------------------------------

generate: tools-npm tools-proto
	bash hack/check-protoc.sh
	$(BUF) generate
	@# The Python package's folders are regular packages, typed (PEP 561).
	find api/gen/python/src -mindepth 1 -type d -exec touch {}/__init__.py \; && touch api/gen/python/src/globaldiscoverymcs/py.typed
	gofmt -w api/gen/go
	cd test && go run ./cmd/gencrds ../charts/global-discovery-mcs/files/crds

# Fails when the committed generated code is not what `make generate` writes.
check-generate: generate
	@if [ -n "$$(git status --porcelain -- api/gen charts/global-discovery-mcs/files/crds)" ]; then \
	  echo "generated files are stale; run 'make generate' and commit:"; git status --porcelain -- api/gen charts/global-discovery-mcs/files/crds; exit 1; fi

## Lint --------------------------------------------------------------------------------

# golangci-lint (go vet, staticcheck, errcheck, gosec, revive, gofmt and import grouping
# among its checks: .golangci.yml): the workspace's modules in one run, which loads their
# shared dependencies once (65 s instead of 6.5 min module by module); tools/coredns with
# its own go.mod.
lint: tools-npm tools-golangci-lint
	$(BIN)/golangci-lint run $(foreach m,$(MODULES),./$(m)/...)
	cd tools/coredns && GOWORK=off $(BIN)/golangci-lint run ./...
	cd tools/modproxy && GOWORK=off $(BIN)/golangci-lint run ./...
	$(BUF) lint
	@bash hack/buf-breaking.sh

## Build -------------------------------------------------------------------------------

build:
	VERSION=$(VERSION) bash hack/build-binaries.sh $(BIN)

# Release binaries for linux and darwin on amd64 and arm64, the chart package and the
# multi-arch image tarball, with checksums, in dist/.
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
DIST ?= $(ROOT)/dist
release: tools-helm
	@rm -rf $(DIST) && mkdir -p $(DIST)
	@for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; \
	  echo ">> $$os/$$arch"; \
	  name=global-discovery-mcs-$(VERSION)-$$os-$$arch; \
	  GOOS=$$os GOARCH=$$arch VERSION=$(VERSION) bash hack/build-binaries.sh $(DIST)/$$name; \
	  cp LICENSE README.md $(DIST)/$$name/; \
	  tar -C $(DIST) -czf $(DIST)/$$name.tar.gz $$name; \
	done
	$(BIN)/helm package charts/global-discovery-mcs -d $(DIST)
	VERSION=$(VERSION) bash hack/build-image.sh $(DIST)/global-discovery-mcs-$(VERSION)-image.oci.tar $(IMAGE_PLATFORMS)
	cd $(DIST) && sha256sum *.tar.gz *.tgz *.oci.tar > SHA256SUMS && cat SHA256SUMS

# The image as an OCI image layout tarball, with no Docker engine (hack/build-image.sh):
# `make image IMAGE_PLATFORMS=linux/amd64`.
image:
	@mkdir -p $(DIST)
	VERSION=$(VERSION) bash hack/build-image.sh $(DIST)/global-discovery-mcs-$(VERSION)-image.oci.tar $(IMAGE_PLATFORMS)

# The image: every binary and the CRDs (no Docker engine is needed for anything else).
IMG ?= global-discovery-mcs:$(VERSION)
docker-build:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$$(git rev-parse HEAD) \
	  --build-arg BUILD_DATE=$$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ) -t $(IMG) .

docker-push:
	docker push $(IMG)

## Test --------------------------------------------------------------------------------

# Each suite's test2json events go to .cache/test; whatever the result, `make test` ends with
# the ten slowest tests, the last lines each failed test reported, and a count of every test
# by result (test/cmd/testtimes).
TEST_JSON := $(ROOT)/.cache/test
GOTESTSUM  = $(BIN)/gotestsum --format standard-quiet --jsonfile
test:
	@rm -rf $(TEST_JSON)
	@status=0; $(MAKE) --no-print-directory test-all || status=$$?; \
	  $(MAKE) --no-print-directory test-times; \
	  if [ -z "$(AS_ROOT)" ]; then echo "skipped (not root): test/nodes and TestDemoOnNodes, which start clusters with real nodes; as root, with the Debian packages .ci/run installs: sudo make test"; fi; \
	  exit $$status

# Everything before the test module, as one queue on 2 cores (make -j2 starts the steps in
# the order of PRE_TEST, the next whenever one ends): the Kubernetes build first (for
# minutes one package compiles alone on a cold machine, and the other slot goes through the
# rest), the steps that write sources (generated code, go.mod) before anything compiles
# them, CoreDNS after the Kubernetes build, whose packages it shares, then the compile and
# test work longest first. Each step's output is printed whole when it ends
# (--output-sync). Before, two fixed lanes: warm, one ended 140 s before the other
# (docs/development.md, "Test time").
PRE_TEST := tools-k8s tools-npm tools-proto tools-gotestsum modules tools-golangci-lint check-generate check-tidy \
  tools-coredns tools-helm tools-promtool test-unit fuzz test-compile lint build
test-all:
	$(MAKE) --no-print-directory -j2 --output-sync=target QUEUE=1 $(PRE_TEST)
	$(MAKE) --no-print-directory test-integration

ifeq ($(QUEUE),1)
check-generate check-tidy: | tools-npm tools-proto modules
build lint test-compile test-unit fuzz: | check-generate check-tidy tools-gotestsum
tools-coredns: | tools-k8s
endif

# Every module the workspace and the image build name (the Dockerfile's `go mod download`):
# on a cold machine minutes of downloads, here beside the other lane's compiles instead of
# inside a test.
modules:
	go mod download
	cd tools/modproxy && GOWORK=off go mod download

# The test module's packages and test binaries compiled ahead, so its run starts warm.
test-compile:
	@rm -rf $(ROOT)/.cache/test-bin
	cd test && go test -c -o $(ROOT)/.cache/test-bin/ ./...
	@rm -rf $(ROOT)/.cache/test-bin

test-times:
	@if ls $(TEST_JSON)/*.json >/dev/null 2>&1; then cd test && CGO_ENABLED=0 go run ./cmd/testtimes -top 10 $(TEST_JSON)/*.json; fi

# Each released module tidy as it builds alone (GOWORK=off), at the versions the workspace
# selects (hack/tidy-modules.sh). Add a dependency by importing it and running `make tidy`.
tidy:
	bash hack/tidy-modules.sh

check-tidy: tidy
	@if [ -n "$$(git status --porcelain -- '*go.mod' '*go.sum')" ]; then \
	  echo "go.mod or go.sum is not what 'make tidy' writes; run it and commit:"; git status --porcelain -- '*go.mod' '*go.sum'; exit 1; fi

test-unit: tools-gotestsum
	@mkdir -p $(TEST_JSON)
	@for m in internal api registry controller admin gds-client; do (cd $$m && $(GOTESTSUM) $(TEST_JSON)/unit-$$m.json -- $(GO_TEST_FLAGS) ./...); done
	cd tools/coredns && GOWORK=off $(GOTESTSUM) $(TEST_JSON)/unit-coredns.json -- $(GO_TEST_FLAGS) ./...

# Fuzzing with a budget in executions, not seconds: Go 1.26's fuzz coordinator can report
# "context deadline exceeded" as a failure when a duration budget ends while a worker is
# busy (go.dev/issue/75804, fixed in Go 1.27); a count has no deadline to race.
# `make fuzz FUZZ_EXECS=2000000x` explores longer.
FUZZ_EXECS ?= 50000x
fuzz:
	cd api && go test -run '^$$' -fuzz FuzzValidateExport -fuzztime $(FUZZ_EXECS) ./validate/
	cd registry && go test -run '^$$' -fuzz FuzzMerge -fuzztime $(FUZZ_EXECS) ./merge/
	cd registry && go test -run '^$$' -fuzz FuzzDecodeItem -fuzztime $(FUZZ_EXECS) ./store/dynamodb/
	cd controller && go test -run '^$$' -fuzz FuzzDesiredFromAccepted -fuzztime $(FUZZ_EXECS) ./internal/importer/
	cd admin && go test -run '^$$' -fuzz FuzzDescribe -fuzztime $(FUZZ_EXECS) ./internal/cli/

# Integration tests run the real binaries against real kube-apiservers and dynoxide. The
# longest packages are named first, so go test starts them first and the short ones fill the
# other slot: test/nodes and test/demo's node test take the machine's node network one
# after the other, so the nodes package should not wait behind the others, and test/demo
# takes the slot test/nodes frees (it ends before test/integration).
# test/nodes and TestDemoOnNodes start clusters with real nodes, which needs root (and the
# Debian packages .ci/run installs): as another user they are left out, and `make test`
# says so at its end.
AS_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo 1)
ifeq ($(AS_ROOT),1)
TEST_PACKAGES := ./nodes/ ./integration/ ./demo/ ./release/ ./e2e/ ./...
TEST_SKIP :=
else
TEST_PACKAGES = ./integration/ ./release/ ./e2e/ $(shell cd test && go list ./... | grep -v '/test/nodes$$')
TEST_SKIP := -skip '^TestDemoOnNodes$$'
endif
test-integration: tools-gotestsum
	@mkdir -p $(TEST_JSON)
	cd test && $(GOTESTSUM) $(TEST_JSON)/test-module.json -- $(GO_TEST_FLAGS) -timeout 30m $(TEST_SKIP) $(TEST_PACKAGES)

# As root, with containerd and the CNI plugins installed (.ci/run installs them), `make demo`
# gives every cluster a real node (containerd, kubelet, kube-proxy), installs the chart as
# the manual says and runs the sample as real pods; otherwise, or with NODES= (empty), it
# runs the binaries as host processes, which needs neither.
NODES ?= $(shell [ "$$(id -u)" = 0 ] && command -v containerd >/dev/null && [ -x /usr/lib/cni/bridge ] && echo 1)
demo: tools build
	cd test && CGO_ENABLED=0 DEMO=1 DEMO_NODES=$(NODES) go test -count=1 -v -timeout 0 -run '^TestDemo$$' ./demo/

# The end-to-end tests: the clusterset as host processes with its faults (test/e2e), then
# the manual on clusters with real nodes (test/nodes: the chart and the image, both
# transport paths, clusterset.local DNS, traffic across clusters, faults with pods; root).
e2e: tools build
	cd test && CGO_ENABLED=0 go test -count=1 -v -timeout 20m -run '^TestEndToEnd$$' ./e2e/ | grep -E '^(=== RUN|--- |ok|FAIL|PASS)|FIGURE|_test.go'
	cd test && CGO_ENABLED=0 go test -count=1 -v -timeout 30m ./nodes/ | grep -E '^\s*(=== RUN|--- |ok|FAIL|PASS)|FIGURE|_test.go'

run: build
	$(BIN)/mcs-registry --store=memory --log-format=text

clean:
	rm -rf $(BIN) dist
