"""What maintenance should do, as pure functions over the table's files and timeline."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from hudi_sink.shared.hudi.naming import instant_key
from hudi_sink.shared.hudi.retention import superseding_slice

__all__ = ["BaseFile", "plan_clustering", "earliest_retained", "cleanable", "cleanable_slices",
           "archivable"]


@dataclass(frozen=True)
class BaseFile:
    """One committed base file, one slice of its file group (``partition``, ``file_id``):
    ``path`` relative to the base path, written by ``instant``."""

    path: str
    partition: str
    file_id: str
    instant: str
    size: int


def plan_clustering(files: list[BaseFile], *, min_files: int, small_file_bytes: int,
                    target_file_bytes: int) -> list[list[BaseFile]]:
    """Groups of small files to rewrite, each into one file of about ``target_file_bytes``.

    Per table partition: nothing unless it holds more than ``min_files`` small files; the
    small files (oldest first) are cut into groups of about ``target_file_bytes`` input; a
    trailing group of a single file is left alone (rewriting it gains nothing).
    """
    by_partition: dict[str, list[BaseFile]] = {}
    for f in files:
        if f.size < small_file_bytes:
            by_partition.setdefault(f.partition, []).append(f)
    groups: list[list[BaseFile]] = []
    for partition in sorted(by_partition):
        small = sorted(by_partition[partition], key=lambda f: (instant_key(f.instant), f.path))
        if len(small) <= min_files:
            continue
        current: list[BaseFile] = []
        size = 0
        for f in small:
            current.append(f)
            size += f.size
            if size >= target_file_bytes:
                groups.append(current)
                current, size = [], 0
        if len(current) > 1:
            groups.append(current)
    return groups


def earliest_retained(completed: Collection[str], commits_retained: int) -> str | None:
    """Hudi's KEEP_LATEST_COMMITS: the oldest of the newest ``commits_retained`` completed
    instants; None while there are not more than that (nothing may be cleaned)."""
    ordered = sorted(completed, key=instant_key)
    if len(ordered) <= commits_retained:
        return None
    return ordered[-commits_retained]


def cleanable(replaced_by: Mapping[tuple[str, str], str], retained_from: str | None
              ) -> set[tuple[str, str]]:
    """File groups replaced at or before the earliest retained instant: no retained instant
    (snapshot or time travel at or after it) can read them."""
    if retained_from is None:
        return set()
    limit = instant_key(retained_from)
    return {group for group, by in replaced_by.items() if instant_key(by) <= limit}


def cleanable_slices(files: Iterable[BaseFile], retained_from: str | None,
                     provable: Collection[str]) -> list[tuple[BaseFile, str]]:
    """Committed slices no retained instant reads, each with the slice that supersedes it.

    KEEP_LATEST_COMMITS per file group (``shared.hudi.retention``): a slice is cleanable when
    a later committed slice of its group lies before ``retained_from``; every slice at or after
    it and the group's latest slice before it stay. Only slices in ``provable`` (instants the
    deleter sees listed: the active timeline's completed instants) count as superseding, so
    the deleter, which re-checks on the table, agrees with every file handed to it.
    """
    if retained_from is None:
        return []
    groups: dict[tuple[str, str], list[BaseFile]] = {}
    for f in files:
        groups.setdefault((f.partition, f.file_id), []).append(f)
    out: list[tuple[BaseFile, str]] = []
    for slices in groups.values():
        witnesses = [f.instant for f in slices if f.instant in provable]
        for f in slices:
            later = superseding_slice(f.instant, witnesses, retained_from)
            if later is not None:
                out.append((f, later))
    return sorted(out, key=lambda pair: pair[0].path)


def archivable(completed: list[str], pending: Collection[str], *, max_instants: int,
               min_instants: int, retained_from: str | None,
               pinned: Collection[str]) -> list[str]:
    """The oldest completed instants to archive (a prefix of ``completed``, oldest first).

    Once ``max_instants`` are active (so the next commit never finds more), down to
    ``min_instants``; never past a
    pending instant (its files would count as committed once older than the active timeline),
    never past the earliest retained instant, never past an instant in ``pinned``: a
    replacecommit whose replaced files still exist (archiving it would show them again), or
    the slice that supersedes a cleanable slice still on disk (the deleter proves the
    supersession from the active timeline's commits).
    """
    ordered = sorted(completed, key=instant_key)
    if len(ordered) < max_instants:
        return []
    limit = len(ordered) - min_instants
    first_pending = min((instant_key(p) for p in pending), default=None)
    out: list[str] = []
    for instant in ordered[:limit]:
        key = instant_key(instant)
        if first_pending is not None and key >= first_pending:
            break
        if retained_from is not None and key >= instant_key(retained_from):
            break
        if instant in pinned:
            break
        out.append(instant)
    return out
