"""Latest slices per file group, ownership and the coordinator's slice checks (pure)."""

from __future__ import annotations

from hudi_sink.services.participant.packing import TRICKLE_FRACTION, choose_carries
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.layout import Instant, InstantState
from hudi_sink.shared.hudi.slices import NewSlice, Slice, latest_slices, owner_of, slice_problems

T1, T2, T3 = "20260101000000001", "20260101000000002", "20260101000000003"


def _stat(partition: str, file_id: str, token: str, instant: str, rows: int = 10,
          size: int = 1000) -> dict[str, object]:
    return {"fileId": file_id, "path": f"{partition}/{file_id}_{token}_{instant}.parquet",
            "partitionPath": partition, "numWrites": rows, "numInserts": rows,
            "fileSizeInBytes": size, "totalWriteBytes": size, "prevCommit": "null"}


def _commit(instant: str, *stats: dict[str, object], action: str = layout.COMMIT_ACTION,
            replaced: dict[str, list[str]] | None = None) -> tuple[Instant, dict[str, object]]:
    by_partition: dict[str, list[dict[str, object]]] = {}
    for stat in stats:
        by_partition.setdefault(str(stat["partitionPath"]), []).append(stat)
    metadata: dict[str, object] = {"partitionToWriteStats": by_partition}
    if replaced:
        metadata["partitionToReplaceFileIds"] = replaced
    return Instant(instant, action, InstantState.COMPLETED), metadata


def test_the_latest_slice_of_each_group_wins_and_replaced_groups_are_gone() -> None:
    latest = latest_slices([
        _commit(T2, _stat("a", "g1", "0-0-7", T2, rows=15)),  # any order
        _commit(T1, _stat("a", "g1", "0-0-5", T1), _stat("a", "g2", "1-0-5", T1),
                _stat("b", "g3", "0-0-5", T1)),
        _commit(T3, _stat("b", "g4", "x", T3), action=layout.REPLACE_ACTION,
                replaced={"b": ["g3"]}),
    ])
    assert set(latest) == {("a", "g1"), ("a", "g2"), ("b", "g4")}
    assert latest[("a", "g1")].instant == T2 and latest[("a", "g1")].num_rows == 15
    assert latest[("a", "g2")].owner == 1
    assert latest[("b", "g4")].owner is None  # not a token the sink wrote


def test_owner_is_the_write_tokens_first_number() -> None:
    assert owner_of("3-12-99") == 3
    assert owner_of("100002-0-1") == 100002
    assert owner_of("abc-1-1") is None


def _slice(file_id: str, instant: str, owner: int | None = 0, size: int = 1000,
           partition: str = "a") -> Slice:
    return Slice(partition, file_id, instant, f"{partition}/{file_id}_{owner}-0-1_{instant}.parquet",
                 size, 10, owner)


def test_slice_checks_accept_new_groups_and_slices_over_the_latest_by_the_owner() -> None:
    latest = {("a", "g1"): _slice("g1", T2)}
    taken: set[tuple[str, str]] = set()
    assert slice_problems([NewSlice("a", "new", None), NewSlice("a", "g1", T2)], 0, latest,
                          taken) is None


def test_slice_checks_refuse_stale_foreign_unknown_and_doubled_slices() -> None:
    latest = {("a", "g1"): _slice("g1", T2), ("a", "g2"): _slice("g2", T1, owner=1)}
    stale = slice_problems([NewSlice("a", "g1", T1)], 0, latest, set())
    assert stale is not None and "stale" in stale
    foreign = slice_problems([NewSlice("a", "g2", T1)], 0, latest, set())
    assert foreign is not None and "belongs to source 1" in foreign
    unknown = slice_problems([NewSlice("a", "g9", T1)], 0, latest, set())
    assert unknown is not None and "no slice" in unknown
    existing = slice_problems([NewSlice("a", "g1", None)], 0, latest, set())
    assert existing is not None and "already exists" in existing
    doubled = slice_problems([NewSlice("a", "g1", T2)], 0, latest, {("a", "g1")})
    assert doubled is not None and "twice" in doubled
    twice_in_one = slice_problems([NewSlice("a", "n", None), NewSlice("a", "n", None)], 0, latest,
                                  set())
    assert twice_in_one is not None and "twice" in twice_in_one


