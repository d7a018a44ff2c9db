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
out=$(cd "$out" && pwd) # the builds run in each module's folder
pkg=github.com/ai-dynamo/global-discovery-mcs/internal/buildinfo # every binary's version
build() { # module, binary
  (cd "$root/$1" && go build -trimpath \
    -ldflags "-s -w -X $pkg.Version=$version -X $pkg.Commit=$commit -X $pkg.BuildDate=$build_date" \
    -o "$out/$2" "./cmd/$2")
}
build registry mcs-registry
build controller mcs-controller
build admin mcs-admin
build gds-client global-discovery-service
