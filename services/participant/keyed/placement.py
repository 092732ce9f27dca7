"""Which file group each row of an upsert merge goes into, and which touched groups are combined.

Two rules keep a keyed table's files few without ever rewriting a row only to move it:

- **New keys.** They go into a small group of their table partition that the merge rewrites
  anyway (it is read and written whatever happens; more rows in it cost only their own
  write). Otherwise, a trickle (the whole flush below ``small_file_bytes / TRICKLE_FRACTION``
  of Arrow bytes, as insert-mode packing judges it) goes into the partition's own smallest
  small group, its rows carried; and a large flush writes a group with no old rows: a group
  of the partition whose every row is gone (an empty latest slice) is used again before a new
  one is made, so file ids do not pile up.
- **Combining.** Every small group of a table partition the merge rewrites is written anyway;
  they are dealt into as few new slices as fit below ``small_file_bytes`` (first fit, largest
  first), and each group dealt into another's slice gets an empty slice of its own in the
  same instant (its rows, less the keys the merge drops, move with their meta columns). This
  costs no row more than rewriting them apart, and one file less per group combined.

Why. Measured with ``hudi-sink bench --mode upsert`` (1M keys in 8 Kafka x 8 table partitions,
then 10,000 uniform updates/s): packing a large keyed backlog into one group per (Kafka
partition, table partition) carried ~2.5M old rows through Spark for 1M new ones (keyed
inserts at 0.44-0.47 x insert mode); writing new groups instead left 384 groups that every
update commit then rewrote as 384 files (update p99 50-60 s against 28-30 s). With both rules,
the backlog writes new groups (keyed inserts at 0.54-0.64 x insert mode over three runs) and
the first update commit combines them, which costs it a read of six files per new slice
instead of one: about 4 s more under the bench's load (update p99 33.4-35.4 s). Tried and
left out: a large flush carrying a group no larger than itself (half the groups, each row
rewritten at most once): the backlog fell to 0.47 x and the p99 moved within its spread (32.1 s).

Pure: slices come from :class:`hudi_sink.shared.hudi.slices.SliceCache`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hudi_sink.services.participant.packing import TRICKLE_FRACTION
from hudi_sink.shared.hudi.slices import GroupKey, Slice

__all__ = ["Slot", "combine_touched", "insert_slot"]


@dataclass
class Slot:
    """One file a merge writes: a new slice of ``group``, or a new group."""

    path: str
    group: Slice | None
    """The group written over; None for a new group."""
    drop: set[str] = field(default_factory=set)
    """Record keys whose stored rows in ``group`` are left out (updated or deleted)."""
    updates: int = 0
    """New rows in this file that replace a stored version of their key."""
    new_bytes: float = 0.0
    """Arrow bytes of the new rows dealt into this file so far (sizes combined files)."""


def insert_slot(path: str, *, flush_bytes: float, own: dict[GroupKey, Slice], slots: list[Slot],
                group_slot: Callable[[Slice], int], small_file_bytes: int) -> int:
    """The slot new keys of table partition ``path`` go to (see the module doc)."""
    if small_file_bytes > 0:
        touched = [s.group for s in slots if s.group is not None and s.path == path
                   and s.group.size_bytes < small_file_bytes]
        if touched:
            return group_slot(min(touched, key=_by_size))
        in_path = [s for s in own.values() if s.partition_path == path]
        if flush_bytes * TRICKLE_FRACTION < small_file_bytes:
            small = [s for s in in_path if s.size_bytes < small_file_bytes]
            if small:
                return group_slot(min(small, key=_by_size))
        emptied = [s for s in in_path if s.num_rows == 0]
        if emptied:
            return group_slot(min(emptied, key=lambda s: s.file_id))
    slots.append(Slot(path, None))
    return len(slots) - 1


def combine_touched(slots: list[Slot], small_file_bytes: int) -> dict[int, int]:
    """Slot index → the slot whose new slice takes its old rows and new rows (its own slice
    is then empty), for the small groups of each table partition that ``slots`` rewrite.
    Sizes are the old slices' bytes plus the new rows' Arrow bytes: an estimate (what the
    dropped keys free is not counted), so a combined file may end a little off the line."""
    if small_file_bytes <= 0:
        return {}
    by_path: dict[str, list[int]] = {}
    for index, slot in enumerate(slots):
        if slot.group is not None and slot.group.size_bytes < small_file_bytes:
            by_path.setdefault(slot.path, []).append(index)
    into: dict[int, int] = {}
    for indices in by_path.values():
        bins: list[tuple[int, float]] = []  # (target slot, bytes so far)
        for index in sorted(indices, key=lambda i: (-_bytes(slots[i]), _by_size(slots[i].group))):
            size = _bytes(slots[index])
            for n, (target, total) in enumerate(bins):
                if total + size <= small_file_bytes:
                    bins[n] = (target, total + size)
                    into[index] = target
                    break
            else:
                bins.append((index, size))
    return into


def _bytes(slot: Slot) -> float:
    assert slot.group is not None
    return slot.group.size_bytes + slot.new_bytes


def _by_size(group: Slice | None) -> tuple[int, str]:
    assert group is not None
    return group.size_bytes, group.file_id
