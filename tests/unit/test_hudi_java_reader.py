"""Apache Hudi's own Java reader (``tests/hudi_java.py``) against hudi-rs on real tables.

The integration tests trust ``Pipeline.read_agreed``; this proves its parts on tables whose
timeline is set up on purpose: replacecommits (completed, pending, archived before their files
are gone) and time travel read the same in both readers; every column type the sink writes
(nested columns, nulls, non-finite floats) compares equal; and a changed value, a lost or a
doubled row, is caught. One disagreement is pinned down: Hudi's Avro-based reader cannot read
a decimal stored as a Parquet INT32/INT64 (what Spark writes for precision <= 18 unless
``spark.sql.parquet.writeLegacyFormat`` is on, which Hudi's own Spark writer turns on for that
reason); hudi-rs can. Another: Hudi refuses time travel past a pending replacecommit of the
sink; hudi-rs answers. One JVM per test (docs/hudi-java-reader.md).
"""

from __future__ import annotations

import datetime as dt
import math
import os
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import test_maintenance
from hudi_java import JavaRead, ReadRequest, assert_same_rows, read_agreed, read_tables, rust_read
from test_committer_fencing import DDL, FS, Env, Staged
from test_maintenance import T, _cluster, _commit_small_files

from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.hudi.naming import base_file_name, new_file_id, partition_path, write_token
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.write_stats import WriteStat

pytestmark = pytest.mark.timeout(300)


def _rust(base: Path, as_of: str | None) -> pa.Table:
    return rust_read(str(base), as_of)


def _agree(base: Path, *as_of: str | None) -> list[JavaRead]:
    """Hudi's reads of ``base`` (one JVM), each checked against hudi-rs at its instant."""
    return [java for java, _ in read_agreed(str(base), *as_of)]


def _ids(read: JavaRead) -> list[str]:
    return sorted(read.column("id"))


def test_replacecommits_and_time_travel_read_alike(tmp_path: Path) -> None:
    env = _env(tmp_path, DDL)
    committer = env.committer("a")
    ids = _commit_small_files(env, committer, T[:5])
    _cluster(env, committer, T[5])
    later = _commit_small_files(env, committer, T[6:7])
    ReplaceTimeline(env.table()).start(T[7])  # a replacecommit never decided: pending

    now, before, clustered = _agree(env.base, None, T[4], T[5])
    assert now.query_instant == T[6] and _ids(now) == sorted(ids + later)
    assert len(now.files) == 2  # the clustered file group and T6's; the replaced five hidden
    assert _ids(before) == ids and len(before.files) == 5
    assert _ids(clustered) == ids and len(clustered.files) == 1
    assert set(clustered.column("_hoodie_commit_time")) == set(T[:5])  # rows keep their instant


def test_hudi_refuses_time_travel_past_a_pending_replacecommit_which_hudi_rs_answers(tmp_path: Path) -> None:
    """The sink's ``.replacecommit.requested`` is empty (no Avro clustering plan), so Hudi
    cannot tell a pending clustering from a pending write and refuses, as for any incomplete
    commit, to travel to an instant after it; hudi-rs reads. Snapshots and time travel before
    it agree."""
    env = _env(tmp_path, DDL)
    committer = env.committer("a")
    ids = _commit_small_files(env, committer, T[:3])
    ReplaceTimeline(env.table()).start(T[3])
    later = _commit_small_files(env, committer, T[4:5])
    now, before = _agree(env.base, None, T[2])
    assert _ids(now) == sorted(ids + later) and _ids(before) == ids
    assert _rust(env.base, T[4]).num_rows == len(ids + later)
    refused = f"HoodieTimeTravelException.*first incomplete commit timestamp '{T[3]}'"
    with pytest.raises(AssertionError, match=refused):
        read_tables([ReadRequest(str(env.base), T[4])])


def test_an_archived_replacecommit_whose_files_remain_doubles_rows_in_hudi_too(tmp_path: Path) -> None:
    """Why archival waits for cleaning: Hudi itself, like hudi-rs, counts base files older than
    the active timeline as committed, so replaced files come back once the replacecommit that
    hid them is archived (the table of test_maintenance's test of that, which checks hudi-rs)."""
    env = _env(tmp_path, DDL)
    test_maintenance.test_archiving_a_replacecommit_before_its_files_are_gone_doubles_rows(env)
    [now] = _agree(env.base, None)
    assert now.num_rows == 2 * 12 + 3  # 4 commits of 3 rows, replaced and clustered; 3 after


TYPES = ("id STRING, country STRING, n INT, big BIGINT, f FLOAT, d DOUBLE, ok BOOLEAN, "
         "ts TIMESTAMP, day DATE, price DECIMAL(9, 2), wide DECIMAL(18, 4), huge DECIMAL(38, 0), "
         "tags ARRAY<STRING>, attrs MAP<STRING, BIGINT>, "
         "addr STRUCT<city: STRING, zip: INT, at: ARRAY<STRUCT<ts: TIMESTAMP, amount: DECIMAL(9, 2)>>>")


