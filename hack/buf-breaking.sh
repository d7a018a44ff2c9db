#!/usr/bin/env bash
# Checks the API for breaking changes against the main branch. Skipped (with a message)
# when main has no API yet: the very first commit of the API.
set -euo pipefail
buf=node_modules/.bin/buf
against=""
for ref in main origin/main; do
  if git rev-parse --verify -q "$ref^{commit}" >/dev/null && git cat-file -e "$ref:api/proto" 2>/dev/null; then
    against=$ref
    break
  fi
done
if [ -z "$against" ]; then
  echo "buf breaking: skipped, no main branch with api/proto to compare with"
  exit 0
fi
if [ "$against" = main ]; then
  "$buf" breaking --against '.git#branch=main'
else
  "$buf" breaking --against ".git#ref=$(git rev-parse "$against")"
fi
echo "buf breaking: no breaking change against $against"
