"""A leader recognises its own sink log entries: an append whose create landed although the
call raised (a lost response, a failed floor re-read or directory sync after the create) is
adopted by the next append, never taken for a newer leader's — the only leader must not fence
itself. An entry of another epoch is never adopted, and an entry of ours that decided the
same instant otherwise stands. Real files; every table is read back with hudi-rs."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from test_committer_fencing import Env, Staged
from test_maintenance import T, _commit_small_files, _read
from test_maintenance import env as env  # the fixture

from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.maintenance.cleaning import CLEAN_ACTION
from hudi_sink.services.coordinator.maintenance.clustering import Clusterer
from hudi_sink.services.coordinator.maintenance.plan import plan_clustering
from hudi_sink.services.coordinator.maintenance.view import load_view
from hudi_sink.shared.errors import FencedError, TableFormatError
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.hudi.sink_log import SinkLog
from hudi_sink.shared.hudi.sink_log_state import EntryKind, LogEntry, plan_trim
from hudi_sink.shared.storage.fs import FileInfo, LocalFileSystem

FAULTS = ["response lost", "floor read failed"]


class LosingFileSystem(LocalFileSystem):
    """Real files. ``lose(fault)`` makes the next sink log entry's create land and the call
    raise anyway: its response is lost ("response lost"; a directory sync failing after the
    link looks the same), or the floor re-read after it fails ("floor read failed")."""

    def __init__(self) -> None:
        self._fault: str | None = None
        self._fail_listing = False
        self.lost: list[str] = []

    def lose(self, fault: str) -> None:
        self._fault = fault

    def create_exclusive(self, path: str, data: bytes) -> bool:
        fault, self._fault = (self._fault, None) if "/.sink/log/" in path else (None, self._fault)
        created = super().create_exclusive(path, data)
        if fault is None or not created:
            return created
        self.lost.append(path)
        if fault == "floor read failed":
            self._fail_listing = True
            return created
        raise OSError(errno.EIO, "create response lost", path)

    def list_dir(self, path: str) -> list[FileInfo]:
        if self._fail_listing and "/.sink/checkpoint" in path:
            self._fail_listing = False
            raise OSError(errno.EIO, "listing failed", path)
        return super().list_dir(path)


def _groups(timeline: ReplaceTimeline) -> list[list]:  # type: ignore[type-arg]
    return plan_clustering(load_view(timeline).live, min_files=3, small_file_bytes=1 << 20,
                           target_file_bytes=1 << 24)


def _commit(env: Env, committer: TableCommitter, instant: str, ids: list[str]) -> None:
    committer.start(instant)
    staged = env.stage(instant, "de", ids)
    committer.commit(instant, env.metadata([staged], 99), [staged.move])


def _open(env: Env, name: str, ids: list[str]) -> tuple[LosingFileSystem, TableCommitter, Staged]:
    """A leader on a LosingFileSystem with instant T[0] open and one staged file of ``ids``."""
    fs = LosingFileSystem()
    committer = env.committer(name, fs=fs)
    committer.start(T[0])
    return fs, committer, env.stage(T[0], "de", ids)


def _lost_commit(env: Env, name: str, ids: list[str], fault: str = "response lost"
                 ) -> tuple[TableCommitter, Staged]:
    """``_open``, then T[0]'s commit whose COMMIT entry lands while the call raises."""
    fs, committer, staged = _open(env, name, ids)
    fs.lose(fault)
    with pytest.raises(OSError):
        committer.commit(T[0], env.metadata([staged], len(ids)), [staged.move])
    assert len(fs.lost) == 1
    return committer, staged


@pytest.mark.parametrize("fault", FAULTS)
def test_a_lost_maintenance_decision_does_not_fence_the_next_commit(env: Env, fault: str) -> None:
    fs = LosingFileSystem()
    committer = env.committer("a", fs=fs)
    ids = _commit_small_files(env, committer, T[:4])
    timeline = ReplaceTimeline(env.table())
    clusterer = Clusterer(committer, timeline, "snappy")
    fs.lose(fault)
    with pytest.raises(OSError):
        clusterer.run(T[4], _groups(timeline), env.schema.avro_schema_json())
    assert len(fs.lost) == 1  # the replacecommit's COMMIT entry landed
    assert not timeline.path_exists_completed(T[4])

    _commit(env, committer, T[5], ["late-1"])  # old code: FencedError, waits for a new group
    state = committer.state
    assert state.committed(T[4]) and state.committed(T[5])  # ours, adopted and folded
    assert state.decisions[T[4]].epoch == state.decisions[T[5]].epoch == committer.epoch
    assert state.decisions[T[5]].seq == state.decisions[T[4]].seq + 1
    assert clusterer.recover() == []  # the next pass rolls the decided replacecommit forward
    assert timeline.path_exists_completed(T[4])
    assert _read(env.base) == sorted([*ids, "late-1"])  # every row exactly once
    _commit(env, committer, T[6], ["late-2"])
    assert env.log_state().last_seq == committer.state.last_seq


@pytest.mark.parametrize("fault", FAULTS)
def test_a_lost_commit_decision_is_taken_as_done_on_retry(env: Env, fault: str) -> None:
    committer, staged = _lost_commit(env, "a", ["a", "b"], fault)
    last = env.log_state().last_seq
    committer.commit(T[0], env.metadata([staged], 2), [staged.move])  # old code: FencedError
    assert env.log_state().last_seq == last  # the landed entry is the decision: no second one
    assert env.read_ids() == ["a", "b"]
    _commit(env, committer, T[1], ["c"])
    assert env.read_ids() == ["a", "b", "c"]
    assert env.log_state().decisions[T[1]].seq == last + 1


