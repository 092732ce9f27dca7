"""A Kafka partition's buffered changes, collapsed to one outcome per record key, and that
outcome decided against the version of the key already in the table.

The rules are Hudi's ``DefaultHoodieRecordPayload``'s, applied change by change in offset
order:

- a change with an ordering value (``table.precombine_field``) replaces the current version
  unless that version's ordering value is strictly greater (a tie goes to the later change);
- a change without one (the field absent or null), and any delete known only by its key
  (a tombstone, a Debezium delete), always applies: the later offset wins. Hudi has no rule for
  an absent field (Java would fail comparing with null); "the later offset" is ours, and the
  one a keyed topic's own order gives;
- a stored version without an ordering value never holds off a change (Hudi: a persisted null
  updates);
- a delete removes the row and with it its ordering value: a later change of the key then
  inserts, whatever its ordering value (copy-on-write keeps no tombstones).

Why not Hudi's in-batch ``preCombine`` (keep the greater of two changes, then merge the winner
with storage): with deletes in the batch its result depends on where the batch was cut. A
soft delete ordered 10 followed by an update ordered 5 keeps the row deleted when both land in
one commit, but resurrects it (ordered 5) when they land in two. The snapshot must equal the
fold of the topic up to the committed offsets however the topic was cut into flushes, so the
fold here is exact: it keeps, per key, what the changes amount to as a function of the stored
version — a *threshold* (a stored version ordered strictly above it survives) and the *winner*
(the row or delete that results otherwise). Both fit in one slot per key, so the buffer holds
distinct keys, not records; ``tests/unit/test_keyed_fold.py`` checks that folding any cut
equals applying every change one by one.

Every change's offset ends as exactly one :class:`Outcome` (the dead letters are counted
before the fold): written (insert or update), deleted, delete of an absent key, or superseded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["Change", "Folded", "Decision", "Outcome", "KeyedFold", "fold", "decide",
           "offset_outcomes"]


@dataclass(frozen=True, slots=True)
class Change:
    """One accepted record as a change of its key."""

    key: str
    """Hudi's record key text (``_hoodie_record_key``)."""
    offset: int
    row: object | None
    """The decoded row (opaque here); ``None`` for a delete known by its key only."""
    ordering: Any
    """The ``precombine_field`` value; ``None`` when absent, null or there is no such field."""
    partition_value: Any
    """The partition field's value; ``None`` when unpartitioned or unknown (a tombstone)."""
    is_delete: bool


class Decision(StrEnum):
    """What a key's folded changes do to the table."""

    INSERT = "insert"
    UPDATE = "update"
    SUPERSEDED = "superseded"
    """The stored version is ordered strictly above the changes: nothing is written."""
    DELETE = "delete"
    DELETE_NOOP = "delete_noop"
    """A delete of a key the table does not hold."""


class Outcome(StrEnum):
    """What became of one accepted offset."""

    WRITTEN = "written"
    DELETED = "deleted"
    DELETE_NOOP = "delete_noop"
    SUPERSEDED = "superseded"


@dataclass(frozen=True, slots=True)
class Folded:
    """A key's changes in one buffer, as a function of the stored version."""

    winner: Change
    """The row written, or the delete applied, unless the stored version survives."""
    threshold: Any
    """A stored version ordered strictly above this survives (meaningless when
    ``unconditional``)."""
    unconditional: bool
    """Some change applies whatever is stored (no ordering value, or a key delete), so the
    stored version never survives."""
    superseded: tuple[int, ...]
    """Offsets of the key's other changes, ascending: their effect was replaced within the
    buffer."""

    @property
    def offsets(self) -> tuple[int, ...]:
        """Every offset this key accounts for."""
        return (*self.superseded, self.winner.offset)


class _Slot:
    """The mutable per-key state while changes arrive."""

    __slots__ = ("winner", "threshold", "unconditional", "superseded")

    def __init__(self, change: Change) -> None:
        self.winner = change
        self.unconditional = _unconditional(change)
        self.threshold = None if self.unconditional else change.ordering
        self.superseded: list[int] = []


def _unconditional(change: Change) -> bool:
    return change.ordering is None  # a key delete carries none; nor does an absent field


