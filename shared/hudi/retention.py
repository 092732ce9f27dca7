"""Which file slices the cleaner's retention keeps: Hudi's KEEP_LATEST_COMMITS, per file group.

A file group (partition path, file id) has one slice per instant that wrote it (a Copy-on-Write
update or small-file packing writes a new base file with the same file id and a newer instant;
docs/design.md §3.8, fact 7). A reader at time ``T`` takes the group's greatest slice ``<= T``.
With ``E`` the earliest retained instant (the oldest of the newest ``commits_retained``
completed instants), every read at or after ``E`` is served by the slices at or after ``E``
plus the group's latest slice before ``E``. Hudi's ``CleanPlanner`` keeps exactly these
(``lastVersion`` and ``lastVersionBeforeEarliestCommitToRetain``); every older slice is
cleanable, and the latest slice of a group never is.

One rule, used twice: by the coordinator's cleaner when it plans a clean, and by the deleter
when it re-checks, on the table, that a CLEANED file may go. Both pass the instants of the
group's *committed* slices they can prove (the deleter: slices listed by completed commits of
the active timeline), so the cleaner never hands the deleter a file the deleter would keep.
"""

from __future__ import annotations

from collections.abc import Iterable

from hudi_sink.shared.hudi.naming import instant_key

__all__ = ["outside_retention", "superseding_slice"]


def superseding_slice(instant: str, others: Iterable[str], earliest_retained: str) -> str | None:
    """The oldest of ``others`` (instants of committed slices of the same file group) that
    makes slice ``instant`` cleanable under earliest retained instant ``earliest_retained``:
    one strictly after ``instant`` and strictly before ``earliest_retained``. None when there
    is none: then ``instant`` is at or after ``E``, the group's latest slice before ``E``, or
    the group's latest slice — all retained."""
    low, high = instant_key(instant), instant_key(earliest_retained)
    if low >= high:
        return None
    later = [u for u in others if low < instant_key(u) < high]
    return min(later, key=instant_key, default=None)


def outside_retention(instant: str, others: Iterable[str], earliest_retained: str) -> bool:
    """Whether no read at or after ``earliest_retained`` can return slice ``instant`` (see
    :func:`superseding_slice`)."""
    return superseding_slice(instant, others, earliest_retained) is not None
