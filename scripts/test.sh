#!/usr/bin/env bash
# The whole test suite (unit + integration against the embedded broker, real Spark and the
# hudi-rs reader). Long chaos runs are excluded here: run them with scripts/chaos.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit $?
export SPARK_LOCAL_IP=127.0.0.1
.venv/bin/ruff check . || exit 1
.venv/bin/mypy || exit 1
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests — treating as a failure" >&2
  exit 1
fi
exit "$rc"
