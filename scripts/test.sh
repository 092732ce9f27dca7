#!/usr/bin/env bash
# The whole test suite (unit + integration against the embedded broker, real Spark and the
# hudi-rs reader). Long chaos runs are excluded here: run them with scripts/chaos.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit $?
export SPARK_LOCAL_IP=127.0.0.1
.venv/bin/ruff check . || exit 1
.venv/bin/mypy || exit 1
# Parallel workers (pytest-xdist): integration tests mostly wait on their subprocesses (broker,
# services, Spark JVMs), so 3 workers on 2 cores pay off (README "Development"). Test by test,
# a file whole only where it shares a fixture between its tests (tests/worker_scheduling.py);
# each worker has its own broker and S3 server. HUDI_SINK_TEST_WORKERS=0: one process.
workers="${HUDI_SINK_TEST_WORKERS:-3}"
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 -n "$workers" "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests — treating as a failure" >&2
  exit 1
fi
exit "$rc"
