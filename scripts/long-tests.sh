#!/usr/bin/env bash
# Process tests that do not fit the main suite's 25-minute budget (marked ``long``): the
# pipeline on s3:// (moto), table maintenance end to end, the bench command's smoke run,
# OpenAPI fuzzing of the admin apps, and failure cases whose kind the main suite also covers
# (a participant SIGKILLed or frozen mid-transaction, the stall and lag metrics, a rolling update
# of every pod under load, the small chaos run, the spine and the deletion acceptance on the
# embedded broker), and a 3-broker
# Apache Kafka cluster (min.insync.replicas=2) with a broker SIGKILLed mid-stream.
# The main suite covers their parts with faster tests; run this before a release.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit $?
export SPARK_LOCAL_IP=127.0.0.1
.venv/bin/python -m pytest -q -p no:cacheprovider -m long tests/integration "$@"
