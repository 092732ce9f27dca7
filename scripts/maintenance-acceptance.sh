#!/usr/bin/env bash
# The table-maintenance acceptance run (issue 15; ~4 min): coordinator, participant, deleter;
# interval 1000 ms, 200 records/s for 150 s then 30 s quiet. Checks exactly once (hudi-rs),
# <= 300 Parquet files, <= 30 completed instants active, <= 80 sink log entries, replaced files
# deleted by the deleter; prints a summary. Marked chaos: not part of the main suite.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit $?
export SPARK_LOCAL_IP=127.0.0.1
.venv/bin/python -m pytest -q -s -p no:cacheprovider -m chaos \
  tests/integration/test_maintenance_pipeline.py::test_maintenance_acceptance "$@"
