"""Write-time file sizing through the contract: a trickle of one-second commits in insert
mode with the defaults packs each Kafka partition's rows into its own small file group as
new slices, so files per table partition stay bounded without any replacecommit; hudi-rs,
Apache Hudi's reader and a reader that follows only ``.commit`` files (latest slice per
fileId, like daft's) all read every row once."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pipeline import Pipeline

from hudi_sink.cli.broker import EmbeddedBroker
from hudi_sink.shared.hudi.naming import instant_key, parse_base_file_name

pytestmark = pytest.mark.timeout(600)

RECORDS = 1_200


def _commit_only_read(pipeline: Pipeline) -> pa.Table:
    """What a reader that follows only ``.commit`` actions reads: per (partition, fileId) the
    file of the greatest completed commit listing it."""
    latest: dict[tuple[str, str], tuple[str, str]] = {}
    for instant in pipeline.completed_commits():
        metadata = orjson.loads((pipeline.timeline / f"{instant}.commit").read_bytes())
        for partition, stats in metadata["partitionToWriteStats"].items():
            for stat in stats:
                key = (partition, stat["fileId"])
                if key not in latest or instant_key(instant) > instant_key(latest[key][0]):
                    latest[key] = (instant, stat["path"])
    tables = [pq.read_table(pipeline.base_path / path) for _, path in latest.values()]
    return pa.concat_tables(tables, promote_options="default")


def test_a_trickle_packs_into_own_small_groups_and_every_reader_reads_each_row_once(
    broker: EmbeddedBroker, tmp_path: object, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={  # type: ignore[arg-type]
        "transaction": {"interval_ms": 1000, "write_status_timeout_ms": 60000,
                        "resend_interval_ms": 1000},
    })
    pipeline.produce(0)  # creates the topic
    try:
        pipeline.start_ready("coordinator", "participant")
        producer = pipeline.produce_in_background(RECORDS, rate=60)  # ~20 s of one-second commits
        assert producer.wait(timeout=300) == 0
        pipeline.wait_offsets(RECORDS // pipeline.partitions, timeout_s=240)

        assert not list(pipeline.timeline.glob("*.replacecommit*")), "no clustering ran"
        commits = pipeline.completed_commits()
        assert len(commits) >= 3, commits
        slices_over_old = 0
        groups: dict[str, set[str]] = {}
        for instant in commits:
            metadata = orjson.loads((pipeline.timeline / f"{instant}.commit").read_bytes())
            for partition, stats in metadata["partitionToWriteStats"].items():
                for stat in stats:
                    groups.setdefault(partition, set()).add(stat["fileId"])
                    if stat["prevCommit"] != "null":
                        slices_over_old += 1
                        assert stat["numInserts"] < stat["numWrites"], stat
                        name = parse_base_file_name(stat["path"].rsplit("/", 1)[-1])
                        assert name is not None and name.file_id == stat["fileId"]
        assert slices_over_old > 0, "no flush packed into a small group"
        # A trickle never fills a buffer: one open group per Kafka partition and table partition.
        for partition, file_ids in groups.items():
            assert len(file_ids) <= pipeline.partitions, (partition, file_ids)

        [table] = pipeline.read_agreed()  # Apache Hudi's reader and hudi-rs agree
        ids = table.column("id").to_pylist()
        assert len(ids) == RECORDS and len(set(ids)) == RECORDS
        commit_only = _commit_only_read(pipeline).column("id").to_pylist()
        assert sorted(commit_only) == sorted(ids)
        assert pipeline.live_files() <= pipeline.partition_files()
    finally:
        pipeline.stop_all()
