#!/usr/bin/env bash
# Builds helm and helm-unittest from the Go module proxy into bin/; the versions are pinned by
# tools/helm/go.mod and tools/helm-unittest/go.mod. The ldflags make helm tell charts it talks to Kubernetes v1.37 (without
# them it says v1.20) and report its own version. A build is kept once per machine
# (hack/lib/toolcache.sh), so `make release` in a test copies it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/toolcache.sh
. "$root/hack/lib/toolcache.sh"
cd "$root/tools/helm"
# Static, whatever the caller's environment: `make test` exports CGO_ENABLED=0 to its tests,
# and a helm built with another setting is another build (`make release` in test/release
# rebuilt helm and helm-unittest from source, 189 s cold, until this was pinned).
export GOWORK=off CGO_ENABLED=0
ldflags="-s -w \
 -X helm.sh/helm/v3/internal/version.version=v3.22.0 \
 -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 \
 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37 \
 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37"
toolcache helm "go.mod go.sum" "$root/bin/helm" -- \
  go build -trimpath -ldflags "$ldflags" -o "$root/bin/helm" helm.sh/helm/v3/cmd/helm

# helm-unittest, from its own tools module: it pins another helm, which must not move ours.
cd "$root/tools/helm-unittest"
toolcache helm-unittest "go.mod go.sum" "$root/bin/helm-unittest" -- \
  go build -trimpath -ldflags "-s -w" -o "$root/bin/helm-unittest" github.com/helm-unittest/helm-unittest/cmd/helm-unittest
