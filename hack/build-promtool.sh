#!/usr/bin/env bash
# Builds promtool from the Go module proxy into bin/, for the chart's alert tests
# (test/monitoring); the version is pinned by tools/promtool/go.mod. Built without
# Prometheus's service discovery (remove_all_sd): checking rules and metrics needs none, and
# the cloud SDKs it pulls in would double a cold build (3.3 min instead of 6.8).
# A build is kept once per machine (hack/lib/toolcache.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/toolcache.sh
. "$root/hack/lib/toolcache.sh"
cd "$root/tools/promtool"
export GOWORK=off CGO_ENABLED=0 # static, whatever the caller's environment (hack/build-helm.sh)
toolcache promtool "go.mod go.sum" "$root/bin/promtool" -- \
  go build -tags remove_all_sd -trimpath -ldflags "-s -w" -o "$root/bin/promtool" github.com/prometheus/prometheus/cmd/promtool
