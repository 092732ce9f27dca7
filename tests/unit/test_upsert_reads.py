"""Comparing a table with the upsert oracle (``tests/upsert_reads.py``): the report names every
kind of difference an acceptance test must catch (a key twice, a key missing, a deleted key
still there, a wrong value, a seqno naming another offset), values read back in Arrow's types
compare with what was sent, and hudi-rs's incremental read returns the rows of the commits in
(start, end] on a real table with carried rows, as ``incremental_keys`` assumes."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from slice_tables import SliceTable
from upsert_oracle import Winner
from upsert_reads import (
    assert_snapshot_equals,
    commit_of,
    expected_seqno,
    incremental_keys,
    read_incremental,
    snapshot_problems,
)

C1, C2 = "20250101000000001", "20250101000000002"
COMMITS = [(C1, {0: 3, 1: 2}), (C2, {0: 6, 1: 2})]


def table(rows: list[dict[str, Any]], **types: pa.DataType) -> pa.Table:
    columns = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "id", "v"]
    schema = pa.schema([(c, types.get(c, pa.string() if c != "v" else pa.int64())) for c in columns])
    return pa.Table.from_pylist(rows, schema=schema)


def stored(key: str, v: Any, seqno: str) -> dict[str, Any]:
    return {"_hoodie_commit_time": seqno.split("_")[0], "_hoodie_commit_seqno": seqno,
            "_hoodie_record_key": key, "id": key, "v": v}


EXPECTED = {"a": Winner("a", {"id": "a", "v": 1}, 0, 4), "b": Winner("b", {"id": "b", "v": 2}, 1, 0)}


def test_an_equal_table_passes_with_seqnos() -> None:
    read = table([stored("a", 1, f"{C2}_0_4"), stored("b", 2, f"{C1}_1_0")])
    assert snapshot_problems(read, EXPECTED, commits=COMMITS) == []
    assert_snapshot_equals(read, EXPECTED, commits=COMMITS)


def test_every_kind_of_difference_is_named() -> None:
    read = table([stored("a", 7, f"{C1}_0_4"), stored("a", 1, f"{C2}_0_4"), stored("z", 0, f"{C1}_0_0")])
    with pytest.raises(AssertionError) as failure:
        assert_snapshot_equals(read, EXPECTED, commits=COMMITS)
    report = str(failure.value)
    assert "3 rows read, 2 keys expected" in report
    assert "1 keys with several rows: 'a' x2" in report
    assert "1 keys missing (expected, not read): b" in report
    assert "1 keys extra (read, not expected: deleted or never written): z" in report
    # The last of a's two rows is compared: right value and seqno. The first one's wrongness
    # is the duplicate line's business.
    read = table([stored("a", 7, f"{C1}_0_4"), stored("b", 2, f"{C1}_1_0")])
    [wrong] = snapshot_problems(read, EXPECTED, commits=COMMITS)
    assert "'a': v = 7, expected 1" in wrong
    assert f"seqno '{C1}_0_4' / commit time '{C1}', expected '{C2}_0_4'" in wrong


def test_a_long_report_is_cut() -> None:
    expected = {str(n): {"id": str(n), "v": n} for n in range(50)}
    [missing] = snapshot_problems(table([]), expected, limit=5)
    assert missing.startswith("50 keys missing") and missing.endswith("… and 45 more")


def test_a_table_without_rows_or_meta_columns_reads_as_empty() -> None:
    assert snapshot_problems(pa.table({"id": pa.array([], pa.string())}), {}) == []
    assert snapshot_problems(pa.table({}), {"a": {"id": "a"}})[0].startswith("1 keys missing")


def test_columns_and_ignore_choose_what_is_compared() -> None:
    read = table([stored("a", 9, f"{C2}_0_4")])
    expected = {"a": {"id": "a", "v": 1}}
    assert snapshot_problems(read, expected, ignore=["v"]) == []
    assert snapshot_problems(read, expected, columns=["id"]) == []
    assert snapshot_problems(read, {"a": {"id": "a"}}) != []  # absent from the row: must be null
    assert "no column 'w'" in snapshot_problems(read, expected, columns=["w"])[0]


@pytest.mark.parametrize("sent,kind,read", [
    ("2024-05-01T10:00:00.123+00:00", pa.timestamp("us", "UTC"),
     dt.datetime(2024, 5, 1, 10, 0, 0, 123000, dt.UTC)),
    ("2024-05-01T10:00:00Z", pa.timestamp("us"), dt.datetime(2024, 5, 1, 10)),
    (1714557600123, pa.timestamp("ms", "UTC"), dt.datetime(2024, 5, 1, 10, 0, 0, 123000, dt.UTC)),
    ("2024-05-01", pa.date32(), dt.date(2024, 5, 1)),
    (19844, pa.date32(), dt.date(2024, 5, 1)),
    (12.25, pa.decimal128(9, 2), Decimal("12.25")),
    (0.1, pa.float32(), 0.1),
    (3, pa.float64(), 3.0),
    (["x"], pa.list_(pa.string()), ["x"]),
])
def test_sent_values_compare_with_arrows(sent: Any, kind: pa.DataType, read: Any) -> None:
    columns = ["_hoodie_record_key", "x"]
    arrow = pa.Table.from_pylist([{"_hoodie_record_key": "a", "x": read}],
                                 schema=pa.schema([("_hoodie_record_key", pa.string()), ("x", kind)]))
    assert arrow.column_names == columns
    assert snapshot_problems(arrow, {"a": {"x": sent}}) == []


@pytest.mark.parametrize("sent,read", [(1, True), (True, 1), (1.5, 1.0), ("1", 1), (None, 0)])
def test_values_that_differ(sent: Any, read: Any) -> None:
    arrow = pa.Table.from_pylist([{"_hoodie_record_key": "a", "x": read}])
    assert snapshot_problems(arrow, {"a": {"x": sent}}) != []


def test_commit_of_the_winner() -> None:
    assert commit_of(EXPECTED["a"], COMMITS) == C2
    assert expected_seqno(EXPECTED["b"], COMMITS) == f"{C1}_1_0"
    with pytest.raises(AssertionError, match="partition 1 offset 2"):
        commit_of(Winner("c", {}, 1, 2), COMMITS)


def test_incremental_keys_are_winners_between_the_offsets() -> None:
    winners = {"a": Winner("a", {}, 0, 4), "b": Winner("b", {}, 1, 0), "c": Winner("c", {}, 0, 2),
               "d": Winner("d", {}, 2, 0)}
    assert incremental_keys(winners, {0: 3, 1: 2}, {0: 6, 1: 2}) == {"a"}
    assert incremental_keys(winners, {}, {0: 6, 1: 2}) == {"a", "b", "c"}


def test_hudi_rs_incremental_read_returns_the_rows_of_commits_in_the_range(tmp_path: Path) -> None:
    instants = [f"2025010100000000{n}" for n in range(1, 4)]
    slices = SliceTable.create(tmp_path / "t")
    slices.commit(instants[0], {"f1": ["a", "b"], "f2": ["x"]})
    slices.commit(instants[1], {"f1": ["c"]})  # a new slice of f1 carrying a and b
    slices.commit(instants[2], {"f2": ["y"]})

    def ids(start: str, end: str | None) -> list[str]:
        read = read_incremental(str(tmp_path / "t"), start, end)
        return sorted(read.column("id").to_pylist()) if read.num_rows else []

    assert ids(instants[0], instants[1]) == ["c"]
    assert ids(instants[0], None) == ["c", "y"]
    assert ids(instants[1], instants[2]) == ["y"]
    assert ids(instants[2], None) == []
    assert ids("0", instants[0]) == ["a", "b", "x"]
