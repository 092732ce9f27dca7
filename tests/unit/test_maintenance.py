"""Clustering, cleaning and archival on real files, read back with hudi-rs.

First the finding the rest rests on (hudi-rs 0.5.0): a completed ``replacecommit`` hides the
file groups it lists in ``partitionToReplaceFileIds`` for snapshot reads, time travel before it
still sees them, a pending one is ignored — and archiving a replacecommit while a file it
replaced still exists brings that file back (rows doubled), because base files older than the
active timeline count as committed. So archival waits for cleaning.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder
from test_committer_fencing import DDL, FS, Env, Staged

from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.maintenance.archival import Archiver
from hudi_sink.services.coordinator.maintenance.cleaning import Cleaner
from hudi_sink.services.coordinator.maintenance.clustering import Clusterer
from hudi_sink.services.coordinator.maintenance.plan import plan_clustering
from hudi_sink.services.coordinator.maintenance.view import load_view
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.errors import FencedError
from hudi_sink.shared.hudi.layout import Instant, InstantState
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.hudi.table import HudiTable

T = [f"2025010100000{i:04d}" for i in range(1, 60)]


@pytest.fixture
def env(tmp_path: Path) -> Env:
    """The committer tests' table (``test_committer_fencing.Env``), partitioned by country."""
    base = tmp_path / "warehouse" / "orders"
    config = TableConfig(base_path=str(base), name="orders", partition_field="country", schema=DDL)
    HudiTable(FS, str(base)).initialize(config, config.table_schema())
    return Env(base, config, config.table_schema())


class RecordingDisposal:
    def __init__(self) -> None:
        self.sent: list[tuple[str, list[str], str]] = []

    def before_decision(self, instant: str, paths: list[str], reason: str) -> None:
        if paths:
            self.sent.append((instant, list(paths), reason))

    def after_decision(self, instant: str, paths: list[str]) -> None:
        return None


def _read(base: Path, as_of: str | None = None) -> list[str]:
    options = HudiReadOptions()
    if as_of is not None:
        options = options.with_as_of_timestamp(as_of)
    batches = HudiTableBuilder.from_base_uri(str(base)).build().read(options)
    return sorted(pa.Table.from_batches(batches).column("id").to_pylist()) if batches else []


def _commit_small_files(env: Env, committer: TableCommitter, instants: list[str],
                        per_instant: int = 1) -> list[str]:
    ids: list[str] = []
    for n, instant in enumerate(instants):
        committer.start(instant)
        files: list[Staged] = []
        for k in range(per_instant):
            batch = [f"id-{n}-{k}-{j}" for j in range(3)]
            ids += batch
            files.append(env.stage(instant, "de", batch, flush_no=k))
        committer.commit(instant, env.metadata(files, n), [f.move for f in files])
    return sorted(ids)


def _cluster(env: Env, committer: TableCommitter, instant: str) -> Clusterer:
    timeline = ReplaceTimeline(env.table())
    clusterer = Clusterer(committer, timeline, "snappy")
    groups = plan_clustering(load_view(timeline).live, min_files=3, small_file_bytes=1 << 20,
                             target_file_bytes=1 << 24)
    assert groups, "expected small files to cluster"
    clusterer.run(instant, groups, env.schema.avro_schema_json())
    return clusterer


def test_hudi_rs_honours_replacecommit(env: Env) -> None:
    committer = env.committer("a")
    ids = _commit_small_files(env, committer, T[:5])
    before = _read(env.base)
    assert before == ids
    _cluster(env, committer, T[5])
    assert _read(env.base) == ids  # every row exactly once, from the new file group
    view = load_view(ReplaceTimeline(env.table()))
    assert len(view.live) == 1 and len(view.replaced_files) == 5
    assert _read(env.base, as_of=T[4]) == ids  # time travel before it: the old file groups
    meta = ReplaceTimeline(env.table()).read(Instant(T[5], "replacecommit", InstantState.COMPLETED))
    assert meta["operationType"] == "CLUSTER"
    assert sum(len(v) for v in meta["partitionToReplaceFileIds"].values()) == 5
    names = env.timeline()
    assert {f"{T[5]}.replacecommit.requested", f"{T[5]}.replacecommit.inflight",
            f"{T[5]}.replacecommit"} <= set(names)
    assert not env.staging(T[5]).exists()


