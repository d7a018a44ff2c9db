#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager (every local cluster's control
# plane), and kube-scheduler, kubelet, kube-proxy and kubectl (clusters with real nodes)
# from the Go module proxy into bin/k8s.
# The versions are pinned by tools/k8s/go.mod. A build is kept once per machine
# (hack/lib/toolcache.sh): another checkout copies it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/toolcache.sh
. "$root/hack/lib/toolcache.sh"
out="$root/bin/k8s"
mkdir -p "$out"
k8s_version=v1.37.2
ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=${k8s_version} \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=37 \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z \
 -X k8s.io/client-go/pkg/version.gitVersion=${k8s_version} \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=37"
cd "$root/tools/k8s"
export GOWORK=off
names=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
outs=()
for n in "${names[@]}"; do outs+=("$out/$n"); done
# One go build for all seven: their packages are one action graph, so while one package
# compiles alone for minutes (kube-apiserver's generated OpenAPI) the other core compiles
# the packages only kubelet or kubectl need, and no package is loaded twice.
build_all() {
  local work
  work=$(mktemp -d)
  go build -trimpath -ldflags "$ldflags" -o "$work/" go.etcd.io/etcd/server/v3 \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl
  mv "$work/server" "$work/etcd" # go.etcd.io/etcd/server/v3 builds as "server"
  for n in "${names[@]}"; do mv -f "$work/$n" "$out/$n"; done
  rm -rf "$work"
}
toolcache k8s "go.mod go.sum" "${outs[@]}" -- build_all
