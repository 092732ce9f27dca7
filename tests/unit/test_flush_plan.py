"""plan_flush names files that never repeat and places them in Hudi-encoded directories."""

from __future__ import annotations

import uuid

import pytest
from hudi_reference import hudi_escape

from hudi_sink.services.participant import flush_plan
from hudi_sink.services.participant.decoded import Row
from hudi_sink.services.participant.flush_plan import FlushInput, plan_flush
from hudi_sink.services.participant.spark_writer import PART_COLUMN
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.hudi.naming import parse_base_file_name

SCHEMA = TableConfig(schema="id STRING, city STRING", record_key_field="id",
                     partition_field="city").table_schema()
STAGING = "/t/.hoodie/.temp/20250101000000001"


def _spec(flush_no: int = 0, hive_style: bool = True) -> FlushInput:
    return FlushInput(topic="orders", partition=3, source_index=3, instant="20250101000000001",
                      flush_no=flush_no, writer_nonce=7, staging_dir=STAGING,
                      hive_style=hive_style)


def _rows(*cities: str | None) -> list[Row]:
    return [Row({"id": str(i), "city": c}, str(i), c) for i, c in enumerate(cities)]


def test_one_uuid_file_per_table_partition_in_hudi_encoded_directories() -> None:
    rows = _rows("München", "a/b", "München", ".hoodie", None)
    table, plans = plan_flush(rows, [10, 11, 12, 13, 14], SCHEMA, _spec())
    assert [p.partition_path for p in plans] == [
        "city=München", f"city={hudi_escape('a/b')}", "city=%2Ehoodie",
        "city=__HIVE_DEFAULT_PARTITION__",
    ]
    assert len({p.file_id for p in plans}) == 4
    for plan in plans:
        prefix, _, index = plan.file_id.rpartition("-")
        assert uuid.UUID(prefix).version == 4 and index == "0"
        parsed = parse_base_file_name(plan.file_name)
        assert parsed is not None
        assert parsed == (plan.file_id, "3-0-7", "20250101000000001")
        assert plan.staged_path == f"{STAGING}/{plan.partition_path}/{plan.file_name}"
    assert table.column(PART_COLUMN).to_pylist() == [0, 1, 0, 2, 3]
    assert table.column("_hoodie_partition_path").to_pylist() == [
        plans[i].partition_path for i in (0, 1, 0, 2, 3)]
    assert table.column("_hoodie_file_name").to_pylist() == [
        plans[i].file_name for i in (0, 1, 0, 2, 3)]
    assert table.column("_hoodie_commit_seqno").to_pylist()[0] == "20250101000000001_3_10"


def test_the_same_flush_planned_again_never_reuses_a_name() -> None:
    # A partition that moves away and back within one instant restarts flush_no at 0 with
    # the same writer nonce; a retried flush plans the same rows again. Names must differ,
    # or the second rename collides with the first file.
    rows = _rows("sf", "la")
    first = {p.file_name for p in plan_flush(rows, [0, 1], SCHEMA, _spec())[1]}
    second = {p.file_name for p in plan_flush(rows, [0, 1], SCHEMA, _spec())[1]}
    assert len(first) == len(second) == 2
    assert not first & second


def test_string_keys_and_partitions_in_arrow_match_the_row_by_row_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """String keys and partition values are mapped in Arrow, other types row by row; both
    give the same paths, indices (values sharing a path share a file) and meta columns."""
    cities: list[str | None] = ["b", None, "", "__HIVE_DEFAULT_PARTITION__", "a/b", "b", None]
    rows = _rows(*cities)
    by_arrow, arrow_plans = plan_flush(rows, list(range(7)), SCHEMA, _spec(hive_style=False))
    with monkeypatch.context() as patch:  # every column counts as non-string: the row path
        patch.setattr(flush_plan.pa.types, "is_string", lambda _type: False)
        by_rows, row_plans = plan_flush(rows, list(range(7)), SCHEMA, _spec(hive_style=False))
    for column in ("_hoodie_partition_path", PART_COLUMN, "_hoodie_record_key",
                   "_hoodie_commit_seqno", "_hoodie_commit_time", "id", "city"):
        assert by_arrow.column(column).to_pylist() == by_rows.column(column).to_pylist(), column
    assert [p.partition_path for p in arrow_plans] == [p.partition_path for p in row_plans]
    assert by_arrow.column(PART_COLUMN).to_pylist() == [0, 1, 1, 1, 2, 0, 1]


def test_equal_partition_values_that_spell_differently_name_their_own_partitions() -> None:
    """0.0 and -0.0 are equal (and hash alike) but are two partitions, as Hudi names them."""
    schema = TableConfig(schema="id STRING, score DOUBLE", record_key_field="id",
                         partition_field="score").table_schema()
    rows = [Row({"id": str(i), "score": v}, str(i), v) for i, v in enumerate([0.0, -0.0, 0.0])]
    table, plans = plan_flush(rows, [0, 1, 2], schema, _spec())
    assert [p.partition_path for p in plans] == ["score=0.0", "score=-0.0"]
    assert table.column(PART_COLUMN).to_pylist() == [0, 1, 0]
