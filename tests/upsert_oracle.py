"""The expected upsert-mode table, computed from the Kafka records alone: an oracle written apart
from the code under test (it imports nothing of ``services/participant/keyed``), so a test
compares the sink's table with Hudi's rules rather than with the sink's own reading of them.

:func:`fold` takes a topic's records (any partitions, read up to a commit's
``kafka.commit.offsets``) and applies them one by one, in offset order, with Hudi's
``DefaultHoodieRecordPayload`` rules:

- a row with an ordering value (``precombine``) replaces the current version of its key unless
  that version's ordering value is strictly greater: then the row changes nothing (counted in
  :attr:`Fold.ignored`); a tie goes to the later offset;
- a row without one (no precombine field, or the field absent or null) always replaces it, and
  a current version without one never holds a row off;
- a tombstone (null value; the key read from the message key) or a Debezium ``op: d`` deletes
  the key whatever is stored; a soft delete (``delete_field`` equal to ``delete_marker``) is a row
  that deletes, so it loses to a version ordered above it like any row;
- a delete takes the ordering value with it: a later row of the key inserts.

Per surviving key the :class:`Winner` names the (partition, offset) that wrote it, which is
what its ``_hoodie_commit_seqno`` names (``<instant>_<partition>_<offset>``, the partition
being the source index of the table's one topic). Comparing a table with a fold:
``tests/upsert_reads.py``; reading a topic (a broker): ``tests/integration/keyed_oracle.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka.partitioner import murmur2

__all__ = ["Record", "Spec", "Winner", "Rejection", "Fold", "hudi_key", "fold",
           "murmur2_partition"]

NULL_PART, EMPTY_PART = "__null__", "__empty__"
"""How Hudi's ComplexKeyGenerator writes a null and an empty value of a composite key."""


