#!/usr/bin/env bash
# Builds helm from the Go module proxy into bin/helm; the version is pinned by
# tools/helm/go.mod. The ldflags make helm tell charts it talks to Kubernetes v1.37 (without
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
