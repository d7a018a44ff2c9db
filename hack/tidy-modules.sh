#!/usr/bin/env bash
# Tidies the released modules as each one builds alone (GOWORK=off), the way `go install`
# and the release builds take them (`make tidy`):
#   1. raises each module's requirements to the versions the workspace selects, so a module
#      alone links what the workspace's tests ran, and the two share one build cache;
#   2. runs `go mod tidy` in each module's tree as tools/modproxy writes it (siblings at a
#      version of their current files, from a file:// proxy), in dependency order;
#   3. copies go.mod and go.sum back with the siblings at the version the repository
#      requires them (go.work's replacements name it) and their checksum lines as they were.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
released=(internal api registry gds-client controller admin) # dependency order
prefix=github.com/ai-dynamo/global-discovery-mcs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

tree_version=$(sed -nE "s#^[[:space:]]*$prefix/api (v[^ ]+) => \./api\$#\1#p" go.work)
[[ -n $tree_version ]] || { echo "go.work has no replacement of $prefix/api" >&2; exit 1; }

# 1. The workspace's selected versions.
go list -m -f '{{if .Version}}{{.Path}} {{.Version}}{{end}}' all > "$work/selected"
for m in "${released[@]}"; do
  edits=$(awk -v prefix="$prefix/" 'NR == FNR { v[$1] = $2; next }
    /^require \(/ { block = 1; next }
    block && /^\)/ { block = 0; next }
    (block || /^require /) {
      line = $0; sub(/^require[ \t]+/, "", line); split(line, f, /[ \t]+/)
      p = f[1]; if (p == "") p = f[2]
      ver = (f[1] == "") ? f[3] : f[2]
      if (index(p, prefix) == 1) next
      if ((p in v) && v[p] != ver) print "-require=" p "@" v[p]
    }' "$work/selected" "$m/go.mod")
  if [[ -n $edits ]]; then
    # shellcheck disable=SC2086 # one flag per word
    (cd "$m" && GOWORK=off go mod edit $edits)
  fi
done

# 2. Tidy each module alone.
(cd tools/modproxy && GOWORK=off go build -o "$work/modproxy" .)
version=$("$work/modproxy" -root "$root" -out "$work/proxy" -src "$work/src")
export GOWORK=off GOFLAGS=-mod=mod GONOSUMDB=$prefix GOPROXY="file://$work/proxy,$(go env GOPROXY)"
for m in "${released[@]}"; do
  (cd "$work/src/$m" && go mod tidy)
  # 3. Back into the repository, siblings as they were.
  sed -E "s#^([[:space:]]*(require )?$prefix/[a-z-]+) $version#\1 $tree_version#" "$work/src/$m/go.mod" > "$m/go.mod"
  grep "^$prefix/" "$m/go.sum" > "$work/siblings" 2>/dev/null || true
  awk -v prefix="$prefix/" -v siblings="$work/siblings" '
    BEGIN { while ((getline l < siblings) > 0) keep = keep l "\n" }
    index($1, prefix) == 1 { if (!done) printf "%s", keep; done = 1; next }
    { print }' "$work/src/$m/go.sum" > "$work/go.sum"
  if [[ -s $work/go.sum ]]; then cp "$work/go.sum" "$m/go.sum"; else rm -f "$m/go.sum"; fi
done
echo "tidied ${released[*]} (siblings at $tree_version)"
