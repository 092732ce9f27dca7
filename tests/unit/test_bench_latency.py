"""The bench's latency arithmetic (pure logic): which commit makes a record visible, and
nearest-rank percentiles. The numbers these produce are only as good as this mapping."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from hudi_sink.cli.bench.report import percentile
from hudi_sink.cli.bench.steady import SteadyLoad, SteadySent, steady_result, visible_latencies
from hudi_sink.cli.bench.timeline import TimelineWatcher
from hudi_sink.shared.hudi.offsets import offsets_metadata


def _sent() -> SteadySent:
    return SteadySent(offsets={0: [0, 1, 2, 3], 1: [0, 1]},
                      timestamps={0: [10.0, 10.5, 11.0, 11.5], 1: [10.2, 12.0]}, seconds=2.0)


def test_each_record_is_visible_at_the_first_commit_that_covers_its_offset() -> None:
    commits = [
        (12.0, {0: 2, 1: 1}),   # covers offsets 0-1 of p0 and 0 of p1
        (13.0, {0: 2}),         # p1 absent from this commit's offsets: nothing new
        (14.0, {0: 4, 1: 2}),
    ]
    got = sorted(round(x, 3) for x in visible_latencies(_sent(), commits))
    assert got == sorted([2.0, 1.5, 3.0, 2.5, 1.8, 2.0])


def test_an_offset_never_covered_is_not_counted_and_is_reported() -> None:
    commits = [(12.0, {0: 3, 1: 2})]
    assert len(visible_latencies(_sent(), commits)) == 5  # p0 offset 3 never committed
    result = steady_result(SteadyLoad(rps=3, seconds=2), _sent(), commits, [0.5, 1.0])
    assert result.uncovered == 1 and result.records == 6 and result.sent_rps == 3.0
    assert result.commit_latencies_s == [0.5, 1.0]


def test_a_commit_with_a_lower_offset_than_an_earlier_one_does_not_unsee_records() -> None:
    commits = [(12.0, {0: 4, 1: 2}), (13.0, {0: 1, 1: 0})]
    assert max(visible_latencies(_sent(), commits)) == pytest.approx(2.0)


@pytest.mark.parametrize(("q", "expected"), [(50, 5.0), (99, 10.0), (100, 10.0), (1, 1.0)])
def test_percentile_is_nearest_rank(q: float, expected: float) -> None:
    assert percentile([float(x) for x in range(10, 0, -1)], q) == expected


def test_percentile_of_nothing_is_none() -> None:
    assert percentile([], 99) is None


def _commit(timeline: Path, instant: str, offsets: dict[tuple[str, int], int], mtime: float) -> None:
    extra = offsets_metadata(offsets, ["orders", "steady"])
    path = timeline / f"{instant}.commit"
    path.write_bytes(orjson.dumps({"extraMetadata": extra}))
    os.utime(path, (mtime, mtime))


def test_the_watcher_keeps_commits_that_archival_later_moves_away(tmp_path: Path) -> None:
    timeline = tmp_path / ".hoodie"
    timeline.mkdir()
    watcher = TimelineWatcher(tmp_path, ["orders", "steady"])
    _commit(timeline, "20261123120000000", {("orders", 0): 5, ("steady", 0): 0}, 100.0)
    (timeline / "20261123120002000.commit").write_bytes(b'{"extraMeta')  # still being written
    watcher.poll()
    (timeline / "20261123120000000.commit").unlink()  # archived
    _commit(timeline, "20261123120002000", {("orders", 0): 9, ("steady", 0): 3}, 102.0)
    _commit(timeline, "20261123120004000", {("orders", 0): 9, ("steady", 0): 3}, 104.0)  # empty
    _commit(timeline, "20261123120006000", {("orders", 0): 9, ("steady", 0): 7}, 106.0)
    watcher.poll()

    assert [c.instant[-5:] for c in watcher.commits] == ["00000", "02000", "04000", "06000"]
    first = watcher.get("20261123120000000")
    assert first is not None and first.mtime == 100.0 and first.offsets["orders"] == {0: 5}
    covering = watcher.covering("orders", {0: 9})
    assert covering is not None and covering.instant == "20261123120002000"
    assert watcher.covering("steady", {0: 8}) is None
    assert watcher.advancing("steady") == {"20261123120002000", "20261123120006000"}