def test_every_column_type_compares_equal(tmp_path: Path) -> None:
    env = _env(tmp_path, TYPES)
    at = dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC)
    data = {
        "n": [-(2**31), 7, None], "big": [2**63 - 1, -1, None], "f": [1.1, math.inf, None],
        "d": [0.1, math.nan, None], "ok": [True, False, None],
        "ts": [at, dt.datetime(2025, 1, 1, tzinfo=dt.UTC), None],
        "day": [dt.date(1969, 1, 1), dt.date(2025, 2, 28), None],
        "price": [Decimal("-1234567.89"), Decimal("0.10"), None],
        "wide": [Decimal("12345678901234.5678"), Decimal("-0.0001"), None],
        "huge": [Decimal("9" * 38), Decimal("-1"), None],
        "tags": [["a", None, "ü"], [], None], "attrs": [[("k", 1), ("l", None)], [], None],
        "addr": [{"city": "München", "zip": 80331, "at": [{"ts": at, "amount": Decimal("1.50")}]},
                 {"city": None, "zip": None, "at": []}, None],
    }
    _commit_one(env, data, decimals_as_integers=False)

    [now] = _agree(env.base, None)
    rows = {row["id"]: row for row in now.dicts()}
    assert rows["a"]["price"] == "-1234567.89" and rows["a"]["ts"] == -1
    assert rows["b"]["d"] == "NaN" and rows["b"]["f"] == "Infinity"
    assert rows["a"]["addr"]["at"] == [{"ts": -1, "amount": "1.50"}]
    assert rows["c"]["addr"] is None and rows["c"]["tags"] is None


def test_hudis_reader_refuses_decimals_stored_as_integers_which_hudi_rs_reads(tmp_path: Path) -> None:
    env = _env(tmp_path, "id STRING, country STRING, price DECIMAL(9, 2), wide DECIMAL(18, 4)")
    _commit_one(env, {"price": [Decimal("1.50"), None, Decimal("-2.00")],
                      "wide": [Decimal("0.0001"), Decimal("7"), None]}, decimals_as_integers=True)
    parquet = pq.ParquetFile(next((env.base / "de").glob("*.parquet"))).schema
    assert [parquet.column(i).physical_type for i in (7, 8)] == ["INT32", "INT64"]
    assert _rust(env.base, None).num_rows == 3
    with pytest.raises(AssertionError, match="decimal.*since the old schema type is: \"int\""):
        read_tables([ReadRequest(str(env.base))])


def test_a_changed_value_a_lost_row_or_a_doubled_row_is_caught(tmp_path: Path) -> None:
    env = _env(tmp_path, DDL)
    _commit_small_files(env, env.committer("a"), T[:2])
    [java] = read_tables([ReadRequest(str(env.base))])
    rust = _rust(env.base, java.query_instant)
    assert_same_rows(java, rust, "as written")
    seqno = rust.column("_hoodie_commit_seqno").to_pylist()
    changed = rust.set_column(rust.schema.get_field_index("_hoodie_commit_seqno"), "_hoodie_commit_seqno",
                              pa.array([seqno[0] + "x", *seqno[1:]], pa.string()))
    doubled = pa.concat_tables([rust.slice(0, 1), rust.slice(0, rust.num_rows - 1)])
    for wrong in (changed, rust.slice(1), doubled, rust.drop_columns(["amount"])):
        with pytest.raises(AssertionError, match="differ|disagree"):
            assert_same_rows(java, wrong, "tampered")


def _env(tmp_path: Path, ddl: str) -> Env:
    base = tmp_path / "warehouse" / "orders"
    config = TableConfig(base_path=str(base), name="orders", partition_field="country", schema=ddl)
    HudiTable(FS, str(base)).initialize(config, config.table_schema())
    return Env(base, config, config.table_schema())


def _commit_one(env: Env, data: dict[str, list[object]], decimals_as_integers: bool) -> None:
    """Commit one base file of three rows (ids a, b, c in partition de) holding ``data``."""
    committer = env.committer("a")
    committer.start(T[0])
    staged = _stage(env, T[0], "de", ["a", "b", "c"], data, decimals_as_integers)
    committer.commit(T[0], env.metadata([staged], 3), [staged.move])


def _stage(env: Env, instant: str, country: str, ids: list[str], data: dict[str, list[object]],
           decimals_as_integers: bool) -> Staged:
    """One base file of ``instant`` with the given values. Decimals are stored as integers
    where they fit (Spark's default: INT32 up to precision 9, INT64 up to 18) or as
    fixed-length bytes (Spark's legacy format, what Hudi's writers use)."""
    part = partition_path(country, env.config.partition_field, False)
    name = base_file_name(new_file_id(), write_token(0, 0, 1), instant)
    target = env.table().staging_path(instant, part, name)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    n = len(ids)
    meta = {"_hoodie_commit_time": [instant] * n,
            "_hoodie_commit_seqno": [f"{instant}_0_{i}" for i in range(n)],
            "_hoodie_record_key": ids, "_hoodie_partition_path": [part] * n,
            "_hoodie_file_name": [name] * n, "id": ids, "country": [country] * n}
    schema = env.schema.file_arrow_schema
    table = pa.Table.from_pydict({**meta, **data}, schema=schema)
    pq.write_table(table, target, store_decimal_as_integer=decimals_as_integers)
    size = os.path.getsize(target)
    final = f"{part}/{name}"
    return Staged(os.path.relpath(target, env.base), final,
                  WriteStat(name.split("_")[0], final, part, n, n, size, size), tuple(ids))
