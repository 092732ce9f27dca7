"""A local Spark driver JVM that exits under a job (a task out of heap makes Spark exit it
with code 52) is reported as :class:`SparkDriverGone`, never as an ordinary failed flush.

Why: PySpark keeps the dead gateway for the life of the process, so a retried flush fails
with "Connection refused" forever, the participant holds its partitions and every instant
aborts. Seen on the upsert bench with the 1 GB default heap. The JVM is killed here in a
child process (the test's own workers share one gateway per process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]

SCRIPT = r'''
import posixpath, sys
import pyarrow as pa
from pyspark import SparkContext
from hudi_sink.services.participant.spark_writer import PART_COLUMN, PlannedFile, SparkWriter
from hudi_sink.shared.config.settings import SparkConfig
from hudi_sink.shared.errors import SparkDriverGone
from hudi_sink.shared.storage.fs import LocalFileSystem

staging = sys.argv[1]
writer = SparkWriter(SparkConfig(master="local[1]", conf={}), LocalFileSystem())
table = pa.table({"id": ["a", "b"], PART_COLUMN: [0, 0]})

def plan(name):
    return [PlannedFile(index=0, file_id=name, partition_path="", file_name=name + ".parquet",
                        staged_path=posixpath.join(staging, name + ".parquet"))]

assert writer.write(table, plan("before"), staging)[0].num_records == 2
SparkContext._gateway.proc.kill()
SparkContext._gateway.proc.wait()
for attempt in ("first", "second"):
    try:
        writer.write(table, plan(attempt), staging)
    except SparkDriverGone as exc:
        print(f"{attempt}: gone: {exc}"[:300], flush=True)
    except Exception as exc:
        print(f"{attempt}: other {type(exc).__name__}: {exc}"[:300], flush=True)
    else:
        print(f"{attempt}: written", flush=True)
'''


def test_a_dead_driver_jvm_is_reported_as_gone_not_retried(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True,
                            text=True, timeout=200)
    lines = [line for line in result.stdout.splitlines() if line.startswith(("first", "second"))]
    assert result.returncode == 0, result.stderr[-3000:]
    assert lines[0].startswith("first: gone: the Spark driver JVM exited with code -9"), lines
    # Abandoned: no session is built on the dead gateway again; still reported as gone.
    assert lines[1].startswith("second: gone: the Spark driver JVM exited"), lines
    assert "the SparkSession was abandoned" in lines[1], lines
