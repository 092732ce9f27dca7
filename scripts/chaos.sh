#!/usr/bin/env bash
# The long kill -9 chaos run (issue acceptance size: 2 coordinators, 3 participants, 1 deleter,
# 5 kill rounds, each coordinator frozen 20 s, 36,000 records). Prints a summary table.
# Size knobs: CHAOS_RECORDS, CHAOS_ROUNDS, CHAOS_SEED.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit $?
export SPARK_LOCAL_IP=127.0.0.1
.venv/bin/python -m pytest -q -s -p no:cacheprovider -m chaos tests/integration/test_chaos.py "$@"
