"""Review finding 4: a CLEANED intent whose clean was decided but not recorded (the coordinator
crashed between the decision and the record) waits for the record instead of being dropped —
dropped, the files would stay forever, the recorded clean covering them for the cleaner."""

from __future__ import annotations

import pytest
from test_committer_fencing import Env
from test_maintenance import RecordingDisposal, T, _cluster, _commit_small_files, _crash, _ready_to_clean
from test_maintenance import env as env  # the fixture

from hudi_sink.services.coordinator.maintenance.cleaning import Cleaner
from hudi_sink.services.coordinator.maintenance.clustering import Clusterer
from hudi_sink.services.coordinator.maintenance.view import load_view
from hudi_sink.services.deleter.decision import Decision, Outcome, decide
from hudi_sink.services.deleter.table_state import load_snapshot
from hudi_sink.shared.deletion.intent import DeletionReason, PendingDelete
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.storage.fs import LocalFileSystem

FS = LocalFileSystem()


def _decide(env: Env, path: str, killing: str) -> Decision:
    snapshot = load_snapshot(FS, str(env.base))
    item = PendingDelete(table_path=str(env.base), file_path=path, reason=DeletionReason.CLEANED,
                         killing_instant=killing, not_before=0)
    return decide(item, snapshot, FS.file_info(path), now=1e12, orphan_min_age_s=0)


@pytest.mark.parametrize("commits_after_the_clean", [0, 2])
def test_decided_unrecorded_clean_waits_then_deletes(
        env: Env, monkeypatch: pytest.MonkeyPatch, commits_after_the_clean: int) -> None:
    committer = env.committer("a", disposal=RecordingDisposal())
    timeline, cleaner = _ready_to_clean(env, committer)
    record = cleaner.plan(load_view(timeline), T[8])
    assert record is not None
    monkeypatch.setattr(ReplaceTimeline, "write_clean", _crash)
    with pytest.raises(OSError):  # decided, then the coordinator "crashed"
        cleaner.run(record)
    monkeypatch.undo()
    _commit_small_files(env, committer, T[9:9 + commits_after_the_clean])
    files = [f"{env.base}/{f}" for f in record.files]
    for path in files:
        decision = _decide(env, path, T[8])
        assert decision.outcome is Outcome.RETRY_LATER and decision.recheck, decision.rule
    successor = env.committer("b")
    successor_timeline = ReplaceTimeline(env.table())
    Clusterer(successor, successor_timeline, "snappy")
    Cleaner(successor, successor_timeline, commits_retained=2)
    successor.recover()  # rolls the clean forward: the record exists now
    assert [r.instant for r in successor_timeline.cleans()] == [T[8]]
    assert all(_decide(env, path, T[8]).outcome is Outcome.DELETE for path in files)


def test_cleaned_intent_of_a_clean_that_never_happened_is_dropped(env: Env) -> None:
    committer = env.committer("a")
    _commit_small_files(env, committer, T[:4])
    _cluster(env, committer, T[4])
    _commit_small_files(env, committer, T[6:8])
    files = [f"{env.base}/{f.path}" for f in load_view(ReplaceTimeline(env.table())).replaced_files]
    assert files
    for path in files:  # T[5]: older than the latest completed commit, never decided
        decision = _decide(env, path, T[5])
        assert decision.outcome is Outcome.KEEP, decision.rule
        assert _decide(env, path, T[20]).outcome is Outcome.RETRY_LATER  # not decided yet
