#!/usr/bin/env bash
# The demo: embedded broker + coordinator + participant + deleter + 20,000 demo records,
# live progress, then the table's timeline. Extra arguments go to `hudi-sink dev`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/hudi-sink dev --records "${RECORDS:-20000}" --until-done "$@"
.venv/bin/hudi-sink table show --path .hudi-sink-dev/warehouse/orders
