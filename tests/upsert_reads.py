"""A table read with hudi-rs compared with the fold of its topic (``tests/upsert_oracle.py``):
which keys, values and ``_hoodie_commit_seqno`` it must hold, which keys an incremental read
must return, and a report that says what differs (missing keys, extra keys, wrong values)
rather than a bare inequality of two large tables."""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder
from upsert_oracle import Winner

__all__ = ["Commits", "commit_of", "expected_seqno", "incremental_keys", "read_incremental",
           "snapshot_problems", "assert_snapshot_equals"]


Commits = Sequence[tuple[str, Mapping[int, int]]]
"""Completed commits, oldest first, since the table was created: (instant, offsets)."""


def commit_of(winner: Winner, commits: Commits) -> str:
    """The instant that wrote ``winner``: the first commit whose offsets passed it."""
    for instant, offsets in commits:
        if offsets.get(winner.partition, 0) > winner.offset:
            return instant
    raise AssertionError(f"no commit covers partition {winner.partition} offset {winner.offset}")


def expected_seqno(winner: Winner, commits: Commits) -> str:
    """``_hoodie_commit_seqno`` of the winner's row."""
    return f"{commit_of(winner, commits)}_{winner.partition}_{winner.offset}"


def incremental_keys(winners: Mapping[str, Winner], start: Mapping[int, int],
                     end: Mapping[int, int]) -> set[str]:
    """Keys an incremental read (start commit, end commit] returns: those whose winner, in the
    fold at ``end``'s offsets, lies in ``[start[p], end[p])`` (keys deleted by then are
    absent: a copy-on-write incremental read returns rows, not deletes)."""
    return {key for key, w in winners.items()
            if start.get(w.partition, 0) <= w.offset < end.get(w.partition, 0)}


def read_incremental(base_uri: str, start: str, end: str | None = None,
                     storage_options: Mapping[str, str] | None = None) -> pa.Table:
    """hudi-rs's incremental read: rows written by commits after ``start`` up to ``end``
    (inclusive; ``None``: the latest). No rows: an empty table without columns."""
    builder = HudiTableBuilder.from_base_uri(base_uri)
    if storage_options:
        builder = builder.with_storage_options(dict(storage_options))
    options = (HudiReadOptions().with_query_type(HudiQueryType.Incremental)
               .with_start_timestamp(start))
    if end is not None:
        options = options.with_end_timestamp(end)
    batches = builder.build().read(options)
    return pa.Table.from_batches(batches) if batches else pa.table({})


def _same(expected: Any, actual: Any, kind: pa.DataType) -> bool:
    """Whether a sent value reads back as ``actual`` from a column of type ``kind``."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(actual, dt.datetime):
        if isinstance(expected, str):
            expected = dt.datetime.fromisoformat(expected.replace("Z", "+00:00"))
        elif isinstance(expected, int | float):  # epoch milliseconds (Connect's Timestamp)
            expected = dt.datetime.fromtimestamp(expected / 1000, dt.UTC)
        if isinstance(expected, dt.datetime):
            if (expected.tzinfo is None) != (actual.tzinfo is None):
                expected, actual = (x.replace(tzinfo=x.tzinfo or dt.UTC) for x in (expected, actual))
            return bool(expected == actual)
    if isinstance(actual, dt.date) and not isinstance(actual, dt.datetime):
        if isinstance(expected, str):
            return dt.date.fromisoformat(expected) == actual
        if isinstance(expected, int):  # days since the epoch (Connect's Date)
            return dt.date(1970, 1, 1) + dt.timedelta(days=expected) == actual
    if isinstance(actual, Decimal):
        return Decimal(str(expected)) == actual
    if isinstance(actual, float) and isinstance(expected, int | float | str):
        if pa.types.is_float32(kind):
            return float(struct.unpack("f", struct.pack("f", float(expected)))[0]) == actual
        return float(expected) == actual
    return bool(expected == actual) and isinstance(expected, bool) == isinstance(actual, bool)


def snapshot_problems(table: pa.Table, expected: Mapping[str, Winner | Mapping[str, Any]], *,
                      columns: Sequence[str] | None = None, ignore: Iterable[str] = (),
                      commits: Commits | None = None, limit: int = 20) -> list[str]:
    """What differs between ``table`` (a hudi-rs read) and ``expected`` (record key → winner or
    row): duplicate keys, missing and extra keys, wrong values in ``columns`` (default: every
    column but Hudi's meta columns and ``ignore``; a column the row lacks must be null), and,
    given ``commits`` (every commit since the table's creation), ``_hoodie_commit_seqno`` and
    ``_hoodie_commit_time`` of each winner's row. At most ``limit`` lines of each kind."""
    rows = table.to_pylist() if "_hoodie_record_key" in table.column_names else []
    skip = set(ignore)
    names = list(columns) if columns is not None else [
        c for c in table.column_names if not c.startswith("_hoodie_") and c not in skip]
    types = {name: table.schema.field(name).type for name in table.column_names}
    problems: list[str] = []
    found: dict[str, dict[str, Any]] = {}
    doubled: dict[str, int] = {}
    for row in rows:
        key = row["_hoodie_record_key"]
        if key in found:
            doubled[key] = doubled.get(key, 1) + 1
        found[key] = row
    problems += _listed("keys with several rows", [f"{k!r} x{n}" for k, n in sorted(doubled.items())],
                        limit)
    problems += _listed("keys missing (expected, not read)", sorted(set(expected) - set(found)), limit)
    problems += _listed("keys extra (read, not expected: deleted or never written)",
                        sorted(set(found) - set(expected)), limit)
    wrong: list[str] = []
    for key in sorted(set(expected) & set(found)):
        want, got = expected[key], found[key]
        sent = want.row if isinstance(want, Winner) else want
        for name in names:
            if name not in types:
                wrong.append(f"{key!r}: no column {name!r} in the table")
            elif not _same(sent.get(name), got[name], types[name]):
                wrong.append(f"{key!r}: {name} = {got[name]!r}, expected {sent.get(name)!r}")
        if commits is not None and isinstance(want, Winner):
            seqno = expected_seqno(want, commits)
            if (got.get("_hoodie_commit_seqno"), got.get("_hoodie_commit_time")) != (
                    seqno, seqno.split("_", 1)[0]):
                wrong.append(f"{key!r}: seqno {got.get('_hoodie_commit_seqno')!r} / commit time "
                             f"{got.get('_hoodie_commit_time')!r}, expected {seqno!r} (winner at "
                             f"partition {want.partition} offset {want.offset})")
    problems += _listed("wrong values", wrong, limit, ";\n  ")
    return problems


def _listed(what: str, items: list[str], limit: int, sep: str = ", ") -> list[str]:
    if not items:
        return []
    shown = ("\n  " if sep != ", " else "") + sep.join(items[:limit])
    more = f" … and {len(items) - limit} more" if len(items) > limit else ""
    return [f"{len(items)} {what}: {shown}{more}"]


def assert_snapshot_equals(table: pa.Table, expected: Mapping[str, Winner | Mapping[str, Any]], *,
                           columns: Sequence[str] | None = None, ignore: Iterable[str] = (),
                           commits: Commits | None = None, what: str = "snapshot") -> None:
    """Fail with :func:`snapshot_problems`' report unless ``table`` holds exactly ``expected``."""
    problems = snapshot_problems(table, expected, columns=columns, ignore=ignore, commits=commits)
    if problems:
        raise AssertionError(f"{what}: {table.num_rows} rows read, {len(expected)} keys expected\n"
                             + "\n".join(problems))
