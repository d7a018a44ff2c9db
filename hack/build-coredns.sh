#!/usr/bin/env bash
# Builds CoreDNS (with the plugins tools/coredns/main.go imports) from the Go module proxy
# into bin/k8s, for the DNS of local clusters with real nodes; tools/coredns/go.mod pins it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/tools/coredns"
export GOWORK=off
echo ">> building coredns" >&2
start=$(date +%s)
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$root/bin/k8s/coredns" .
echo ">> coredns built in $(( $(date +%s) - start ))s" >&2
