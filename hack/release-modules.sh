#!/usr/bin/env bash
# Makes the release commit of the Go modules and tags it, in dependency order
# (RELEASING.md):
#   hack/release-modules.sh vX.Y.Z
#   1. tools/modproxy -write: each released module's go.mod requires its siblings at vX.Y.Z
#      (no replace directive) and its go.sum holds their checksums — the hashes of the module
#      zips as the Go command makes them from the tags, computed from this tree;
#   2. go.work's versioned replacements, and the requirements of the modules that are not
#      released (test, examples/go), move to vX.Y.Z, so the workspace resolves the siblings
#      from their folders until the tags are published;
#   3. one commit, and a tag <module>/vX.Y.Z per module: internal, api, registry,
#      gds-client, controller, admin.
# It pushes nothing; it prints the `git push` to run.
set -euo pipefail
version=${1:?usage: release-modules.sh vX.Y.Z}
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || { echo "not a release version: $version" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
released=(internal api registry gds-client controller admin) # dependency order
prefix=github.com/ai-dynamo/global-discovery-mcs
if [[ -n $(git status --porcelain) ]]; then
  echo "the work tree has changes; a release is made from a clean checkout" >&2
  exit 1
fi
for m in "${released[@]}"; do
  if git rev-parse -q --verify "refs/tags/$m/$version" >/dev/null; then
    echo "tag $m/$version exists" >&2
    exit 1
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd tools/modproxy && GOWORK=off go build -o "$work/modproxy" .)
"$work/modproxy" -root "$root" -out "$work/proxy" -version "$version" -write >/dev/null
sed -i -E "s#^([[:space:]]*$prefix/[a-z-]+) v[^ ]+ => #\1 $version => #" go.work
# The modules that are not released (tests, examples) require the release too.
sed -i -E "s#^([[:space:]]*(require )?$prefix/[a-z-]+) v[^ ]+#\1 $version#" test/go.mod examples/go/go.mod

git add go.work test/go.mod examples/go/go.mod "${released[@]/%//go.mod}" "${released[@]/%//go.sum}"
git commit -q -m "Release modules $version"
tags=()
for m in "${released[@]}"; do
  git tag -a "$m/$version" -m "$m $version"
  tags+=("$m/$version")
done
echo "tagged ${tags[*]} on $(git rev-parse --short HEAD); publish with:"
echo "  git push origin HEAD ${tags[*]}"
