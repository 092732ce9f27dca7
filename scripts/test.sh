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
# services, Spark JVMs, commit intervals): with the tests' CPU cut (C1 JVMs, the drivers' CDS
# archive, one HTTP client) a clean-clone run on 3 workers used 885 CPU-s in 810 s, about one
# of the 2 cores, so 5 workers pay off (README "Development"). Test by test,
# a file whole only where it shares a fixture between its tests (tests/worker_scheduling.py);
# each worker has its own broker and S3 server. HUDI_SINK_TEST_WORKERS=0: one process.
workers="${HUDI_SINK_TEST_WORKERS:-5}"
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 -n "$workers" "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests — treating as a failure" >&2
  exit 1
fi
exit "$rc"
