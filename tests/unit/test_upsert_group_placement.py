"""Where an upsert merge writes rows (``keyed.placement``): small groups the merge rewrites are
combined into as few slices as fit below ``small_file_bytes`` (the others emptied in the same
instant, their rows moved with every count kept right); new keys go into a group the merge
rewrites anyway, a trickle into the smallest own small group, and a large flush into an
emptied group before a new one. Plans against hand-built tables (real Parquet slices)."""

from __future__ import annotations

from pathlib import Path

from slice_tables import FS, SliceTable

from hudi_sink.services.participant.decoded import Row
from hudi_sink.services.participant.flush_plan import FlushInput
from hudi_sink.services.participant.keyed.fold import Change, fold
from hudi_sink.services.participant.keyed.merge import MergePlan, plan_merge
from hudi_sink.services.participant.keyed.placement import Slot, combine_touched
from hudi_sink.shared.hudi.slices import Slice, SliceCache

C1, C2, C3, T = ("20260101000000001", "20260101000000002", "20260101000000003",
                 "20260101000000009")
ROOMY = 1 << 30
"""A ``small_file_bytes`` every hand-built slice is far below."""
SMALL = 16 << 10
"""A ``small_file_bytes`` every hand-built slice is below, and 40 rows are large against."""


def _slice(file_id: str, size: int, path: str = "country=de") -> Slice:
    return Slice(path, file_id, C1, f"{path}/{file_id}.parquet", size, 10, 0)


def test_small_groups_a_merge_rewrites_are_dealt_into_as_few_files_as_fit() -> None:
    slots = [Slot("country=de", _slice("a", 60)), Slot("country=de", _slice("b", 30)),
             Slot("country=de", _slice("c", 50)), Slot("country=de", None),
             Slot("country=us", _slice("d", 10)), Slot("country=de", _slice("big", 500))]
    slots[1].new_bytes = 15  # 45 with its new rows
    # First fit, largest first, below 100: a (60) opens a bin, c (50) does not fit it and
    # opens another, b (45 with its new rows) fits c's. "big" is not small; d is alone.
    assert combine_touched(slots, 100) == {1: 2}
    assert combine_touched(slots, 200) == {2: 0, 1: 0}  # 60 + 50 + 45 = 155
    assert combine_touched(slots, 0) == {}  # sizing off: nothing combined


def _row(key: str, country: str = "de") -> Row:
    return Row({"id": key, "country": country, "amount": 9.0}, key, country)


def _plan(t: SliceTable, tmp_path: Path, changes: list[Change], small_file_bytes: int
          ) -> MergePlan:
    spec = FlushInput("orders", 0, 0, T, 0, 1, str(tmp_path / "stage"), False)
    return plan_merge(fold(changes), SliceCache(t.table()).latest(), owner=0,
                      schema=t.config.table_schema(), spec=spec, fs=FS, base_path=str(t.base),
                      small_file_bytes=small_file_bytes, precombine=None)


def test_a_merge_combines_the_groups_it_rewrites_and_empties_the_others(tmp_path: Path) -> None:
    t = SliceTable.create(tmp_path / "t")
    t.commit(C1, {"g1": ["a", "b", "c"]})
    t.commit(C2, {"g2": ["d", "e"]})
    t.commit(C3, {"g3": ["f"]})
    plan = _plan(t, tmp_path, [Change("a", 10, _row("a"), None, "de", False),   # update in g1
                               Change("d", 11, _row("d"), None, "de", False),   # update in g2
                               Change("f", 12, None, None, None, True),          # delete in g3
                               Change("z", 13, _row("z"), None, "de", False)],  # an insert
                 ROOMY)
    assert dict(plan.outcomes) == {"written": 3, "deleted": 1}
    by_group = {c.file_id: (index, c) for index, c in plan.carries.items()}
    target_index, target = by_group["g1"]  # the largest slice takes the others
    assert {a.file_id for a in target.absorbed} == {"g2", "g3"}
    moved = {a.file_id: a for a in target.absorbed}
    assert (moved["g2"].rows, moved["g2"].drop_keys) == (1, {"d"})
    assert (moved["g3"].rows, moved["g3"].drop_keys) == (0, {"f"})
    assert (target.rows, target.drop_keys, target.carried_rows) == (2, {"a"}, 3)
    assert (target.updates, target.deletes) == (2, 0)  # g2's update is written here
    for group, deletes in (("g2", 0), ("g3", 1)):  # an empty slice keeps its own deletes
        _, emptied = by_group[group]
        assert (emptied.rows, emptied.carried_rows, emptied.updates, emptied.deletes,
                emptied.absorbed, emptied.drop_keys) == (0, 0, 0, deletes, (), frozenset())
        assert emptied.prev_commit == {"g2": C2, "g3": C3}[group]
    assert plan.prepared is not None
    assert set(plan.prepared.part_index.to_pylist()) == {target_index}  # every new row there
    # The new file holds old - deleted + inserted: b, c, e carried; a, d, z written.
    assert target.carried_rows + plan.prepared.num_rows == 6


def test_a_large_flush_of_new_keys_writes_a_group_of_its_own(tmp_path: Path) -> None:
    t = SliceTable.create(tmp_path / "t")
    t.commit(C1, {"g1": ["a"]})
    inserts = [Change(f"n{i}", 10 + i, _row(f"n{i}"), None, "de", False) for i in range(40)]
    # g1 (a Parquet file of ~2 KB) is small; 40 rows (~4 KB) are a large flush (above 16 KiB /
    # TRICKLE_FRACTION).
    large = _plan(t, tmp_path, inserts, small_file_bytes=SMALL)
    assert large.carries == {}
    trickle = _plan(t, tmp_path, inserts[:1], small_file_bytes=ROOMY)
    [carry] = trickle.carries.values()  # a trickle packs into the small group, carrying it
    assert (carry.file_id, carry.rows) == ("g1", 1)


def test_a_large_flush_of_new_keys_uses_an_emptied_group_again(tmp_path: Path) -> None:
    t = SliceTable.create(tmp_path / "t")
    t.commit(C1, {"g1": ["a"]})
    t.commit(C2, {"g2": []})  # every row of g2 gone: an empty latest slice
    t.commit(C3, {"g3": []}, country="us")  # emptied, but in another table partition
    inserts = [Change(f"n{i}", 10 + i, _row(f"n{i}"), None, "de", False) for i in range(40)]
    plan = _plan(t, tmp_path, inserts, small_file_bytes=SMALL)
    [carry] = plan.carries.values()
    assert (carry.file_id, carry.rows, carry.prev_commit) == ("g2", 0, C2)
