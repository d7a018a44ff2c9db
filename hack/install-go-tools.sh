#!/usr/bin/env bash
# Installs the `tool` directives of one tools module (tools/proto, tools/golangci-lint,
# tools/gotestsum) into bin/, as `go install tool` does; the module's go.mod pins them. A
# build is kept once per machine (hack/lib/toolcache.sh).
# Usage: install-go-tools.sh tools/NAME
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/toolcache.sh
. "$root/hack/lib/toolcache.sh"
cd "$root/$1"
export GOWORK=off CGO_ENABLED=0 GOBIN="$root/bin"
mapfile -t outs < <(go list -f '{{.Target}}' tool)
toolcache "$(basename "$1")" "go.mod go.sum" "${outs[@]}" -- go install -trimpath tool
