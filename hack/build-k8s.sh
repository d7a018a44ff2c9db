#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager (every local cluster's control
# plane), and kube-scheduler, kubelet, kube-proxy and kubectl (clusters with real nodes)
# from the Go module proxy into bin/k8s.
# The versions are pinned by tools/k8s/go.mod. Skips binaries that are already up to date
# (go build is incremental; a warm cache relinks in seconds).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
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
# One package at a time: kube-apiserver alone peaks near 2.4 GB and the machines have 2 cores.
for target in "etcd:go.etcd.io/etcd/server/v3" \
              "kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver" \
              "kube-controller-manager:k8s.io/kubernetes/cmd/kube-controller-manager" \
              "kube-scheduler:k8s.io/kubernetes/cmd/kube-scheduler" \
              "kubelet:k8s.io/kubernetes/cmd/kubelet" \
              "kube-proxy:k8s.io/kubernetes/cmd/kube-proxy" \
              "kubectl:k8s.io/kubernetes/cmd/kubectl"; do
  name=${target%%:*}; pkg=${target#*:}
  echo ">> building $name ($pkg); the first build takes several minutes" >&2
  start=$(date +%s)
  go build -trimpath -ldflags "$ldflags" -o "$out/$name" "$pkg"
  echo ">> $name built in $(( $(date +%s) - start ))s" >&2
done