def test_archiving_a_replacecommit_before_its_files_are_gone_doubles_rows(env: Env) -> None:
    """Why archival waits for cleaning (hudi-rs treats pre-timeline files as committed)."""
    committer = env.committer("a")
    ids = _commit_small_files(env, committer, T[:4])
    _cluster(env, committer, T[4])
    later = _commit_small_files(env, committer, T[5:6])
    timeline = ReplaceTimeline(env.table())
    for instant in T[:5]:
        timeline.archive(next(i for i in timeline.completed() if i.time == instant))
    assert len(_read(env.base)) == 2 * len(ids) + len(later)
    # (and with no completed instant left on the active timeline hudi-rs reads nothing,
    # so archival always keeps min_instants >= 1)


def test_zombie_cannot_complete_a_replacecommit(env: Env) -> None:
    old = env.committer("old")
    ids = _commit_small_files(env, old, T[:4])
    new = env.committer("new")  # newer epoch
    with pytest.raises(FencedError):
        _cluster(env, old, T[4])
    assert not (env.base / ".hoodie" / f"{T[4]}.replacecommit").exists()
    assert _read(env.base) == ids
    new.recover()
    rolled_back = Clusterer(new, ReplaceTimeline(env.table()), "snappy").recover()
    assert rolled_back == [T[4]]
    assert _read(env.base) == ids
    assert not any(n.startswith(T[4]) for n in env.timeline())


