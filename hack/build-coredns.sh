#!/usr/bin/env bash
# Builds CoreDNS (with the plugins tools/coredns/main.go imports) from the Go module proxy
# into bin/k8s, for the DNS of local clusters with real nodes; tools/coredns/go.mod pins it.
# A build is kept once per machine (hack/lib/toolcache.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/toolcache.sh
. "$root/hack/lib/toolcache.sh"
cd "$root/tools/coredns"
export GOWORK=off CGO_ENABLED=0
# The plugin sources are inputs too: tools/coredns holds the multicluster plugin.
toolcache coredns "go.mod go.sum $(find . -name '*.go' ! -name '*_test.go' | sort | tr '\n' ' ')" "$root/bin/k8s/coredns" -- \
  go build -trimpath -ldflags "-s -w" -o "$root/bin/k8s/coredns" .
