"""Partition values land where Java Hudi looks for them and read back unchanged (issue 9, 7).

Records with hostile partition values (non-ASCII, ``/``, ``%``, ``#``, ``=``, leading dots,
control characters) go through the contract: Kafka, coordinator, participant (real Spark),
the table on disk. Each one must land in the directory Hudi's own encoder
(``PartitionPathEncodeUtils.escapePathName``, transcribed in ``tests/hudi_reference.py``)
produces — apart from our two escapes, which Hudi's decoder reads back to the same value —
and must read back unchanged through hudi-rs, also when filtered on. A value whose directory
name no filesystem can hold is dead-lettered instead of failing its flush forever.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pyarrow.compute as pc
import pytest
from hudi import HudiReadOptions, HudiTableBuilder
from hudi_reference import hudi_escape, hudi_unescape
from pipeline import Pipeline
from test_bad_records import _produce, _read_all

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(600)

#: value -> its directory, where it differs from Hudi's ``escapePathName`` (our escapes).
OUR_ESCAPES: dict[str | None, str] = {
    ".hidden": "%2Ehidden",
    "..": "%2E.",
    ".hoodie": "%2Ehoodie",
    "../../etc": "%2E.%2F..%2Fetc",
    "metadata": "%6Detadata",
    None: "__HIVE_DEFAULT_PARTITION__",
    "": "__HIVE_DEFAULT_PARTITION__",
}
VALUES: list[str | None] = [
    "München", "日本/東京", "🙂", "a/b", "100%", "%C3%BC", "#1", "k=v", "a:b?*", "back\\slash",
    "tab\there", "sp ace+plus", *OUR_ESCAPES,
]
TOO_LONG = "x" * 300


def _directory(value: str | None) -> str:
    return "country=" + OUR_ESCAPES.get(value, hudi_escape(value or ""))


def test_partition_values_land_in_hudis_directories_and_read_back(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, partitions=1,
                        overrides={"table": {"hive_style_partitioning": True}})
    pipeline.produce(4)  # ordinary records, and the topic
    records = [
        orjson.dumps({"id": f"v{i}", "ts": 1700000000000 + i, "country": value,
                      "amount": float(i), "payload": "p"})
        for i, value in enumerate([*VALUES, TOO_LONG])
    ]
    asyncio.run(_produce(broker.bootstrap, pipeline.topic, list(records), 1))
    try:
        pipeline.start_ready("coordinator", "participant")
        pipeline.wait_offsets(4 + len(records), timeout_s=240)

        [table] = pipeline.read_agreed()  # Hudi's Java reader lists the same partitions
        assert table.num_rows == 4 + len(VALUES)
        rows = {row["id"]: row for row in table.to_pylist()}
        committed = {
            part for instant in pipeline.completed_commits()
            for part in pipeline.commit_metadata(instant)["partitionToWriteStats"]
        }
        for i, value in enumerate(VALUES):
            row = rows[f"v{i}"]
            directory = _directory(value)
            assert row["country"] == value
            assert row["_hoodie_partition_path"] == directory
            assert directory in committed
            assert (pipeline.base_path / directory / row["_hoodie_file_name"]).is_file()
            if value:
                assert hudi_unescape(directory.removeprefix("country=")) == value

        for i, value in enumerate(VALUES):
            if not value:
                continue  # null and "" share Hive's default partition, which Hudi reads as null
            filtered = _read_filtered(pipeline, value)
            assert filtered == [f"v{i}"], f"filter country = {value!r} returned {filtered}"

        dead = asyncio.run(_read_all(broker.bootstrap, f"{unique_name}-dlq", 1))
        assert len(dead) == 1
        headers = {k: v.decode() for k, v in dead[0].headers}  # type: ignore[attr-defined]
        assert headers["hudi.sink.error.class"] == "PartitionValueTooLong"
        assert "country" in headers["hudi.sink.error.message"]
        assert not any(len(p.name.encode()) > 255 for p in pipeline.base_path.iterdir())
    finally:
        pipeline.stop_all()


def _read_filtered(pipeline: Pipeline, value: str) -> list[str]:
    """Ids hudi-rs returns for ``country = value`` (partition pruning included)."""
    reader = HudiTableBuilder.from_base_uri(str(pipeline.base_path)).build()
    batches = reader.read(HudiReadOptions().with_filters([("country", "=", value)]))
    ids: list[str] = []
    for batch in batches:
        ids.extend(pc.cast(batch.column("id"), "string").to_pylist())
    return sorted(ids)