def test_a_lost_commit_decision_is_adopted_by_a_maintenance_decision(env: Env) -> None:
    """The ingestion COMMIT landed unrecorded; a clean decided next adopts it (the committer's
    fold then knows T[0] is decided), and the retried commit finds its decision folded."""
    committer, staged = _lost_commit(env, "a", ["a"])
    committer.decide(T[1], CLEAN_ACTION, {"partitionToWriteStats": {}}, [], lambda: None)
    assert committer.state.committed(T[0]) and committer.state.committed(T[1])
    last = env.log_state().last_seq
    committer.commit(T[0], env.metadata([staged], 1), [staged.move])
    assert env.log_state().last_seq == last
    assert env.read_ids() == ["a"]
    with pytest.raises(TableFormatError, match="already decided"):  # not the decision we made
        committer.decide(T[1], CLEAN_ACTION, {"partitionToWriteStats": {}, "x": 1}, [],
                         lambda: None)


def test_a_lost_abort_stands_against_a_later_commit_of_the_instant(env: Env) -> None:
    fs, committer, staged = _open(env, "a", ["a"])
    fs.lose("response lost")
    with pytest.raises(OSError):
        committer.abort(T[0], "write status timeout")
    with pytest.raises(TableFormatError, match="already decided abort"):
        committer.commit(T[0], env.metadata([staged], 1), [staged.move])
    assert env.log_state().rolled_back(T[0]) and not env.log_state().committed(T[0])
    committer.abort(T[0], "retried")  # the same decision: done, nothing appended
    assert env.table().pending_instants() == []
    _commit(env, committer, T[1], ["b"])
    assert env.read_ids() == ["b"]


@pytest.mark.parametrize("fault", FAULTS)
def test_an_epoch_claim_that_landed_unrecorded_only_costs_an_epoch(env: Env, fault: str) -> None:
    fs = LosingFileSystem()
    committer = env.committer("a", claim=False, fs=fs)
    fs.lose(fault)
    with pytest.raises(OSError):
        committer.claim_epoch({"id": "a"})
    assert committer.claim_epoch({"id": "a"}) == 2
    _commit(env, committer, T[0], ["a"])
    assert env.read_ids() == ["a"]


def test_an_entry_of_another_epoch_is_never_adopted(env: Env) -> None:
    """A zombie's own lost entry is adopted, but the newer leader's EPOCH after it fences it;
    an entry identical but for its epoch fences too."""
    zombie, _staged = _lost_commit(env, "z", ["a"])
    leader = env.committer("l")
    with pytest.raises(FencedError):
        _commit(env, zombie, T[1], ["b"])
    assert zombie.state.epoch == leader.epoch
    assert T[1] not in env.log_state().decisions
    log = SinkLog(LocalFileSystem(), str(env.base))
    taken = log.read_entry(env.log_state().last_seq)
    twin = LogEntry(seq=taken.seq, kind=taken.kind, epoch=taken.epoch - 1, leader=taken.leader)
    assert log.won_by(taken.seq, twin.epoch) is None
    with pytest.raises(FencedError):
        log.append_own(twin)


def test_a_stray_of_our_epoch_below_the_floor_is_not_ours(tmp_path: Path) -> None:
    """An entry of our epoch under a trimmed number is a stray no reader folds, not a win."""
    log = SinkLog(LocalFileSystem(), str(tmp_path))
    for seq in range(1, 31):
        entry = (LogEntry(seq=1, kind=EntryKind.EPOCH, epoch=1) if seq == 1 else
                 LogEntry(seq=seq, kind=EntryKind.ABORT, epoch=1, instant=f"2025{seq:013d}"))
        assert log.try_append(entry)
    state = log.read_state()
    plan = plan_trim(state, completed=set(), pending=set(), keep_entries=10)
    assert plan is not None and log.trim(state, plan) == 21
    stray = tmp_path / ".hoodie/.sink/log" / f"{5:012d}.json"
    stray.write_bytes(LogEntry(seq=5, kind=EntryKind.ABORT, epoch=1, instant="x").to_bytes())
    assert log.won_by(5, 1) is None
    assert log.won_by(30, 1) is not None and log.won_by(30, 2) is None


def test_same_decision_ignores_number_time_and_abort_reason() -> None:
    commit = LogEntry(seq=3, kind=EntryKind.COMMIT, epoch=2, instant="t", action="clean",
                      metadata={"b": [1, 2], "a": {"x": 1}}, moves=[("s", "f")], created_at="1")
    again = LogEntry(seq=4, kind=EntryKind.COMMIT, epoch=2, instant="t", action="clean",
                     metadata={"a": {"x": 1}, "b": (1, 2)}, moves=[("s", "f")], created_at="2")
    assert commit.same_decision(again)
    assert commit.same_decision(LogEntry.from_bytes(commit.to_bytes()))
    for other in (LogEntry(seq=3, kind=EntryKind.COMMIT, epoch=3, instant="t", action="clean",
                           metadata=commit.metadata, moves=commit.moves),
                  LogEntry(seq=3, kind=EntryKind.COMMIT, epoch=2, instant="t", action="archive",
                           metadata=commit.metadata, moves=commit.moves),
                  LogEntry(seq=3, kind=EntryKind.COMMIT, epoch=2, instant="t", action="clean",
                           metadata=commit.metadata, moves=[("s", "g")]),
                  LogEntry(seq=3, kind=EntryKind.ABORT, epoch=2, instant="t")):
        assert not commit.same_decision(other)
    abort = LogEntry(seq=5, kind=EntryKind.ABORT, epoch=2, instant="t", reason="timeout")
    assert abort.same_decision(LogEntry(seq=6, kind=EntryKind.ABORT, epoch=2, instant="t",
                                        reason="retried"))
