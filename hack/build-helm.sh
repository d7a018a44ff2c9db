#!/usr/bin/env bash
# Builds helm and helm-unittest from the Go module proxy into bin/; the versions are pinned by
# tools/helm/go.mod and tools/helm-unittest/go.mod. The ldflags make helm tell charts it talks to Kubernetes v1.37 (without
# them it says v1.20) and report its own version.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/tools/helm"
export GOWORK=off
ldflags="-s -w \
 -X helm.sh/helm/v3/internal/version.version=v3.22.0 \
 -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 \
 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37 \
 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37"
echo ">> building helm" >&2
start=$(date +%s)
go build -trimpath -ldflags "$ldflags" -o "$root/bin/helm" helm.sh/helm/v3/cmd/helm
echo ">> helm built in $(( $(date +%s) - start ))s" >&2

# helm-unittest, from its own tools module: it pins another helm, which must not move ours.
echo ">> building helm-unittest" >&2
start=$(date +%s)
(cd "$root/tools/helm-unittest" && go build -trimpath -ldflags "-s -w" -o "$root/bin/helm-unittest" github.com/helm-unittest/helm-unittest/cmd/helm-unittest)
echo ">> helm-unittest built in $(( $(date +%s) - start ))s" >&2
