#!/usr/bin/env bash
# The MCP App card tests drive Debian's chromium through playwright-core: install the package
# when it is missing (as root, or through sudo when available). Nothing is downloaded otherwise.
set -u
[ -x /usr/bin/chromium ] && exit 0
echo "ensure-chromium: /usr/bin/chromium missing; installing the Debian chromium package"
run() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else return 1; fi; }
if run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 \
  || { run apt-get update -qq && run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }; then
  exit 0
fi
echo "ensure-chromium: could not install chromium (needs root or passwordless sudo); the card tests will fail" >&2
exit 1
