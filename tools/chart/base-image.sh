#!/usr/bin/env bash
# Makes the Debian bookworm base image the prebuilt image build (images/Dockerfile.prebuilt) and
# the test Postgres and Redis images start from, when it is not there yet:
#   1. the image is already present: nothing to do;
#   2. a registry serves debian:bookworm-slim: pulled and tagged;
#   3. otherwise (machines with Debian's package mirror but no image registry): a root
#      filesystem from `debootstrap --variant=minbase bookworm`, trimmed and imported with
#      `docker import` (needs root and debootstrap; about 30-60 s).
#   WEBCODEX_BASE_IMAGE   the tag to make (default: webcodex/base:bookworm)
#   WEBCODEX_DEBIAN_MIRROR  the mirror debootstrap uses (default: http://deb.debian.org/debian)
#   DOCKER                docker-compatible CLI (default: docker)
# Prints the path it took on stderr and the image tag on stdout.
set -euo pipefail
BASE="${WEBCODEX_BASE_IMAGE:-webcodex/base:bookworm}"
MIRROR="${WEBCODEX_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DOCKER="${DOCKER:-docker}"

if "$DOCKER" image inspect "$BASE" >/dev/null 2>&1; then
  echo "base-image: $BASE is present" >&2
  echo "$BASE"
  exit 0
fi
if timeout 60 "$DOCKER" pull -q debian:bookworm-slim >/dev/null 2>&1; then
  "$DOCKER" tag debian:bookworm-slim "$BASE"
  echo "base-image: $BASE from the registry's debian:bookworm-slim" >&2
  echo "$BASE"
  exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1 || [ "$(id -u)" -ne 0 ]; then
  echo "base-image: no registry serves debian:bookworm-slim, and debootstrap needs root and the debootstrap package (apt-get install debootstrap); or set WEBCODEX_BASE_IMAGE to a Debian bookworm image you have" >&2
  exit 1
fi
rootfs="$(mktemp -d /var/tmp/webcodex-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
started=$(date +%s)
echo "base-image: no registry serves debian:bookworm-slim; debootstrap --variant=minbase bookworm from $MIRROR" >&2
debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 || {
  echo "base-image: debootstrap failed; its log:" >&2
  tail -20 "$rootfs.log" >&2
  rm -f "$rootfs.log"
  exit 1
}
rm -f "$rootfs.log"
cat >"$rootfs/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb ${MIRROR%/debian}/debian-security bookworm-security main
SOURCES
# What debian:bookworm-slim leaves out: package caches, lists, documentation, manuals, locales.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
  "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/*
find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} + 2>/dev/null || true
# dpkg must not bring the documentation back in later installs (as in the slim image).
mkdir -p "$rootfs/etc/dpkg/dpkg.cfg.d"
printf 'path-exclude /usr/share/doc/*\npath-include /usr/share/doc/*/copyright\npath-exclude /usr/share/man/*\npath-exclude /usr/share/info/*\npath-exclude /usr/share/locale/*\npath-include /usr/share/locale/locale.alias\n' >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim"
tar -C "$rootfs" -c . | "$DOCKER" import -c 'CMD ["bash"]' -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$BASE" >/dev/null
echo "base-image: $BASE imported from debootstrap in $(($(date +%s) - started)) s" >&2
echo "$BASE"
