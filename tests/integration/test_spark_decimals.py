"""Small-precision decimals, written by the participant's real Spark writer, read by Apache
Hudi's own Java reader (the authority) and by hudi-rs with exact values.

Spark writes a DECIMAL(p, s) with p <= 18 as Parquet INT32/INT64 by default, which Hudi's Avro
Parquet reader refuses ("old schema type is: int"). The writer turns on Spark's legacy format
for such writes (FIXED_LEN_BYTE_ARRAY decimals, as Hudi's own Spark writer does) unless the
schema has an ARRAY: the legacy format writes lists as ``bag``/``array`` groups, which Hudi's
Avro reader reads as null without a word. So: decimals at the top level and inside a STRUCT
and a MAP read exactly in both readers, also after clustering (pyarrow reads the legacy layout
and writes decimals as fixed-length bytes too); a table with arrays keeps the standard layout,
which hudi-rs reads exactly and Hudi refuses loudly rather than losing the arrays.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi_java import ReadRequest, read_agreed, read_tables, rust_read

from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.disposal import DirectDisposal
from hudi_sink.services.coordinator.maintenance.clustering import Clusterer
from hudi_sink.services.coordinator.maintenance.plan import plan_clustering
from hudi_sink.services.coordinator.maintenance.view import load_view
from hudi_sink.services.participant.spark_writer import PART_COLUMN, PlannedFile, SparkWriter
from hudi_sink.shared.config.settings import SparkConfig, TableConfig
from hudi_sink.shared.hudi.naming import base_file_name, new_file_id, partition_path, write_token
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.write_stats import WriteStat, build_commit_metadata
from hudi_sink.shared.schema.table_schema import TableSchema
from hudi_sink.shared.storage.fs import LocalFileSystem

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

FS = LocalFileSystem()
DDL = ("id STRING, country STRING, small DECIMAL(9, 2), mid DECIMAL(18, 4), big DECIMAL(38, 2), "
       "addr STRUCT<fee: DECIMAL(18, 4), total: DECIMAL(38, 2), at: STRUCT<price: DECIMAL(9, 2)>>, "
       "totals MAP<STRING, DECIMAL(9, 2)>, counts MAP<STRING, BIGINT>")
ARRAYS = ("parts ARRAY<DECIMAL(9, 2)>, tags ARRAY<STRING>, "
          "lines ARRAY<STRUCT<qty: INT, price: DECIMAL(9, 2)>>, nums ARRAY<BIGINT>")
INSTANTS = ["20250101000000001", "20250101000000002", "20250101000000003"]
CLUSTERING = "20250101000000004"


def _values(n: int) -> dict[str, list[Any]]:
    """Three rows per file: extremes of each precision, signs, scales, nulls at every level."""
    return {
        "small": [Decimal("9999999.99"), Decimal(f"-0.0{n + 1}"), None],
        "mid": [Decimal("99999999999999.9999"), Decimal(f"-{n}.0001"), None],
        "big": [Decimal("9" * 36 + ".99"), Decimal(f"-{n}.50"), None],
        "addr": [{"fee": Decimal("-99999999999999.9999"), "total": Decimal("-" + "9" * 36 + ".99"),
                  "at": {"price": Decimal("-9999999.99")}},
                 {"fee": None, "total": Decimal(f"{n}.00"), "at": None}, None],
        "totals": [[("k", Decimal(f"{n}.25")), ("l", None)], [], None],
        "counts": [[("x", 2**63 - 1), ("y", None)], [], None],
        "parts": [[Decimal("-9999999.99"), None, Decimal(f"{n}.10")], [], None],
        "tags": [["a", None, "ü"], [], None],
        "lines": [[{"qty": 1, "price": Decimal("0.01")}, {"qty": None, "price": None}], [], None],
        "nums": [[1, None, -(2**63)], [], None],
    }


@pytest.fixture(scope="module")
def writer() -> Iterator[SparkWriter]:
    writer = SparkWriter(SparkConfig(master="local[1]", conf={"spark.driver.memory": "1g"}), FS)
    try:
        yield writer
    finally:
        writer.stop()


def _write(writer: SparkWriter, table: HudiTable, schema: TableSchema, instant: str,
           n: int) -> tuple[WriteStat, tuple[str, str], list[dict[str, Any]]]:
    """One base file of ``instant`` written by ``writer`` into the staging area; returns its
    stat, its move and the rows it holds (table columns only)."""
    part = partition_path("de", "country", False)
    name = base_file_name(new_file_id(), write_token(0, n, 1), instant)
    staged = table.staging_path(instant, part, name)
    os.makedirs(os.path.dirname(staged), exist_ok=True)
    ids = [f"id-{n}-{i}" for i in range(3)]
    meta = {"_hoodie_commit_time": [instant] * 3,
            "_hoodie_commit_seqno": [f"{instant}_0_{i}" for i in range(3)],
            "_hoodie_record_key": ids, "_hoodie_partition_path": [part] * 3,
            "_hoodie_file_name": [name] * 3, "id": ids, "country": ["de"] * 3}
    values = {k: v for k, v in _values(n).items() if k in schema.file_arrow_schema.names}
    data = pa.Table.from_pydict({**meta, **values}, schema=schema.file_arrow_schema)
    [written] = writer.write(data.append_column(PART_COLUMN, pa.array([0] * 3, pa.int32())),
                             [PlannedFile(0, name.split("_")[0], part, name, staged)],
                             os.path.dirname(staged))
    final = f"{part}/{name}"
    stat = WriteStat(name.split("_")[0], final, part, 3, 3, written.size_bytes, written.size_bytes)
    move = (os.path.relpath(staged, table.base_path), final)
    return stat, move, data.drop_columns([c for c in meta if c not in ("id", "country")]).to_pylist()


def _decimal_types(path: Path) -> set[str]:
    """Physical types of every decimal leaf column of a Parquet file."""
    schema = pq.ParquetFile(path).schema
    return {schema.column(i).physical_type for i in range(len(schema))
            if schema.column(i).logical_type.type == "DECIMAL"}


def _rust_rows(base: Path, expected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """hudi-rs's snapshot, the columns of ``expected`` (maps as (key, value) tuples), by id."""
    rows = rust_read(str(base)).select(list(expected[0])).to_pylist()
    for row in rows:
        for name in ("totals", "counts"):
            row[name] = None if row[name] is None else [tuple(kv) for kv in row[name]]
    return sorted(rows, key=lambda r: str(r["id"]))


