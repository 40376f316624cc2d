#!/usr/bin/env bash
# Makes the Postgres and Redis images the tests' testcontainers path starts (default
# webcodex-test/postgres:15-bookworm and webcodex-test/redis:7-bookworm): built from Debian
# packages on the Debian base (tools/chart/base-image.sh), so they need no image registry, only
# Debian's package mirror. Cached by the engine: a second run takes about a second.
#   WEBCODEX_TEST_POSTGRES_IMAGE / WEBCODEX_TEST_REDIS_IMAGE  other names (an image that is
#       already present, or that a registry serves, is used as is and not built)
#   DOCKER  docker-compatible CLI (default: docker)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DOCKER="${DOCKER:-docker}"
pg_image="${WEBCODEX_TEST_POSTGRES_IMAGE:-webcodex-test/postgres:15-bookworm}"
redis_image="${WEBCODEX_TEST_REDIS_IMAGE:-webcodex-test/redis:7-bookworm}"

ensure() {
  local image="$1" dockerfile="$2"
  if "$DOCKER" image inspect "$image" >/dev/null 2>&1; then return 0; fi
  case "$image" in
    webcodex-test/*) ;;
    *) timeout 120 "$DOCKER" pull -q "$image" >/dev/null && return 0
       echo "test-images: $image is not present and could not be pulled" >&2; return 1 ;;
  esac
  local base started log
  base="$(DOCKER="$DOCKER" bash "$ROOT/tools/chart/base-image.sh")"
  started=$(date +%s)
  log="$(mktemp)"
  # The legacy builder unless buildx is there: nothing here needs BuildKit.
  if "$DOCKER" buildx version >/dev/null 2>&1; then export DOCKER_BUILDKIT=1; else export DOCKER_BUILDKIT=0; fi
  if ! "$DOCKER" build -f "$ROOT/images/test/$dockerfile" --build-arg "BASE_IMAGE=$base" -t "$image" "$ROOT/images/test" >"$log" 2>&1; then
    echo "test-images: building $image failed:" >&2
    tail -20 "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
  echo "test-images: built $image from Debian packages in $(($(date +%s) - started)) s" >&2
}
ensure "$pg_image" postgres.Dockerfile
ensure "$redis_image" redis.Dockerfile
echo "test-images: $pg_image and $redis_image are present" >&2
