#!/usr/bin/env bash
# Builds every binary of the project into OUT (default bin/): static (CGO_ENABLED=0),
# trimmed, with the version linked in. `make build`, `make release` and the Dockerfile all
# build through this script, so the image holds what `make build` makes.
# GOOS and GOARCH select the platform.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bin}
version=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}
commit=${COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)}
# The commit's time, not the clock's: building one commit twice gives the same bytes.
build_date=${BUILD_DATE:-$(TZ=UTC git -C "$root" log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo unknown)}
export CGO_ENABLED=0
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Each binary builds in its module alone (GOWORK=off), as `go install <module>/cmd/<binary>@<version>`
# does: against its own go.mod, its siblings at one version from a file:// module proxy of
# this tree (tools/modproxy), so a binary links what its module declares.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root/tools/modproxy" && GOOS= GOARCH= GOWORK=off go build -o "$work/modproxy" .)
modules=$("$work/modproxy" -root "$root" -out "$work/proxy" -src "$work/src")
export GOWORK=off GOFLAGS="-mod=readonly -trimpath -buildvcs=false" \
  GONOSUMDB=github.com/ai-dynamo/global-discovery-mcs GOPROXY="file://$work/proxy,$(go env GOPROXY)"
pkg=github.com/ai-dynamo/global-discovery-mcs/internal/buildinfo # every binary's version
build() { # module, binary
  (cd "$work/src/$1" && go build \
    -ldflags "-s -w -X $pkg.Version=$version -X $pkg.Commit=$commit -X $pkg.BuildDate=$build_date" \
    -o "$out/$2" "./cmd/$2")
}
echo ">> modules at $modules" >&2
build registry mcs-registry
build controller mcs-controller
build admin mcs-admin
build gds-client global-discovery-service

# The module versions above name this tree's content, so each change of it adds a copy of
# the modules to the module cache (about 2 MB); copies unused for a day go. (Not younger
# ones: another checkout may be building with its own right now.)
cache=$(go env GOMODCACHE)
find "$cache/github.com/ai-dynamo/global-discovery-mcs" -mindepth 1 -maxdepth 1 -name '*@v0.0.0-dev.*' -mmin +1440 \
  -exec chmod -R u+w {} + -exec rm -rf {} + 2>/dev/null || true
find "$cache/cache/download/github.com/ai-dynamo/global-discovery-mcs" -path '*/@v/v0.0.0-dev.*' -mmin +1440 -delete 2>/dev/null || true