@dataclass(frozen=True)
class Record:
    """One Kafka record as the oracle needs it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class Spec:
    """How the sink under test is configured to read the records (its ``table``, ``kafka`` and
    ``upsert`` settings, in the oracle's words)."""

    key_fields: tuple[str, ...] = ("id",)
    precombine: str | None = None
    envelope: str = "none"
    """``none`` (the value is the row) or ``debezium``."""
    value_format: str = "json"
    """``json`` or ``connect_json`` (a ``{"schema", "payload"}`` envelope); ignored when
    ``decode_value`` is given."""
    key_format: str = "string"
    """How a message key names a record key: ``string`` (UTF-8 text) or ``json`` (an object of
    the key fields, a Connect ``{"schema", "payload"}`` one included)."""
    delete_field: str | None = None
    delete_marker: str = "true"
    partitions: int | None = None
    """The topic's partition count: records whose message key murmur2 places in another
    partition (or that have none) are rejected, as ``upsert.key_partitioner: murmur2`` does.
    ``None``: no check (a key found in two partitions is then an error of the oracle)."""
    decode_value: Callable[[bytes], Mapping[str, Any] | None] | None = None
    """A decoder for other value formats (Avro); ``None`` from it is a tombstone."""
    decode_key: Callable[[bytes], Any] | None = None
    """A decoder for other key formats: returns the key fields' mapping or the key's text."""


@dataclass(frozen=True)
class Winner:
    """The version of a key the table must hold."""

    key: str
    row: Mapping[str, Any]
    partition: int
    offset: int
    ordering: Any = None


@dataclass(frozen=True)
class Rejection:
    """A record the sink must dead-letter (it changes nothing in the table)."""

    partition: int
    offset: int
    reason: str


@dataclass
class Fold:
    """The table the records amount to, and what became of the records that left no row."""

    winners: dict[str, Winner] = field(default_factory=dict)
    ignored: list[tuple[int, int]] = field(default_factory=list)
    """(partition, offset) of rows ordered below the key's current version: no effect."""
    deletes: list[tuple[int, int]] = field(default_factory=list)
    """Deletes that removed a row."""
    absent_deletes: list[tuple[int, int]] = field(default_factory=list)
    """Deletes of a key the table did not hold then (the tombstone after a Debezium delete)."""
    rejected: list[Rejection] = field(default_factory=list)


def hudi_key(values: Mapping[str, Any], fields: Sequence[str]) -> str | None:
    """``_hoodie_record_key`` of ``values``: the value's text for one field, ``a:1,b:2`` for
    several (Hudi's key generators; Java's ``true``/``false``); ``None`` when there is no key."""
    def text(value: Any) -> str | None:
        if isinstance(value, bool):
            return "true" if value else "false"
        return None if value is None else str(value)

    if len(fields) == 1:
        return text(values.get(fields[0])) or None
    parts = [(name, text(values.get(name))) for name in fields]
    if all(not value for _, value in parts):
        return None
    return ",".join(f"{name}:{NULL_PART if value is None else value or EMPTY_PART}"
                    for name, value in parts)


def murmur2_partition(key: bytes, partitions: int) -> int:
    """Where Kafka's default partitioner puts ``key`` (aiokafka's murmur2, the Java client's)."""
    return int((murmur2(key) & 0x7FFFFFFF) % partitions)


@dataclass(frozen=True)
class _Change:
    key: str
    row: Mapping[str, Any] | None
    """``None``: a delete by key (tombstone, Debezium delete)."""
    soft_delete: bool = False


def _message_key(record: Record, spec: Spec) -> str:
    if record.key is None:
        raise ValueError("no message key to read the record key from")
    if spec.decode_key is not None:
        decoded = spec.decode_key(record.key)
    elif spec.key_format == "string":
        decoded = record.key.decode("utf-8")
        return _non_empty(decoded)
    else:
        decoded = orjson.loads(record.key)
    if isinstance(decoded, dict) and set(decoded) >= {"schema", "payload"}:
        decoded = decoded["payload"]
    if not isinstance(decoded, Mapping):
        if len(spec.key_fields) == 1 and isinstance(decoded, str | int):
            decoded = {spec.key_fields[0]: decoded}
        else:
            return _non_empty(decoded) if isinstance(decoded, str) else _non_empty(None)
    return _non_empty(hudi_key(decoded, spec.key_fields))


def _non_empty(key: str | None) -> str:
    if not key:
        raise ValueError("the message key holds no record key")
    return key


def _value(record: Record, spec: Spec) -> Mapping[str, Any] | None:
    assert record.value is not None
    if spec.decode_value is not None:
        return spec.decode_value(record.value)
    parsed = orjson.loads(record.value)
    if spec.value_format == "connect_json":
        if not isinstance(parsed, dict) or not set(parsed) >= {"schema", "payload"}:
            raise ValueError("not a Connect JSON envelope")
        parsed = parsed["payload"]  # null: a tombstone
    elif parsed is None:
        raise ValueError("the value is JSON null, not an object")
    if parsed is not None and not isinstance(parsed, dict):
        raise ValueError(f"the value is not an object: {parsed!r:.60}")
    return parsed


def _row_change(row: Mapping[str, Any], spec: Spec) -> _Change:
    key = hudi_key(row, spec.key_fields)
    if key is None:
        raise ValueError(f"no record key in fields {list(spec.key_fields)}")
    soft = (spec.delete_field is not None
            and hudi_key({"f": row.get(spec.delete_field)}, ["f"]) == spec.delete_marker)
    return _Change(key, row, soft)


def _change(record: Record, spec: Spec) -> _Change:
    """The record's meaning; ValueError says why it has none (the sink dead-letters it)."""
    if spec.partitions is not None:
        if record.key is None:
            raise ValueError("KeyPartitionMismatch: no message key")
        home = murmur2_partition(record.key, spec.partitions)
        if home != record.partition:
            raise ValueError(f"KeyPartitionMismatch: the key belongs in partition {home}")
    value = None if record.value is None else _value(record, spec)
    if value is None:
        return _Change(_message_key(record, spec), None)
    if spec.envelope == "none":
        return _row_change(value, spec)
    op = value.get("op")
    if op in ("c", "r", "u"):
        after = value.get("after")
        if not isinstance(after, Mapping):
            raise ValueError(f"Debezium op {op!r} without an 'after' row")
        return _row_change(after, spec)
    if op == "d":
        before = value.get("before")
        key = hudi_key(before, spec.key_fields) if isinstance(before, Mapping) else None
        return _Change(key if key is not None else _message_key(record, spec), None)
    raise ValueError(f"Debezium op {op!r} names no key to write")


def _above(stored: Any, incoming: Any, key: str) -> bool:
    try:
        return bool(stored > incoming)
    except TypeError:
        raise AssertionError(f"key {key!r}: ordering values {stored!r} and {incoming!r} do not "
                             "compare; the test's records are inconsistent") from None


def fold(records: Iterable[Record], spec: Spec, upto: Mapping[int, int] | None = None) -> Fold:
    """The table ``records`` amount to (module doc), each partition's records taken below
    ``upto[partition]`` (a commit's ``kafka.commit.offsets``: the next offset to read; a
    partition it does not name contributes nothing). ``None``: every record."""
    result = Fold()
    home: dict[str, int] = {}
    chosen = sorted((r for r in records if upto is None or r.offset < upto.get(r.partition, 0)),
                    key=lambda r: (r.partition, r.offset))
    for record in chosen:
        where = (record.partition, record.offset)
        try:
            change = _change(record, spec)
        except (ValueError, UnicodeDecodeError, orjson.JSONDecodeError) as exc:
            result.rejected.append(Rejection(*where, str(exc)))
            continue
        first = home.setdefault(change.key, record.partition)
        if first != record.partition:
            raise AssertionError(f"key {change.key!r} is in partitions {first} and "
                                 f"{record.partition}: there is no order between them (give "
                                 "Spec.partitions to reject misplaced keys as the sink does)")
        current = result.winners.get(change.key)
        ordering = None
        if change.row is not None and spec.precombine is not None:
            ordering = change.row.get(spec.precombine)
        if (current is not None and ordering is not None and current.ordering is not None
                and _above(current.ordering, ordering, change.key)):
            result.ignored.append(where)
        elif change.row is None or change.soft_delete:
            (result.deletes if current is not None else result.absent_deletes).append(where)
            result.winners.pop(change.key, None)
        else:
            result.winners[change.key] = Winner(change.key, change.row, *where, ordering)
    return result