def _assert_exact(base: Path, expected: list[dict[str, Any]]) -> None:
    """Both readers agree on every row and column, and the rows are exactly what was written."""
    [(java, _)] = read_agreed(str(base), None)
    assert len(java.rows) == len(expected)
    assert _rust_rows(base, expected) == sorted(expected, key=lambda r: str(r["id"]))


def _commit_three(writer: SparkWriter, base: Path, ddl: str) -> tuple[TableCommitter, TableSchema,
                                                                       list[dict[str, Any]]]:
    """A table of ``ddl`` with three commits of one Spark-written file each."""
    config = TableConfig(base_path=str(base), name="orders", partition_field="country", schema=ddl)
    schema = config.table_schema()
    HudiTable(FS, str(base)).initialize(config, schema)
    committer = TableCommitter(FS, HudiTable(FS, str(base)), DirectDisposal(FS))
    committer.claim_epoch({"id": "a"})
    expected: list[dict[str, Any]] = []
    for n, instant in enumerate(INSTANTS):
        committer.start(instant)
        stat, move, rows = _write(writer, HudiTable(FS, str(base)), schema, instant, n)
        expected += rows
        committer.commit(instant, build_commit_metadata([stat], {"schema": schema.avro_schema_json()}),
                         [move])
    return committer, schema, expected


def test_small_decimals_read_exactly_by_hudi_and_hudi_rs(writer: SparkWriter, tmp_path: Path) -> None:
    base = tmp_path / "warehouse" / "orders"
    committer, schema, expected = _commit_three(writer, base, DDL)
    written = list((base / "de").glob("*.parquet"))
    assert len(written) == 3 and all(_decimal_types(f) == {"FIXED_LEN_BYTE_ARRAY"} for f in written)
    _assert_exact(base, expected)

    timeline = ReplaceTimeline(HudiTable(FS, str(base)))
    groups = plan_clustering(load_view(timeline).live, min_files=2, small_file_bytes=1 << 20,
                             target_file_bytes=1 << 24)
    Clusterer(committer, timeline, "snappy").run(CLUSTERING, groups, schema.avro_schema_json())
    [clustered] = [f for f in (base / "de").glob("*.parquet") if CLUSTERING in f.name]
    assert _decimal_types(clustered) == {"FIXED_LEN_BYTE_ARRAY"}
    _assert_exact(base, expected)


def test_a_table_with_arrays_keeps_the_standard_layout(writer: SparkWriter, tmp_path: Path) -> None:
    """With an ARRAY in the schema the legacy format would make Hudi's reader return the
    arrays as null; the standard layout is kept: hudi-rs reads every value exactly, Hudi's
    reader refuses the small decimals loudly."""
    base = tmp_path / "warehouse" / "orders"
    _, _, expected = _commit_three(writer, base, f"{DDL}, {ARRAYS}")
    written = list((base / "de").glob("*.parquet"))
    assert all(_decimal_types(f) == {"INT32", "INT64", "FIXED_LEN_BYTE_ARRAY"} for f in written)
    assert _rust_rows(base, expected) == sorted(expected, key=lambda r: str(r["id"]))
    with pytest.raises(AssertionError, match="decimal.*since the old schema type is: \"int\""):
        read_tables([ReadRequest(str(base))])
