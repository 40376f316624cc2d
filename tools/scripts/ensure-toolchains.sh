#!/usr/bin/env bash
# Makes sure the validation tests have the toolchains they run for real: Go (go), Rust
# (cargo) and pytest, found on the PATH a Runner gives its child processes (the scrubbed
# default below, not the caller's PATH), and bubblewrap (bwrap), which every program a Runner
# starts runs in. Missing ones are installed from Debian packages (golang-go, cargo,
# python3-pytest, bubblewrap) when running as root, as CI does; otherwise this exits non-zero
# saying what is missing. The tests never skip for a missing toolchain.
set -u
runner_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
has() { PATH="$runner_path" command -v "$1" >/dev/null 2>&1; }
missing=()
has go || missing+=(golang-go)
has cargo || missing+=(cargo)
PATH="$runner_path" python3 -c 'import pytest' >/dev/null 2>&1 || missing+=(python3-pytest)
[ -x /usr/bin/bwrap ] || missing+=(bubblewrap)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-toolchains: missing Debian packages for the validation tests: ${missing[*]} (install them as root: apt-get install ${missing[*]})" >&2
  exit 1
fi
echo "ensure-toolchains: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || {
  echo "ensure-toolchains: apt-get install ${missing[*]} failed" >&2
  exit 1
}
