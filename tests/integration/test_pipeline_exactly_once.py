"""The spine end to end, as separate processes: broker, coordinator, 2 participants.

20,000 records over 4 partitions land exactly once (checked with hudi-rs, every row and column
the same as Apache Hudi's own Java reader returns: ``Pipeline.read_agreed``), the latest commit
holds 5,000 per partition, a coordinator SIGKILLed with an instant in flight leaves nothing
visible of it and its successor continues from the stored offsets without duplicates, and
time travel shows the earlier row count.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from eventually import eventually
from pipeline import Pipeline, files_below

from hudi_sink.cli.broker import EmbeddedBroker

# Long suite: the default suite runs the same spine on Apache Kafka
# (test_real_kafka.py::test_spine_across_a_coordinator_crash_on_kafka).
pytestmark = [pytest.mark.timeout(600), pytest.mark.long]


def _staged_parquet(pipeline: Pipeline) -> list[Path]:
    return sorted(files_below(pipeline.timeline / ".temp", ".parquet"))


def test_exactly_once_across_coordinator_crash(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap)
    try:
        pipeline.produce(10_000)
        coordinator, _, _ = pipeline.start_ready("coordinator", "participant", "participant")

        # First half: 2,500 per partition.
        pipeline.wait_offsets(2_500, timeout_s=240)
        first_half_commit = pipeline.completed_commits()[-1]
        assert pipeline.read_agreed()[0].num_rows == 10_000

        # Second half, and a coordinator killed while an instant has staged data.
        pipeline.produce(10_000)
        eventually(lambda: _staged_parquet(pipeline), 120, "staged files of an open instant",
                   every_s=0.1)
        pipeline.kill(coordinator, signal.SIGKILL)
        pending = [p.name for p in pipeline.timeline.glob("*.inflight")
                   if p.name.removesuffix(".inflight") not in pipeline.completed_commits()]
        [visible] = pipeline.read_agreed()
        assert visible.num_rows == pipeline.committed_records(), "uncommitted rows are visible"
        assert visible.num_rows == len(set(visible.column("id").to_pylist()))
        assert not pipeline.unlisted_completed_files()

        # The successor rolls the open instant back and continues from the stored offsets.
        successor = pipeline.start("coordinator")
        pipeline.wait_ready(successor)
        pipeline.wait_offsets(5_000, timeout_s=240)

        # Now and time travel to the first half, in one JVM call of Hudi's reader.
        table, first_half = pipeline.read_agreed(None, first_half_commit)
        ids = table.column("id").to_pylist()
        assert len(ids) == 20_000
        assert len(set(ids)) == 20_000
        assert pipeline.latest_offsets() == {0: 5_000, 1: 5_000, 2: 5_000, 3: 5_000}
        assert not pipeline.unlisted_completed_files()
        assert pipeline.partition_files() <= pipeline.listed_files()
        for name in pending:  # what was in flight at the kill was rolled back, never completed
            instant = name.removesuffix(".inflight")
            assert instant not in pipeline.completed_commits()

        # Time travel to the first half.
        assert first_half.num_rows == 10_000
    finally:
        pipeline.stop_all()
    for service in pipeline.services:
        if service.process.returncode not in (0, -signal.SIGKILL):
            raise AssertionError(f"{service.role} exit {service.process.returncode}\n{service.log_tail()}")
