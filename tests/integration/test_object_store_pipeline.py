"""The sink on an object store, through the contract: ``table.base_path: s3://…`` on moto's S3
server, the AWS variables pointing at it; broker, coordinator, 2 participants, deleter.

20,000 records over 4 partitions land exactly once (read back by hudi-rs from ``s3://``
through the same storage options, the same rows as Apache Hudi's own Java reader returns
through Hadoop's S3A), a coordinator SIGKILLed while an instant has staged objects changes
nothing, and within 90 s of the last commit every Parquet object outside
``.hoodie/`` is referenced by a completed commit and no finished instant keeps staged objects.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from eventually import eventually
from pipeline import Pipeline
from s3_server import MotoS3

from hudi_sink.cli.broker import EmbeddedBroker

# The main suite covers s3 through tests/unit/test_fs_contract.py (the FileSystem contract on
# moto), test_object_storage.py and test_object_store_fencing.py; this whole-pipeline run is
# the acceptance and runs with scripts/long-tests.sh.
pytestmark = [pytest.mark.timeout(600), pytest.mark.long]


def test_exactly_once_on_s3_across_a_coordinator_kill(
    broker: EmbeddedBroker, moto_s3: MotoS3, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, s3=moto_s3, overrides={
        "deletion": {"send_delay_s": 1, "reconsume_later_s": 2, "orphan_min_age_s": 0,
                     "max_redeliveries": 50},
    })
    assert pipeline.table_uri.startswith("s3://") and "storage_options" not in pipeline.config["table"]
    try:
        pipeline.produce(10_000)
        coordinator, _, _, _ = pipeline.start_ready("coordinator", "participant", "participant",
                                                    "deleter")
        pipeline.wait_offsets(2_500, timeout_s=240)
        first_half = pipeline.completed_commits()[-1]
        assert pipeline.read_agreed()[0].num_rows == 10_000  # Hudi's Java reader via s3a://

        pipeline.produce(10_000)
        eventually(pipeline.staged_files, 120, "staged objects of an open instant", every_s=0.1)
        pipeline.kill(coordinator, signal.SIGKILL)
        visible = pipeline.read()
        assert visible.num_rows == pipeline.committed_records(), "uncommitted rows are visible"
        assert not pipeline.unlisted_completed_files()

        successor = pipeline.start("coordinator")
        pipeline.wait_ready(successor)
        pipeline.wait_offsets(5_000, timeout_s=240)

        table, first = pipeline.read_agreed(None, first_half)
        ids = table.column("id").to_pylist()
        assert len(ids) == 20_000 and len(set(ids)) == 20_000
        assert pipeline.latest_offsets() == {0: 5_000, 1: 5_000, 2: 5_000, 3: 5_000}
        assert first.num_rows == 10_000

        def clean() -> bool:
            completed = set(pipeline.completed_commits())
            staged_of_finished = [p for p in pipeline.staged_files()
                                  if p.split("/.hoodie/.temp/", 1)[1].split("/", 1)[0] in completed]
            return pipeline.partition_files() <= pipeline.listed_files() and not staged_of_finished

        eventually(clean, 90, "every Parquet object outside .hoodie referenced by a completed "
                   "commit, no staged object of a completed instant", every_s=1)
        bucket = pipeline.table_uri.split("/")[2]
        assert not [k for k in moto_s3.keys(bucket) if "/.sink/probe/" in k]  # probes cleaned up
    finally:
        pipeline.stop_all()
    for service in pipeline.services:
        if service.process.returncode not in (0, -signal.SIGKILL):
            raise AssertionError(f"{service.role} exit {service.process.returncode}\n{service.log_tail()}")
