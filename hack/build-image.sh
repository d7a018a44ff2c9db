#!/usr/bin/env bash
# Builds the image as an OCI image layout tarball, with no Docker engine: the binaries of
# each platform through hack/build-binaries.sh (as the Dockerfile does), then tools/image
# assembles them with the CRDs, the Dockerfile's user and entrypoint, and OCI labels.
# Usage: build-image.sh OUT.tar [PLATFORM...]   (default platform: linux/amd64)
# `ctr images import OUT.tar`, `skopeo copy oci-archive:OUT.tar docker://...` or
# `crane push OUT.tar ...` load or push it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$1; shift
platforms=("${@:-linux/amd64}")
version=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}
commit=${COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)}
created=${BUILD_DATE:-$(TZ=UTC git -C "$root" log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo 1970-01-01T00:00:00Z)}
repo=${IMAGE_REPOSITORY:-ghcr.io/ai-dynamo/global-discovery-mcs}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
args=()
for p in "${platforms[@]}"; do
  os=${p%/*}; arch=${p#*/}
  GOOS=$os GOARCH=$arch VERSION=$version COMMIT=$commit BUILD_DATE=$created bash "$root/hack/build-binaries.sh" "$work/$os-$arch"
  args+=(--platform "$p=$work/$os-$arch")
done
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || ca=""
mkdir -p "$(dirname "$out")"
(cd "$root/tools/image" && GOWORK=off go build -trimpath -o "$work/image" .)
"$work/image" --out "$out" --tag "$repo:$version" --crds "$root/charts/global-discovery-mcs/files/crds" \
  --ca-bundle "$ca" --version "$version" --commit "$commit" --created "$created" "${args[@]}"
echo ">> image $repo:$version (${platforms[*]}) in $out" >&2
