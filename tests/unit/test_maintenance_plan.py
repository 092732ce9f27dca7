"""Maintenance planning rules (pure): what clustering, cleaning and archival may touch."""

from __future__ import annotations

from hudi_sink.services.coordinator.maintenance.plan import (
    BaseFile,
    archivable,
    cleanable,
    cleanable_slices,
    earliest_retained,
    plan_clustering,
)

T = [f"2025010100000{i:04d}" for i in range(1, 60)]


def _file(n: int, partition: str = "de", size: int = 100) -> BaseFile:
    return BaseFile(f"{partition}/f{n}_0-0-1_{T[n]}.parquet", partition, f"f{n}", T[n], size)


def test_clustering_needs_more_than_min_files_small_files_per_partition() -> None:
    files = [_file(n) for n in range(3)] + [_file(n, "fr") for n in range(3, 7)]
    groups = plan_clustering(files, min_files=3, small_file_bytes=1000, target_file_bytes=10_000)
    assert [[f.file_id for f in g] for g in groups] == [["f3", "f4", "f5", "f6"]]


def test_clustering_cuts_groups_at_the_target_and_skips_large_files() -> None:
    files = [_file(n, size=400) for n in range(5)] + [_file(9, size=5000)]
    groups = plan_clustering(files, min_files=2, small_file_bytes=1000, target_file_bytes=800)
    assert [[f.file_id for f in g] for g in groups] == [["f0", "f1"], ["f2", "f3"]]


def test_retention_and_cleanable_groups() -> None:
    assert earliest_retained(T[:3], 5) is None
    assert earliest_retained(T[:10], 3) == T[7]
    replaced = {("de", "a"): T[5], ("de", "b"): T[7], ("de", "c"): T[8]}
    assert cleanable(replaced, T[7]) == {("de", "a"), ("de", "b")}
    assert cleanable(replaced, None) == set()


def _slice(fid: str, n: int, partition: str = "de") -> BaseFile:
    return BaseFile(f"{partition}/{fid}_0-0-1_{T[n]}.parquet", partition, fid, T[n], 100)


def test_cleanable_slices_keep_latest_commits_per_file_group() -> None:
    files = [_slice("a", 1), _slice("a", 2), _slice("a", 3), _slice("a", 6), _slice("b", 1),
             _slice("b", 5), _slice("c", 2), _slice("c", 5), _slice("d", 7), _slice("a", 2, "fr")]
    every = set(T)

    def plan(retained_from: str | None, provable: set[str] = every) -> dict[str, str]:
        return {f"{f.partition}/{f.file_id}@{T.index(f.instant)}": T.index(later)
                for f, later in cleanable_slices(files, retained_from, provable)}

    # E = T5: a1 (a2 is later, before E) and a2 (a3) go; a3 is a's latest slice before E;
    # b1 and c2 are their group's latest before E (b5, c5 are at E); d and fr/a: one slice.
    assert plan(T[5]) == {"de/a@1": 2, "de/a@2": 3}
    assert plan(None) == {}
    # Far later: every slice but each group's latest (a6, b5, c5, d7, fr/a2) goes.
    assert plan(T[20]) == {"de/a@1": 2, "de/a@2": 3, "de/a@3": 6, "de/b@1": 5, "de/c@2": 5}
    # A superseding slice the deleter cannot prove (archived: not in ``provable``) counts not.
    assert plan(T[5], every - {T[2], T[3]}) == {}
    assert plan(T[5], every - {T[2]}) == {"de/a@1": 3, "de/a@2": 3}


def test_archival_stops_at_pending_retained_and_pinned_instants() -> None:
    completed = T[:12]
    kwargs = {"max_instants": 10, "min_instants": 4}
    assert archivable(completed[:9], [], retained_from=None, pinned=[], **kwargs) == []
    assert archivable(completed, [], retained_from=None, pinned=[], **kwargs) == T[:8]
    assert archivable(completed, [T[3]], retained_from=None, pinned=[], **kwargs) == T[:3]
    assert archivable(completed, [], retained_from=T[5], pinned=[], **kwargs) == T[:5]
    assert archivable(completed, [], retained_from=None, pinned=[T[2]], **kwargs) == T[:2]
