#!/usr/bin/env bash
# Builds (and optionally pushes) the WebCodex images with Docker BuildKit; `make images` calls it.
#   WEBCODEX_IMAGE_REPO  image prefix, e.g. registry.example.com/platform/webcodex (default: webcodex)
#   WEBCODEX_IMAGE_TAG   tag (default: the chart's appVersion-<short git sha>, or "dev")
#   WEBCODEX_IMAGE_PUSH  1 to push after building (default: 0)
#   WEBCODEX_PLATFORM    optional --platform value, e.g. linux/amd64
#   DOCKER               docker-compatible CLI (default: docker)
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
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

export DOCKER_BUILDKIT=1
platform=()
[ -n "${WEBCODEX_PLATFORM:-}" ] && platform=(--platform "$WEBCODEX_PLATFORM")

for svc in "${selected[@]}"; do
  image="$REPO/$svc:$TAG"
  if [ "$svc" = runner ]; then
    target=(--target runner)
  else
    target=(--target service --build-arg "SERVICE=$svc")
  fi
  run "$DOCKER" build "${platform[@]}" -f "$DOCKERFILE" "${target[@]}" \
    --label "org.opencontainers.image.version=$TAG" -t "$image" "$ROOT"
  if [ "$PUSH" = 1 ]; then run "$DOCKER" push "$image"; fi
done
