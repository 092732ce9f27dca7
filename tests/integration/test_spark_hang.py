"""A Spark driver that stops answering (a JVM out of heap never answers its py4j call): the
participant used to wait for that call forever, holding a Spark slot and its partitions
while every instant aborted. Now a job still running after ``spark.job_timeout_ms`` makes
the participant kill its JVM and exit 1, so its partitions move on, as after a kill.

The hang is real: the participant's own JVM is stopped with SIGSTOP, so its next job's call
gets no answer, exactly as from a driver stuck in garbage collection."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest
from eventually import eventually
from pipeline import Pipeline
from test_failures import _assert_exactly

from hudi_sink.cli.broker import EmbeddedBroker

# Long (scripts/long-tests.sh): a minute and more of processes, and the default suite is near
# its 25-minute budget; SparkJobs' side of it is unit-tested in tests/unit/test_spark_jobs.py.
pytestmark = [pytest.mark.spark, pytest.mark.long, pytest.mark.timeout(600)]

JOB_TIMEOUT_MS = 4000


def test_a_hung_spark_driver_makes_the_participant_exit_and_nothing_is_lost(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "spark": {"master": "local[1]", "conf": {"spark.driver.memory": "1g"},
                  "job_timeout_ms": JOB_TIMEOUT_MS},
        "transaction": {"interval_ms": 2000, "write_status_timeout_ms": 15000,
                        "flush_records": 200, "resend_interval_ms": 1000},
        "service": {"shutdown_timeout_ms": 5000}})
    pipeline.produce(2_000)
    with pipeline:
        _coordinator, participant = pipeline.start_ready("coordinator", "participant")
        pipeline.wait_offsets(500, timeout_s=120)
        jvms = [child for child in psutil.Process(participant.process.pid).children(recursive=True)
                if child.name() == "java"]
        assert len(jvms) == 1, jvms
        jvm = jvms[0]
        jvm.suspend()  # the driver answers nothing from now on
        try:
            stopped = time.monotonic()
            pipeline.produce(2_000)  # the next flush's job hangs
            participant.process.wait(timeout=120)
            took = time.monotonic() - stopped
            log = participant.log_path.read_text(errors="replace")
            assert participant.process.returncode == 1, log[-3000:]
            assert "did not return within spark.job_timeout_ms" in log, log[-3000:]
            assert "killing the Spark driver JVM" in log, log[-3000:]
            assert took < 60, f"exit {took:.1f} s after the driver stopped answering"
            eventually(lambda: not jvm.is_running() or jvm.status() == psutil.STATUS_ZOMBIE, 10,
                       "the hung JVM gone with its participant", every_s=0.2)
        finally:
            if jvm.is_running():
                jvm.kill()
        replacement = pipeline.start("participant")
        pipeline.wait_ready(replacement, timeout_s=180)
        pipeline.wait_offsets(1_000, timeout_s=180)
        _assert_exactly(pipeline, 4_000)
