#!/usr/bin/env bash
# Create .venv and install hudi-sink with its test extras, and helm into .tools/ for the
# chart tests (idempotent, fast when done).
# Needs Python >= 3.11 and a Java 17 runtime (Spark). pyspark is a 450 MB sdist built locally
# on first install; pip's cache (~/.cache/pip) makes later installs fast but is not required.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if ! command -v java >/dev/null 2>&1; then
  echo "setup: java not found; install OpenJDK 17 (e.g. apt-get install -y openjdk-17-jre-headless)" >&2
  exit 2
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.hudi-sink-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev]'
  touch "$stamp"
fi
# The Helm chart tests (tests/integration/test_helm_chart.py) need helm; they fail without it.
scripts/install-helm.sh .tools
# Java programs the tests run, pinned by tests/java/*/pom.xml (Apache Kafka for the real-Kafka
# tests): fetched from Maven Central into ~/.m2 once, checked, classpaths in .tools/java/.
scripts/resolve-java.sh
