"""Write-time file sizing: which of a partition's own small file groups a flush's rows go into.

Hudi's own writers keep files few without a table service by giving new rows to small file
groups first: the group's next slice is its old rows plus the new ones (Copy-on-Write). We do
the same, with two rules that keep high-volume ingestion from rewriting anything:

- Only an instant's **last** flush packs (the one END asks for), and only when it is the
  instant's only flush: a flush started because the buffer filled is high volume by
  definition and writes new groups, and so does the rest of that instant after it.
- A flush that is itself large (at least ``small_file_bytes / TRICKLE_FRACTION`` of Arrow
  bytes, over all its table partitions) writes new groups.

Why both, measured with ``hudi-sink bench --records 600000 --participants 1 --steady-seconds
0`` (a backlog in 4 Kafka partitions × 8 table partitions): when every last flush could pack
and "large" was judged per table partition, a backlog's flushes, spread thin over the table
partitions, were trickles everywhere and rewrote a small group in each: sink_rps_1 21,540 to
24,444 records/s against 25,486 to 27,071 without write-time sizing.

What packs is a trickle, and it goes into the partition's own **smallest** group whose latest
slice is below ``table.small_file_bytes``, which the partition has not written yet in this
instant. A trickle of ``b`` bytes per commit therefore rewrites its open group at most about
``small_file_bytes / b`` times before the group is full (the write amplification of a
trickle); files per table partition stay bounded by the data, not by the number of commits.

Pure: the latest slices come from :class:`hudi_sink.shared.hudi.slices.SliceCache`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from hudi_sink.shared.hudi.slices import GroupKey, Slice

__all__ = ["Carry", "TRICKLE_FRACTION", "choose_carries", "may_pack"]

TRICKLE_FRACTION = 32
"""A flush is a trickle below ``small_file_bytes / 32`` of Arrow bytes (about 3 MiB with the
default 100 MiB): well below what a full buffer writes."""


@dataclass(frozen=True)
class Carry:
    """The slice a planned file is written over: its rows are carried into the new file."""

    file_id: str
    source_path: str
    """Where the old slice is read from (absolute, as the Spark writer reads it)."""
    prev_commit: str
    rows: int
    """Rows carried over: the old slice's, less those of ``drop_keys`` it holds."""
    drop_keys: frozenset[str] = frozenset()
    """Upsert mode: record keys updated or deleted, left out of the carried rows."""
    updates: int = 0
    """Upsert mode: new rows of the file that replace a stored version of their key."""
    deletes: int = 0
    """Upsert mode: stored rows left out because their key was deleted."""


def may_pack(*, final: bool, flush_no: int) -> bool:
    """Whether a flush may pack into small groups: the instant's last flush (END's), when no
    flush of a full buffer came before it in the instant (``flush_no``: flushes before it)."""
    return final and flush_no == 0


def choose_carries(
    paths: list[str],
    arrow_bytes: list[int],
    latest: Mapping[GroupKey, Slice],
    *,
    owner: int,
    small_file_bytes: int,
    used: set[GroupKey],
    base_path: str,
    budget_bytes: int | None = None,
) -> dict[int, Carry]:
    """Index into ``paths`` → the slice that table partition's rows pack into (absent: a new
    group). ``arrow_bytes[i]`` is the flush's Arrow size for ``paths[i]``; ``used`` holds the
    groups this partition already wrote in the instant (never packed twice: one instant may
    hold one slice per group). ``budget_bytes`` bounds the old slices' bytes one flush
    carries (they make the Spark job larger than its new rows)."""
    if small_file_bytes <= 0 or sum(arrow_bytes) * TRICKLE_FRACTION >= small_file_bytes:
        return {}  # off, or a flush that is itself large: new groups
    by_partition: dict[str, list[Slice]] = {}
    for key, current in latest.items():
        if current.owner == owner and current.size_bytes < small_file_bytes and key not in used:
            by_partition.setdefault(current.partition_path, []).append(current)
    chosen: dict[int, Carry] = {}
    for index, path in enumerate(paths):
        if arrow_bytes[index] * TRICKLE_FRACTION >= small_file_bytes:
            continue  # large: a new group
        candidates = by_partition.get(path)
        if not candidates:
            continue
        smallest = min(candidates, key=lambda s: (s.size_bytes, s.instant, s.file_id))
        if budget_bytes is not None:
            if smallest.size_bytes > budget_bytes:
                continue
            budget_bytes -= smallest.size_bytes
        chosen[index] = Carry(file_id=smallest.file_id,
                              source_path=posixpath.join(base_path, smallest.path),
                              prev_commit=smallest.instant, rows=smallest.num_rows)
    return chosen
