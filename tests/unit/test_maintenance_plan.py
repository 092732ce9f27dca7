"""Maintenance planning rules (pure): what clustering, cleaning and archival may touch."""

from __future__ import annotations

from hudi_sink.services.coordinator.maintenance.plan import (
    BaseFile,
    archivable,
    cleanable,
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


def test_archival_stops_at_pending_retained_and_pinned_instants() -> None:
    completed = T[:12]
    kwargs = {"max_instants": 10, "min_instants": 4}
    assert archivable(completed[:9], [], retained_from=None, replace_pinned=[], **kwargs) == []
    assert archivable(completed, [], retained_from=None, replace_pinned=[], **kwargs) == T[:8]
    assert archivable(completed, [T[3]], retained_from=None, replace_pinned=[], **kwargs) == T[:3]
    assert archivable(completed, [], retained_from=T[5], replace_pinned=[], **kwargs) == T[:5]
    assert archivable(completed, [], retained_from=None, replace_pinned=[T[2]], **kwargs) == T[:2]