SMALL = 32 * 1024 * 1024


def test_a_trickle_packs_into_the_owners_smallest_small_group() -> None:
    latest = {
        ("a", "big"): _slice("big", T1, size=SMALL),  # full: not below small_file_bytes
        ("a", "mid"): _slice("mid", T1, size=5000),
        ("a", "low"): _slice("low", T2, size=4000),
        ("a", "theirs"): _slice("theirs", T2, owner=1, size=10),
        ("b", "other"): _slice("other", T2, size=10, partition="b"),
    }
    chosen = choose_carries(["a", "c"], [100, 100], latest, owner=0, small_file_bytes=SMALL,
                            used=set(), base_path="/t")
    assert set(chosen) == {0}
    assert chosen[0].file_id == "low" and chosen[0].prev_commit == T2
    assert chosen[0].source_path == "/t/a/low_0-0-1_" + T2 + ".parquet"
    again = choose_carries(["a"], [100], latest, owner=0, small_file_bytes=SMALL,
                           used={("a", "low")}, base_path="/t")
    assert again[0].file_id == "mid"  # a group takes one slice per instant


def test_a_large_flush_or_disabled_sizing_starts_new_groups() -> None:
    latest = {("a", "g"): _slice("g", T1, size=10)}
    large = SMALL // TRICKLE_FRACTION
    assert choose_carries(["a"], [large], latest, owner=0, small_file_bytes=SMALL, used=set(),
                          base_path="/t") == {}
    assert choose_carries(["a"], [large - 1], latest, owner=0, small_file_bytes=SMALL,
                          used=set(), base_path="/t") != {}
    assert choose_carries(["a"], [1], latest, owner=0, small_file_bytes=0, used=set(),
                          base_path="/t") == {}
    # Large as a whole though small in each table partition (a backlog spread thin): new groups.
    latest[("b", "h")] = _slice("h", T1, size=10, partition="b")
    half = large // 2 + 1
    assert choose_carries(["a", "b"], [half, half], latest, owner=0, small_file_bytes=SMALL,
                          used=set(), base_path="/t") == {}


def test_groups_their_owner_may_still_pack_into_are_never_clustered() -> None:
    from hudi_sink.shared.hudi.slices import may_take_slices

    path = "a/g1_0-3-9_" + T1 + ".parquet"
    assert may_take_slices(path, 10, SMALL)
    assert not may_take_slices(path, SMALL, SMALL)  # full: its owner writes new groups
    assert not may_take_slices(path, 10, 0)  # packing off
    assert not may_take_slices("a/g1_x-1-1_" + T1 + ".parquet", 10, SMALL)  # not the sink's


def test_the_carried_bytes_of_one_flush_stay_within_the_job_budget() -> None:
    latest = {("a", "ga"): _slice("ga", T1, size=3000),
              ("b", "gb"): _slice("gb", T1, size=2000, partition="b")}
    chosen = choose_carries(["a", "b"], [1, 1], latest, owner=0, small_file_bytes=SMALL,
                            used=set(), base_path="/t", budget_bytes=4000)
    assert [c.file_id for c in chosen.values()] == ["ga"]  # gb would exceed what is left
    assert choose_carries(["a"], [1], latest, owner=0, small_file_bytes=SMALL, used=set(),
                          base_path="/t", budget_bytes=100) == {}


def test_only_the_last_flush_of_an_instant_whose_buffer_never_filled_packs() -> None:
    """A flush of a full buffer is high volume, and so is the rest of its instant: only an
    instant's single, last flush (a trickle's) may rewrite a small group."""
    from hudi_sink.services.participant.packing import may_pack

    assert may_pack(final=True, flush_no=0)
    assert not may_pack(final=True, flush_no=1)  # the buffer filled earlier in the instant
    assert not may_pack(final=False, flush_no=0)  # a full buffer's own flush