def _greater(left: Any, right: Any, key: str) -> bool:
    """``left > right`` for two ordering values of ``key``; a clear error when they cannot be
    compared (a precombine column whose values changed type)."""
    try:
        return bool(left > right)
    except TypeError:
        raise ValueError(f"record key {key!r}: ordering values {left!r} ({type(left).__name__}) "
                         f"and {right!r} ({type(right).__name__}) cannot be compared; "
                         f"table.precombine_field must hold one comparable type") from None


class KeyedFold:
    """Folds a partition's changes as they arrive, in offset order; holds one slot per key."""

    __slots__ = ("_slots", "_last_offset", "_count")

    def __init__(self) -> None:
        self._slots: dict[str, _Slot] = {}
        self._last_offset: int | None = None
        self._count = 0

    def __len__(self) -> int:
        """Distinct keys buffered."""
        return len(self._slots)

    @property
    def changes(self) -> int:
        """Changes added (every one is accounted for in :meth:`result`)."""
        return self._count

    def add(self, change: Change) -> None:
        """Fold in the next change; offsets must increase (a partition is read in order, and
        "the later offset wins" needs it)."""
        if self._last_offset is not None and change.offset <= self._last_offset:
            raise ValueError(f"offset {change.offset} (key {change.key!r}) is not after "
                             f"{self._last_offset}: changes must be folded in offset order")
        self._last_offset = change.offset
        self._count += 1
        slot = self._slots.get(change.key)
        if slot is None:
            self._slots[change.key] = _Slot(change)
            return
        current = slot.winner
        if _unconditional(change):
            # Applies whatever came before: this change is the result, always.
            slot.superseded.append(current.offset)
            slot.winner, slot.unconditional, slot.threshold = change, True, None
        elif not slot.unconditional and _greater(change.ordering, slot.threshold, change.key):
            # Ordered above everything so far: whatever the stored version, it is this change
            # or the stored one that survives.
            slot.superseded.append(current.offset)
            slot.winner, slot.threshold = change, change.ordering
        elif (not current.is_delete and current.ordering is not None
              and _greater(current.ordering, change.ordering, change.key)):
            # The current winner is a row ordered strictly above this change: it stays.
            slot.superseded.append(change.offset)
        else:
            # The current winner is a delete (nothing left to compare with), or a row this
            # change ties or beats; the threshold stays, a stored version above it survives.
            slot.superseded.append(current.offset)
            slot.winner = change

    def result(self) -> dict[str, Folded]:
        """Each key's folded changes (the fold itself is left as it is)."""
        return {key: Folded(slot.winner, slot.threshold, slot.unconditional,
                            tuple(sorted(slot.superseded)))
                for key, slot in self._slots.items()}


def fold(changes: Iterable[Change]) -> dict[str, Folded]:
    """Fold ``changes`` (in offset order) into one :class:`Folded` per key."""
    folding = KeyedFold()
    for change in changes:
        folding.add(change)
    return folding.result()


def decide(folded: Folded, *, stored: bool, stored_ordering: Any = None) -> Decision:
    """What ``folded`` does to the table, given whether the key is ``stored`` and the stored
    version's ordering value (``None``: no ordering value, which never holds off a change)."""
    winner = folded.winner
    if not stored:
        return Decision.DELETE_NOOP if winner.is_delete else Decision.INSERT
    if (not folded.unconditional and stored_ordering is not None
            and _greater(stored_ordering, folded.threshold, winner.key)):
        return Decision.SUPERSEDED
    return Decision.DELETE if winner.is_delete else Decision.UPDATE


_WINNER_OUTCOME = {
    Decision.INSERT: Outcome.WRITTEN,
    Decision.UPDATE: Outcome.WRITTEN,
    Decision.SUPERSEDED: Outcome.SUPERSEDED,
    Decision.DELETE: Outcome.DELETED,
    Decision.DELETE_NOOP: Outcome.DELETE_NOOP,
}


def offset_outcomes(folded: Mapping[str, Folded],
                    decisions: Mapping[str, Decision]) -> dict[int, Outcome]:
    """Every folded offset's outcome once each key is decided; a key without a decision is an
    error (an offset must never go unaccounted)."""
    outcomes: dict[int, Outcome] = {}
    for key, item in folded.items():
        decision = decisions.get(key)
        if decision is None:
            raise ValueError(f"record key {key!r} was folded but not decided")
        for offset in item.superseded:
            outcomes[offset] = Outcome.SUPERSEDED
        outcomes[item.winner.offset] = _WINNER_OUTCOME[decision]
    return outcomes
