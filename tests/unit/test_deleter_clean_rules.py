"""The deleter and table maintenance: CLEANED intents delete replaced file groups only when the
table says a recorded clean may remove them; clustering output and base files archived as
committed are live (never deleted by intent, never orphans)."""

from __future__ import annotations

from pathlib import Path

from test_committer_fencing import Env
from test_maintenance import RecordingDisposal, _cluster, _commit_small_files
from test_maintenance import env as env  # the fixture

from hudi_sink.services.coordinator.maintenance.archival import Archiver
from hudi_sink.services.coordinator.maintenance.cleaning import Cleaner
from hudi_sink.services.coordinator.maintenance.view import load_view
from hudi_sink.services.deleter.decision import Outcome, decide
from hudi_sink.services.deleter.table_state import load_snapshot, scan_orphans
from hudi_sink.shared.deletion.intent import DeletionReason, PendingDelete
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.storage.fs import LocalFileSystem

FS = LocalFileSystem()
T = [f"2025010100000{i:04d}" for i in range(1, 60)]


def _decide(env: Env, path: str, reason: DeletionReason, killing: str) -> Outcome:
    snapshot = load_snapshot(FS, str(env.base))
    item = PendingDelete(table_path=str(env.base), file_path=path, reason=reason,
                         killing_instant=killing, not_before=0)
    return decide(item, snapshot, FS.file_info(path), now=1e12, orphan_min_age_s=0).outcome


def _clustered_and_cleaned(env: Env) -> tuple[list[str], str]:
    committer = env.committer("a", disposal=RecordingDisposal())
    _commit_small_files(env, committer, T[:4])
    _cluster(env, committer, T[4])
    _commit_small_files(env, committer, T[5:8])
    timeline = ReplaceTimeline(env.table())
    record = Cleaner(committer, timeline, commits_retained=2).plan(load_view(timeline), T[8])
    assert record is not None
    Cleaner(committer, timeline, commits_retained=2).run(record)
    return [f"{env.base}/{f}" for f in record.files], record.instant


def test_cleaned_files_of_a_recorded_clean_are_deleted(env: Env) -> None:
    files, clean = _clustered_and_cleaned(env)
    assert all(_decide(env, f, DeletionReason.CLEANED, clean) is Outcome.DELETE for f in files)


def test_a_clean_never_removes_a_live_file(env: Env) -> None:
    files, clean = _clustered_and_cleaned(env)
    live = [f"{env.base}/{f.path}" for f in load_view(ReplaceTimeline(env.table())).live]
    assert live
    for path in live:  # clustering output and newer commits' files
        assert _decide(env, path, DeletionReason.CLEANED, clean) is Outcome.KEEP
        assert _decide(env, path, DeletionReason.ORPHAN, clean) is Outcome.KEEP


def test_cleaned_intent_before_the_clean_is_recorded_waits(env: Env) -> None:
    committer = env.committer("a")
    _commit_small_files(env, committer, T[:4])
    _cluster(env, committer, T[4])
    replaced = [f"{env.base}/{f.path}" for f in load_view(ReplaceTimeline(env.table())).replaced_files]
    assert replaced
    # An intent sent (acked) but the clean not decided yet: the file stays, the intent waits.
    assert all(_decide(env, f, DeletionReason.CLEANED, T[9]) is Outcome.RETRY_LATER for f in replaced)


def test_archived_committed_files_are_live_and_not_orphans(env: Env) -> None:
    committer = env.committer("a")
    _commit_small_files(env, committer, T[:14])
    timeline = ReplaceTimeline(env.table())
    archiver = Archiver(committer, timeline, max_instants=10, min_instants=4, commits_retained=2)
    archiver.run(T[20], archiver.plan(load_view(timeline)))
    archived = [p for p in env.partition_files() if any(p.endswith(f"_{t}.parquet") for t in T[:10])]
    assert len(archived) == 10
    snapshot = load_snapshot(FS, str(env.base))
    assert scan_orphans(FS, snapshot, now=1e12, min_age_s=0) == []
    for relative in archived:
        path = str(Path(env.base) / relative)
        assert _decide(env, path, DeletionReason.ORPHAN, T[0]) is Outcome.KEEP
        assert _decide(env, path, DeletionReason.UNCOMMITTED_FILE, T[0]) is Outcome.KEEP
