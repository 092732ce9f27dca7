"""Plan one upsert merge: the instant's folded changes against the partition's own file groups.

Copy-on-Write, the way Hudi's writers do it (``HoodieMergeHandle``): every file group a change
touches gets a new slice (same file id, new instant) holding its old rows minus the keys
updated or deleted, plus the winners written into it. This module decides, per key, what
happens (``keyed.fold.decide``: insert, update, superseded, delete, delete of an absent key)
after looking the keys up in the latest committed slices of the groups this partition owns (an
owner-scoped SIMPLE index: only ``_hoodie_record_key`` and the ordering column are read, with
pyarrow); the Spark writer then carries the old rows (``Carry.drop_keys`` left out) without
them passing through Python.

Where a key lives: anywhere in the owner's groups (every table partition is looked in, the
key column filtered in Arrow): a row whose partition value changed replaces its old row, a key
stored twice (in any group) is left once, and a tombstone needs no partition value. Inserts go
into the table partition's own smallest group below ``table.small_file_bytes`` (one the merge
touches anyway first) unless the inserts there are large (``packing.TRICKLE_FRACTION``): then a
new group, so a keyed append-mostly stream rewrites little.

"Large" is judged per table partition here, not on the whole flush as insert-mode packing
judges it: upsert tables are rewritten group by group, and every group costs each merge that
touches it a key read, a scan and a file. Measured with ``hudi-sink bench --mode upsert`` (1M
keys in 8 Kafka x 8 table partitions, then 10,000 uniform updates/s): judged on the whole
flush, the keyed backlog wrote 384 groups instead of 64-72 and ran faster (17,256 against
13,126-13,811 records/s), but every update commit then took 15-27 s instead of 11-18 s and
the update p99 rose from 34-38 s to 50-60 s.

Blocking (reads Parquet footers and key columns): call from a worker thread.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hudi_sink.services.participant.decoded import Row
from hudi_sink.services.participant.flush_plan import (
    FlushInput,
    PartitionPaths,
    PreparedFlush,
    prepare_flush,
)
from hudi_sink.services.participant.keyed.fold import Decision, Folded, decide, offset_outcomes
from hudi_sink.services.participant.packing import TRICKLE_FRACTION, Carry
from hudi_sink.shared.hudi.slices import GroupKey, Slice
from hudi_sink.shared.schema.table_schema import TableSchema
from hudi_sink.shared.storage.fs import FileSystem

__all__ = ["MergePlan", "plan_merge"]

KEY_COLUMN = "_hoodie_record_key"


@dataclass
class _Slot:
    path: str
    group: Slice | None
    """The group written over; None for a new group."""
    drop: set[str] = field(default_factory=set)
    updates: int = 0


@dataclass(frozen=True)
class MergePlan:
    prepared: PreparedFlush | None
    """The rows to write, ``part_index`` pointing at their file (None: nothing to write)."""
    carries: dict[int, Carry]
    outcomes: Counter[str]
    """Offsets per ``keyed.fold.Outcome``: every folded offset exactly once."""


def plan_merge(changes: dict[str, Folded], latest: dict[GroupKey, Slice], *, owner: int,
               schema: TableSchema, spec: FlushInput, fs: FileSystem, base_path: str,
               small_file_bytes: int, precombine: str | None) -> MergePlan:
    own = {key: s for key, s in latest.items() if s.owner == owner}
    field_name = schema.partition_field
    path_of = PartitionPaths(field_name, spec.hive_style)
    paths_of: dict[str, str | None] = {
        key: path_of.of(folded.winner.partition_value) if isinstance(folded.winner.row, Row)
        else None for key, folded in changes.items()}
    # Keys are looked up in every table partition of the owner's groups: a key lives in one
    # Kafka partition, so in the owner's groups, wherever its partition value put it — a row
    # whose partition value changed replaces its old row, and a tombstone (no partition
    # value) finds it (Hudi's global index, scoped to the owner).
    stored = _stored_keys(list(own.values()), set(changes), fs, base_path, precombine)

    slots: list[_Slot] = []
    slot_of_group: dict[GroupKey, int] = {}

    def group_slot(where: Slice) -> int:
        key = (where.partition_path, where.file_id)
        if key not in slot_of_group:
            slot_of_group[key] = len(slots)
            slots.append(_Slot(where.partition_path, where))
        return slot_of_group[key]

    decisions: dict[str, Decision] = {}
    writes: list[tuple[str, int | None]] = []  # (key, group slot; None: an insert)
    for key, folded in changes.items():
        path = paths_of[key]
        places = stored.get(key, [])
        orderings = [o for _, o in places if o is not None]
        decision = decide(folded, stored=bool(places),
                          stored_ordering=max(orderings) if orderings else None)
        decisions[key] = decision
        if decision in (Decision.UPDATE, Decision.DELETE):
            for where, _ in places:  # every stored row of the key goes (a duplicate heals)
                slots[group_slot(where)].drop.add(key)
        if decision is Decision.UPDATE:
            home = [where for where, _ in places if where.partition_path == path]
            if home:  # into the group holding it in its table partition
                index = group_slot(home[0])
                slots[index].updates += 1
                writes.append((key, index))
            else:  # its partition value changed: a new row there, the old one dropped
                writes.append((key, None))
        elif decision is Decision.INSERT:
            writes.append((key, None))
    outcomes = Counter(str(o) for o in offset_outcomes(changes, decisions).values())

    rows = [changes[key].winner.row for key, _ in writes]
    prepared = None
    if rows:
        offsets = [changes[key].winner.offset for key, _ in writes]
        prepared = prepare_flush(rows, offsets, schema, spec)  # type: ignore[arg-type]
        row_bytes = prepared.columns.nbytes / max(prepared.num_rows, 1)
        inserts_per_path = Counter(paths_of[key] for key, slot in writes if slot is None)
        insert_slot: dict[str, int] = {}
        for path, count in inserts_per_path.items():
            assert path is not None
            insert_slot[path] = _insert_slot(path, count * row_bytes, own, slots, group_slot,
                                             small_file_bytes)
        part_index = [slot if slot is not None else insert_slot[paths_of[key] or ""]
                      for key, slot in writes]
        prepared = PreparedFlush(prepared.columns, pa.array(part_index, pa.int32()),
                                 [slot.path for slot in slots])
    elif slots:  # deletes only: the groups' new slices hold old rows only
        empty = prepare_flush([], [], schema, spec)
        prepared = PreparedFlush(empty.columns, pa.array([], pa.int32()), [s.path for s in slots])
    carries = {}
    for index, slot in enumerate(slots):
        if slot.group is None:
            continue
        # Stored rows removed (a key stored twice in one group counts twice: Spark drops both).
        present = sum(1 for key in slot.drop for where, _ in stored.get(key, [])
                      if where is slot.group)
        carries[index] = Carry(
            file_id=slot.group.file_id,
            source_path=posixpath.join(base_path, slot.group.path),
            prev_commit=slot.group.instant,
            rows=slot.group.num_rows - present,
            drop_keys=frozenset(slot.drop),
            updates=slot.updates,
            deletes=present - slot.updates,
        )
    return MergePlan(prepared, carries, outcomes)


def _insert_slot(path: str, insert_bytes: float, own: dict[GroupKey, Slice], slots: list[_Slot],
                 group_slot: Any, small_file_bytes: int) -> int:
    """The slot new keys of table partition ``path`` go to (see the module doc)."""
    if small_file_bytes > 0 and insert_bytes * TRICKLE_FRACTION < small_file_bytes:
        touched = [s.group for s in slots if s.group is not None and s.path == path
                   and s.group.size_bytes < small_file_bytes]
        candidates = touched or [s for s in own.values() if s.partition_path == path
                                 and s.size_bytes < small_file_bytes]
        if candidates:
            return int(group_slot(min(candidates, key=lambda s: (s.size_bytes, s.file_id))))
    slots.append(_Slot(path, None))
    return len(slots) - 1


def _stored_keys(slices: list[Slice], wanted: set[str], fs: FileSystem, base_path: str,
                 precombine: str | None) -> dict[str, list[tuple[Slice, Any]]]:
    """Record key → where it is stored (slice, ordering value; once per stored row) in
    ``slices``, for the ``wanted`` keys only (filtered in Arrow: a group's other keys never
    become Python objects)."""
    found: dict[str, list[tuple[Slice, Any]]] = {}
    columns = [KEY_COLUMN] + ([precombine] if precombine else [])
    wanted_keys = pa.array(sorted(wanted), pa.string())
    for where in slices:
        with fs.open_read(posixpath.join(base_path, where.path)) as handle:
            table = pq.read_table(handle, columns=columns)
        table = table.filter(pc.is_in(table.column(KEY_COLUMN), value_set=wanted_keys))
        keys = table.column(KEY_COLUMN).to_pylist()
        orderings = (table.column(precombine).to_pylist() if precombine
                     else [None] * len(keys))
        for key, ordering in zip(keys, orderings, strict=True):
            found.setdefault(key, []).append((where, ordering))
    return found
