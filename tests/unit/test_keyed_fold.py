"""The fold of a partition's changes by record key and the decision against the stored
version (``DefaultHoodieRecordPayload`` rules, change by change).

The reference is the plainest reading of the rules: apply every change to the table one at a
time. The fold must equal it however the changes are cut into flushes, and must account for
every offset exactly once.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hudi_sink.services.participant.keyed.fold import (
    Change,
    Decision,
    Folded,
    KeyedFold,
    Outcome,
    decide,
    fold,
    offset_outcomes,
)

Stored = dict[str, tuple[Any, int]]  # key -> (ordering value, offset of the row's change)


def up(key: str, offset: int, ordering: Any = None, partition: Any = None) -> Change:
    return Change(key, offset, {"key": key, "at": offset}, ordering, partition, False)


def soft_delete(key: str, offset: int, ordering: Any) -> Change:
    return Change(key, offset, {"key": key, "at": offset}, ordering, "de", True)


def key_delete(key: str, offset: int) -> Change:
    return Change(key, offset, None, None, None, True)


def one(changes: list[Change]) -> Folded:
    folded = fold(changes)
    assert len(folded) == 1
    return next(iter(folded.values()))


# --- the reference: every change applied on its own -----------------------------------

def apply_one(table: Stored, change: Change) -> None:
    current = table.get(change.key)
    if (change.ordering is not None and current is not None and current[0] is not None
            and current[0] > change.ordering):
        return  # the stored version is ordered strictly above: it stays
    if change.is_delete:
        table.pop(change.key, None)
    else:
        table[change.key] = (change.ordering, change.offset)


def apply_flush(table: Stored, changes: list[Change]) -> dict[int, Outcome]:
    """One flush the way the participant runs it: fold, look keys up, decide, write."""
    folded = fold(changes)
    decisions = {}
    for key, item in folded.items():
        stored = table.get(key)
        decisions[key] = decision = decide(item, stored=stored is not None,
                                           stored_ordering=None if stored is None else stored[0])
        if decision in (Decision.INSERT, Decision.UPDATE):
            table[key] = (item.winner.ordering, item.winner.offset)
        elif decision is Decision.DELETE:
            del table[key]
    return offset_outcomes(folded, decisions)


# --- DefaultHoodieRecordPayload, pair by pair -------------------------------------------

def test_greater_ordering_wins_whatever_the_offset() -> None:
    item = one([up("k", 1, 5), up("k", 2, 3)])
    assert item.winner.offset == 1 and item.superseded == (2,)
    item = one([up("k", 1, 3), up("k", 2, 5)])
    assert item.winner.offset == 2 and item.superseded == (1,)


def test_a_tie_goes_to_the_later_offset() -> None:
    item = one([up("k", 1, 5), up("k", 2, 5), up("k", 3, 5)])
    assert item.winner.offset == 3 and item.superseded == (1, 2)


@pytest.mark.parametrize("orderings", [(None, 5), (5, None), (None, None)])
def test_an_absent_ordering_value_goes_to_the_later_offset(orderings: tuple[Any, Any]) -> None:
    item = one([up("k", 1, orderings[0]), up("k", 2, orderings[1])])
    assert item.winner.offset == 2 and item.superseded == (1,)


def test_without_precombine_field_the_last_change_wins() -> None:
    item = one([up("k", 10), key_delete("k", 11), up("k", 12), up("k", 13)])
    assert item.winner.offset == 13 and item.superseded == (10, 11, 12)
    assert item.unconditional


def test_a_key_delete_always_applies() -> None:
    item = one([up("k", 1, 99), key_delete("k", 2)])
    assert item.winner.is_delete and item.winner.offset == 2 and item.unconditional
    assert decide(item, stored=True, stored_ordering=1000) is Decision.DELETE
    assert decide(item, stored=False) is Decision.DELETE_NOOP


def test_a_soft_delete_with_an_ordering_value_compares() -> None:
    item = one([up("k", 1, 9), soft_delete("k", 2, 5)])
    assert not item.winner.is_delete and item.superseded == (2,)
    item = one([soft_delete("k", 1, 5)])
    assert decide(item, stored=True, stored_ordering=6) is Decision.SUPERSEDED
    assert decide(item, stored=True, stored_ordering=5) is Decision.DELETE  # tie: incoming
    assert decide(item, stored=False) is Decision.DELETE_NOOP


def test_a_delete_then_an_older_row_resurrects_the_key() -> None:
    # Copy-on-write keeps no tombstone: after the delete the key is absent, so the next change
    # inserts whatever its ordering value. Hudi's preCombine would keep the delete here when
    # both land in one commit (and resurrect when they land in two); the fold does not depend
    # on the cut.
    changes = [soft_delete("k", 1, 10), up("k", 2, 5)]
    item = one(changes)
    assert item.winner.offset == 2 and item.threshold == 10 and not item.unconditional
    assert decide(item, stored=True, stored_ordering=7) is Decision.UPDATE
    assert decide(item, stored=True, stored_ordering=11) is Decision.SUPERSEDED
    for stored in ({}, {"k": (7, 0)}, {"k": (11, 0)}):
        together, apart, reference = dict(stored), dict(stored), dict(stored)
        apply_flush(together, changes)
        apply_flush(apart, changes[:1])
        apply_flush(apart, changes[1:])
        for change in changes:
            apply_one(reference, change)
        assert together == apart == reference


def test_decide_against_the_stored_version() -> None:
    item = one([up("k", 5, 10)])
    assert decide(item, stored=False) is Decision.INSERT
    assert decide(item, stored=True, stored_ordering=9) is Decision.UPDATE
    assert decide(item, stored=True, stored_ordering=10) is Decision.UPDATE  # tie: incoming
    assert decide(item, stored=True, stored_ordering=11) is Decision.SUPERSEDED
    assert decide(item, stored=True, stored_ordering=None) is Decision.UPDATE  # persisted null
    unordered = one([up("k", 6)])
    assert decide(unordered, stored=True, stored_ordering=10**9) is Decision.UPDATE


def test_offset_outcomes_per_decision() -> None:
    folded = fold([up("a", 1, 1), up("a", 2, 2), up("b", 3, 1), key_delete("c", 4),
                   key_delete("d", 5), up("e", 6, 1)])
    decisions = {"a": Decision.UPDATE, "b": Decision.INSERT, "c": Decision.DELETE,
                 "d": Decision.DELETE_NOOP, "e": Decision.SUPERSEDED}
    assert offset_outcomes(folded, decisions) == {
        1: Outcome.SUPERSEDED, 2: Outcome.WRITTEN, 3: Outcome.WRITTEN, 4: Outcome.DELETED,
        5: Outcome.DELETE_NOOP, 6: Outcome.SUPERSEDED}
    with pytest.raises(ValueError, match="record key 'e' was folded but not decided"):
        offset_outcomes(folded, {k: v for k, v in decisions.items() if k != "e"})


def test_offsets_must_increase() -> None:
    folding = KeyedFold()
    folding.add(up("a", 5))
    with pytest.raises(ValueError, match="offset 5 .*'b'.* not after 5"):
        folding.add(up("b", 5))
    with pytest.raises(ValueError, match="offset 4"):
        folding.add(up("a", 4))


def test_incomparable_ordering_values_name_the_key() -> None:
    with pytest.raises(ValueError, match="record key 'k': ordering values .*str.*int"):
        fold([up("k", 1, 5), up("k", 2, "6")])


def test_the_fold_holds_one_slot_per_key() -> None:
    folding = KeyedFold()
    for offset in range(1000):
        folding.add(up(f"k{offset % 10}", offset, offset % 7))
    assert len(folding) == 10 and folding.changes == 1000
    result = folding.result()
    assert sum(len(item.offsets) for item in result.values()) == 1000


def test_the_partition_value_is_the_winners() -> None:
    item = one([up("k", 1, 1, "de"), up("k", 2, 2, "fr")])
    assert item.winner.partition_value == "fr"


# --- properties: any cut, every offset -------------------------------------------------

ORDERINGS = st.one_of(st.none(), st.integers(0, 4))


@st.composite
def change_streams(draw: st.DrawFn) -> tuple[list[Change], list[int], Stored]:
    changes = []
    offset = draw(st.integers(0, 50))
    for _ in range(draw(st.integers(0, 40))):
        offset += draw(st.integers(1, 3))
        key = draw(st.sampled_from("abcd"))
        kind = draw(st.sampled_from(["up", "up", "soft", "key"]))
        ordering = draw(ORDERINGS)
        if kind == "up":
            changes.append(up(key, offset, ordering))
        elif kind == "soft":
            changes.append(soft_delete(key, offset, ordering))
        else:
            changes.append(key_delete(key, offset))
    cuts = sorted(draw(st.lists(st.integers(0, len(changes)), max_size=5)))
    stored = draw(st.dictionaries(st.sampled_from("abcd"), st.tuples(ORDERINGS, st.just(-1))))
    return changes, cuts, stored


@settings(max_examples=500, deadline=None)
@given(change_streams())
def test_any_cut_into_flushes_equals_applying_every_change(
        stream: tuple[list[Change], list[int], Stored]) -> None:
    changes, cuts, stored = stream
    reference = dict(stored)
    for change in changes:
        apply_one(reference, change)
    table = dict(stored)
    bounds = [0, *cuts, len(changes)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        flush = changes[start:end]
        outcomes = apply_flush(table, flush)
        # every offset of the flush exactly once, nothing else
        assert sorted(outcomes) == [c.offset for c in flush]
    assert table == reference


@settings(max_examples=300, deadline=None)
@given(change_streams())
def test_every_offset_is_accounted_once(stream: tuple[list[Change], list[int], Stored]) -> None:
    changes, _, stored = stream
    folded = fold(changes)
    accounted = [offset for item in folded.values() for offset in item.offsets]
    assert sorted(accounted) == [c.offset for c in changes]
    table = dict(stored)
    outcomes = apply_flush(table, changes)
    counts = Counter(outcomes.values())
    assert sum(counts.values()) == len(changes)
    # at most one written or deleted offset per key; superseded makes up the rest
    assert counts[Outcome.WRITTEN] + counts[Outcome.DELETED] + counts[Outcome.DELETE_NOOP] <= len(folded)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 3)), max_size=30))
def test_without_deletes_it_is_hudis_precombine(pairs: list[tuple[str, int]]) -> None:
    # No deletes, every change ordered: DefaultHoodieRecordPayload's preCombine (greater
    # ordering, a tie to the later) and the fold pick the same winner.
    changes = [up(key, offset, ordering) for offset, (key, ordering) in enumerate(pairs)]
    folded = fold(changes)
    for key, item in folded.items():
        mine = [c for c in changes if c.key == key]
        best = mine[0]
        for change in mine[1:]:
            if not best.ordering > change.ordering:
                best = change
        assert item.winner == best and item.threshold == best.ordering
