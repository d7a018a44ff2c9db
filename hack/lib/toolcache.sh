# Sourced by the tool build scripts: a pinned tool is built once per machine, not once per
# checkout. A build is kept under $MCS_CACHE/tools (MCS_CACHE: ~/.cache/global-discovery-mcs)
# by a key over everything that decides its bytes: the Go version and platform, the tool's
# go.mod and go.sum, the build script and the build's own arguments. Another clone, a test
# that runs `make release`, or `make tools` again copies the kept files instead of linking
# kube-apiserver anew (a warm Go build cache still links every binary again).
# The cache is never required: without it (or with MCS_CACHE=off) the tool builds.

toolcache_dir=${MCS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/global-discovery-mcs}/tools
# The build script that sourced this file, resolved before it changes folder: part of the key.
toolcache_script=$(realpath "${BASH_SOURCE[1]}")

# toolcache NAME "INPUT FILES" OUT... -- BUILD COMMAND...
# Copies the kept OUTs of NAME when the key matches; otherwise runs the build command (which
# writes every OUT), then keeps them. The command's words are part of the key.
toolcache() {
  local name=$1 inputs=$2; shift 2
  local outs=()
  while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do outs+=("$1"); shift; done
  shift # --
  if [ "${MCS_CACHE:-}" = off ]; then "$@"; return; fi
  # The command's words without the checkout's own paths: each OUT counts by its name only,
  # or no other clone would ever find the build.
  local words="$*" o
  for o in "${outs[@]}"; do words=${words//"$o"/"$(basename "$o")"}; done
  local key
  # shellcheck disable=SC2086 # inputs is a list of paths without spaces
  key=$({ go env GOVERSION GOOS GOARCH CGO_ENABLED; printf '%s\n' "$words"; cat $inputs "$toolcache_script"; } | sha256sum | cut -c1-20)
  local kept="$toolcache_dir/$name-$key"
  if [ -f "$kept/.complete" ]; then
    for o in "${outs[@]}"; do
      mkdir -p "$(dirname "$o")"
      # A hard link where the cache and the checkout share a file system (no bytes copied:
      # the Kubernetes binaries are about 500 MB), else a copy.
      # A link already in place (a second `make tools`) stays.
      if [ ! "$o" -ef "$kept/$(basename "$o")" ]; then
        ln -f "$kept/$(basename "$o")" "$o.tmp" 2>/dev/null || cp -p "$kept/$(basename "$o")" "$o.tmp"
        mv -f "$o.tmp" "$o"
      fi
    done
    touch "$kept"
    echo ">> $name: kept build ($kept)" >&2
    return 0
  fi
  local start
  start=$(date +%s)
  echo ">> building $name" >&2
  # An OUT may be a link to a kept build: the build writes a new file, never into that one.
  rm -f "${outs[@]}"
  "$@"
  echo ">> $name built in $(( $(date +%s) - start ))s" >&2
  # Keep it: written aside, then renamed, so a concurrent build never reads half a file.
  mkdir -p "$toolcache_dir" || return 0
  local tmp
  tmp=$(mktemp -d "$toolcache_dir/.$name.XXXXXX") || return 0
  for o in "${outs[@]}"; do cp -p "$o" "$tmp/" || { rm -rf "$tmp"; return 0; }; done
  touch "$tmp/.complete"
  rm -rf "$kept" && mv "$tmp" "$kept" 2>/dev/null || rm -rf "$tmp"
  # Builds of other versions unused for 30 days go.
  find "$toolcache_dir" -mindepth 1 -maxdepth 1 -type d -name "$name-*" -mtime +30 -exec rm -rf {} + 2>/dev/null || true
}
