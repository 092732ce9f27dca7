"""Which columns a flush writes without Parquet dictionaries (pure, no Spark)."""

from __future__ import annotations

import pyarrow as pa

from hudi_sink.services.participant.parquet_options import mostly_distinct_columns
from hudi_sink.services.participant.spark_writer import PART_COLUMN


def test_unique_and_free_text_columns_go_without_dictionary() -> None:
    rows = 3000
    table = pa.table({
        "_hoodie_commit_time": ["20260101000000000"] * rows,
        "_hoodie_record_key": [f"k{i}" for i in range(rows)],
        "country": ["us", "de"] * (rows // 2),
        "amount": [float(i) for i in range(rows)],
        "flag": [True, False] * (rows // 2),
        "tags": [["a"]] * rows,
        PART_COLUMN: pa.array([i % 7 for i in range(rows)], pa.int32()),
    })
    assert mostly_distinct_columns(table, skip=PART_COLUMN) == ["_hoodie_record_key", "amount"]


def test_only_the_first_rows_are_sampled_and_tiny_tables_keep_dictionaries() -> None:
    repeated_then_unique = pa.table({"v": ["x"] * 1000 + [f"u{i}" for i in range(5000)]})
    assert mostly_distinct_columns(repeated_then_unique, skip=PART_COLUMN) == []
    assert mostly_distinct_columns(pa.table({"v": ["only"]}), skip=PART_COLUMN) == []
    assert mostly_distinct_columns(pa.table({"v": ["a", "b", "c"]}), skip=PART_COLUMN) == ["v"]