def test_crash_after_the_decision_rolls_clustering_forward(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    committer = env.committer("a")
    ids = _commit_small_files(env, committer, T[:4])

    def crash(self: ReplaceTimeline, instant: str, metadata: object) -> None:
        raise OSError("power cut")

    monkeypatch.setattr(ReplaceTimeline, "complete", crash)
    with pytest.raises(OSError):
        _cluster(env, committer, T[4])
    monkeypatch.undo()
    successor = env.committer("b")
    Clusterer(successor, ReplaceTimeline(env.table()), "snappy")
    report = successor.recover()
    assert report.rolled_forward == [T[4]]
    assert (env.base / ".hoodie" / f"{T[4]}.replacecommit").exists()
    assert _read(env.base) == ids


def test_clean_sends_intents_first_and_never_deletes(env: Env) -> None:
    disposal = RecordingDisposal()
    committer = env.committer("a", disposal=disposal)
    ids = _commit_small_files(env, committer, T[:4])
    _cluster(env, committer, T[4])
    timeline = ReplaceTimeline(env.table())
    cleaner = Cleaner(committer, timeline, commits_retained=2)
    assert cleaner.plan(load_view(timeline), T[5]) is None  # T4 is still retained
    _commit_small_files(env, committer, T[6:8])
    record = cleaner.plan(load_view(timeline), T[8])
    assert record is not None and len(record.files) == 4 and record.earliest_retained == T[6]
    cleaner.run(record)
    assert disposal.sent == [(T[8], [f"{env.base}/{f}" for f in record.files], "CLEANED")]
    assert all((env.base / f).exists() for f in record.files)  # the deleter deletes, not us
    assert [r.instant for r in timeline.cleans()] == [T[8]]
    assert len(_read(env.base)) == len(ids) + 6


def test_archival_keeps_every_row_and_waits_for_cleaned_files(env: Env) -> None:
    committer = env.committer("a")
    ids = _commit_small_files(env, committer, T[:6])
    _cluster(env, committer, T[6])
    ids = sorted(ids + _commit_small_files(env, committer, T[7:14]))
    timeline = ReplaceTimeline(env.table())
    archiver = Archiver(committer, timeline, max_instants=10, min_instants=4, commits_retained=2)
    planned = [i.time for i in archiver.plan(load_view(timeline))]
    assert planned == T[:6]  # stops at the replacecommit: its replaced files still exist
    archiver.run(T[20], archiver.plan(load_view(timeline)))
    assert _read(env.base) == ids
    for f in load_view(timeline).replaced_files:  # what the deleter does after the clean
        (env.base / f.path).unlink()
    assert archiver.plan(load_view(timeline)) == []  # 8 active: not over max_instants
    ids = sorted(ids + _commit_small_files(env, committer, T[14:17]))
    archiver.run(T[21], archiver.plan(load_view(timeline)))
    view = load_view(timeline)
    assert len(view.completed) == 4
    assert _read(env.base) == ids
    assert (env.base / ".hoodie" / ".sink" / "archived" / f"{T[6]}.replacecommit").exists()


def _ready_to_clean(env: Env, committer: TableCommitter) -> tuple[ReplaceTimeline, Cleaner]:
    _commit_small_files(env, committer, T[:4])
    _cluster(env, committer, T[4])
    _commit_small_files(env, committer, T[5:8])
    timeline = ReplaceTimeline(env.table())
    return timeline, Cleaner(committer, timeline, commits_retained=2)


def test_zombie_cannot_record_a_clean(env: Env) -> None:
    old = env.committer("old", disposal=RecordingDisposal())
    timeline, cleaner = _ready_to_clean(env, old)
    record = cleaner.plan(load_view(timeline), T[8])
    assert record is not None
    env.committer("new")
    with pytest.raises(FencedError):
        cleaner.run(record)
    assert timeline.cleans() == []


def _crash(*_args: object) -> None:
    raise OSError("crash")


def test_crash_mid_clean_and_mid_archive_is_rolled_forward(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    committer = env.committer("a", disposal=RecordingDisposal())
    timeline, cleaner = _ready_to_clean(env, committer)
    ids = _read(env.base)
    record = cleaner.plan(load_view(timeline), T[8])
    assert record is not None
    monkeypatch.setattr(ReplaceTimeline, "write_clean", _crash)
    with pytest.raises(OSError):
        cleaner.run(record)
    monkeypatch.undo()
    for f in record.files:  # the deleter acts on the acked intents once the clean is recorded
        (env.base / f).unlink()
    later = _commit_small_files(env, committer, T[9:15])
    archiver = Archiver(committer, timeline, max_instants=10, min_instants=4, commits_retained=2)
    targets = archiver.plan(load_view(timeline))
    assert targets
    monkeypatch.setattr(ReplaceTimeline, "archive", _crash)
    with pytest.raises(OSError):
        archiver.run(T[30], targets)
    monkeypatch.undo()
    successor = env.committer("b")
    successor_timeline = ReplaceTimeline(env.table())
    Clusterer(successor, successor_timeline, "snappy")
    Cleaner(successor, successor_timeline, commits_retained=2)
    Archiver(successor, successor_timeline, max_instants=10, min_instants=4, commits_retained=2)
    report = successor.recover()
    assert T[30] in report.rolled_forward
    assert [r.instant for r in successor_timeline.cleans()] == [T[8]]
    assert len(successor_timeline.completed()) == 4
    assert _read(env.base) == sorted(ids + later)  # every row once (ids repeat per batch)


def test_next_pass_finishes_or_rolls_back_a_pending_replacecommit(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    committer = env.committer("a")
    ids = _commit_small_files(env, committer, T[:4])
    monkeypatch.setattr(ReplaceTimeline, "complete", _crash)
    with pytest.raises(OSError):
        _cluster(env, committer, T[4])  # decided, not completed
    monkeypatch.undo()
    timeline = ReplaceTimeline(env.table())
    assert Clusterer(committer, timeline, "snappy").recover() == []
    assert timeline.path_exists_completed(T[4])
    timeline.start(T[5])  # a zombie's replacecommit, never decided
    assert Clusterer(committer, timeline, "snappy").recover() == [T[5]]
    assert timeline.pending() == []
    assert _read(env.base) == ids
