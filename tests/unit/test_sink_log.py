"""The sink log on real files: gap-safe folding, bounded state, trimming that keeps the fence.

The trimming tests try to break the fence: zombies appending at trimmed numbers (before,
during and after the trimmer's deletions), readers that lag behind a trim or read a stray
file, a crash mid-trim, and threads racing a trimmer, appenders and a reader.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest
from recording_fs import Op, RecordingFileSystem

from hudi_sink.shared.errors import FencedError, TableFormatError
from hudi_sink.shared.hudi.sink_log import SinkLog
from hudi_sink.shared.hudi.sink_log_state import (
    MAX_REASON_CHARS,
    DecisionRecord,
    EntryKind,
    LogEntry,
    SinkLogState,
    plan_trim,
)
from hudi_sink.shared.storage.fs import LocalFileSystem

FS = LocalFileSystem()


def instant(i: int) -> str:
    return f"20250101{i:09d}"


def entry_for(seq: int, epoch: int = 1) -> LogEntry:
    """Entry ``seq`` of a synthetic history: EPOCH at 1, every 10th an ABORT, else a COMMIT."""
    if seq == 1:
        return LogEntry(seq=1, kind=EntryKind.EPOCH, epoch=epoch, leader={"id": "c1"})
    if seq % 10 == 0:
        return LogEntry(seq=seq, kind=EntryKind.ABORT, epoch=epoch, instant=instant(seq),
                        reason=f"timeout {seq}")
    return LogEntry(seq=seq, kind=EntryKind.COMMIT, epoch=epoch, instant=instant(seq),
                    metadata={"partitionToWriteStats": {}, "pad": "x" * 2000},
                    moves=[(f".hoodie/.temp/{instant(seq)}/a.parquet", "de/a.parquet")])


def fill(log: SinkLog, first: int, last: int) -> None:
    for seq in range(first, last + 1):
        assert log.try_append(entry_for(seq))


def commits(upto: int) -> set[str]:
    """Instants of the synthetic history's COMMIT entries up to ``upto`` (all completed)."""
    return {instant(s) for s in range(2, upto + 1) if s % 10}


def view(state: SinkLogState) -> tuple[object, ...]:
    return state.last_seq, state.epoch, state.leader, state.floor, state.decisions


def log_seqs(base: Path) -> list[int]:
    return sorted(int(p.stem) for p in (base / ".hoodie/.sink/log").glob("*.json"))


def checkpoint_floors(base: Path) -> list[int]:
    return sorted(int(p.stem) for p in (base / ".hoodie/.sink/checkpoint").glob("*.json"))


def trim(log: SinkLog, upto: int, keep_entries: int = 40, keep_aborts: int = 3) -> int:
    state = log.read_state()
    plan = plan_trim(state, completed=commits(upto), pending=set(),
                     keep_entries=keep_entries, keep_aborts=keep_aborts)
    assert plan is not None
    return log.trim(state, plan)


# --- folding ---------------------------------------------------------------------------------


def test_fold_stops_at_the_first_gap_and_resumes_when_it_fills(tmp_path: Path) -> None:
    log = SinkLog(FS, str(tmp_path))
    fill(log, 1, 2)
    assert log.try_append(entry_for(4))  # 3 appears late (or a listing would return it late)
    state = log.read_state()
    assert state.last_seq == 2
    assert instant(4) not in state.decisions and state.committed(instant(2))
    assert log.try_append(entry_for(3))
    log.read_state(state)
    assert state.last_seq == 4
    assert state.committed(instant(3)) and state.committed(instant(4))


def test_incremental_refresh_reads_only_the_new_entries(tmp_path: Path) -> None:
    fs = RecordingFileSystem()
    log = SinkLog(fs, str(tmp_path))
    fill(log, 1, 50)
    state = log.read_state()
    fs.clear()
    fill(log, 51, 52)
    fs.clear()
    log.read_state(state)
    entry_dir = str(tmp_path / ".hoodie/.sink/log")
    reads = [op[1].rsplit("/", 1)[-1] for op in fs.named("read_bytes")]
    assert reads == ["000000000051.json", "000000000052.json", "000000000053.json"]
    listings = [op[1] for op in fs.named("list_dir", "walk_files")]
    assert entry_dir not in listings  # the log directory is never listed on a refresh
    assert listings == [str(tmp_path / ".hoodie/.sink/checkpoint")]
    assert state.last_seq == 52


def test_state_keeps_small_records_and_reads_an_entry_on_demand(tmp_path: Path) -> None:
    log = SinkLog(FS, str(tmp_path))
    fill(log, 1, 3)
    long_reason = "r" * (MAX_REASON_CHARS * 3)
    assert log.try_append(LogEntry(seq=4, kind=EntryKind.ABORT, epoch=1, instant=instant(99),
                                   reason=long_reason))
    state = log.read_state()
    record = state.decisions[instant(2)]
    assert record == DecisionRecord(seq=2, kind=EntryKind.COMMIT, epoch=1, instant=instant(2))
    assert log.read_entry(record.seq) == entry_for(2)  # metadata and moves from disk
    assert state.decisions[instant(99)].reason == long_reason[:MAX_REASON_CHARS]
    assert log.read_entry(4).reason == long_reason
    with pytest.raises(TableFormatError, match="000000000005.json is missing"):
        log.read_entry(5)


def test_a_decision_of_an_older_epoch_after_a_newer_epoch_is_ignored(tmp_path: Path) -> None:
    log = SinkLog(FS, str(tmp_path))
    assert log.try_append(LogEntry(seq=1, kind=EntryKind.EPOCH, epoch=1))
    assert log.try_append(LogEntry(seq=2, kind=EntryKind.EPOCH, epoch=2))
    assert log.try_append(LogEntry(seq=3, kind=EntryKind.COMMIT, epoch=1, instant=instant(3)))
    assert log.try_append(LogEntry(seq=4, kind=EntryKind.ABORT, epoch=2, instant=instant(4)))
    state = log.read_state()
    assert state.last_seq == 4 and state.epoch == 2
    assert not state.committed(instant(3))
    assert state.rolled_back(instant(4))


def test_an_entry_under_the_wrong_number_and_a_log_without_start_are_refused(tmp_path: Path) -> None:
    log = SinkLog(FS, str(tmp_path))
    log_dir = tmp_path / ".hoodie/.sink/log"
    log_dir.mkdir(parents=True)
    (log_dir / "000000000001.json").write_bytes(entry_for(2).to_bytes())
    with pytest.raises(TableFormatError, match="000000000001.json holds entry 2"):
        log.read_state()
    (log_dir / "000000000001.json").unlink()
    (log_dir / "000000000005.json").write_bytes(entry_for(5).to_bytes())
    with pytest.raises(TableFormatError, match="starts at entry 5"):
        log.read_state()


# --- trimming --------------------------------------------------------------------------------


def test_trim_keeps_what_is_needed_and_every_reader_agrees(tmp_path: Path) -> None:
    log = SinkLog(FS, str(tmp_path))
    fill(log, 1, 30)
    lagging = log.read_state()  # will fall behind the trim
    fill(log, 31, 80)
    ahead = log.read_state()  # past the coming floor
    fill(log, 81, 100)

    assert trim(log, 100) == 61
    assert log_seqs(tmp_path) == list(range(61, 101))
    assert checkpoint_floors(tmp_path) == [61]

    fresh = log.read_state()
    expected = {instant(s) for s in range(61, 101)} | {instant(s) for s in (40, 50, 60)}
    assert set(fresh.decisions) == expected  # the three newest aborts below the floor stay
    assert (fresh.last_seq, fresh.epoch, fresh.leader, fresh.floor) == (100, 1, {"id": "c1"}, 61)
    assert view(log.read_state(lagging)) == view(fresh)
    assert view(log.read_state(ahead)) == view(fresh)
    assert fresh.rolled_back(instant(40)) and not fresh.rolled_back(instant(30))

    assert log.try_append(entry_for(101))
    for state in (fresh, lagging, ahead):
        log.read_state(state)
        assert state.last_seq == 101 and state.committed(instant(101))


def test_trim_never_passes_an_unfinished_commit(tmp_path: Path) -> None:
    log = SinkLog(FS, str(tmp_path))
    fill(log, 1, 100)
    state = log.read_state()
    pending = {instant(23)}
    plan = plan_trim(state, completed=commits(100) - pending, pending=pending, keep_entries=10)
    assert plan is not None and plan.floor == 23  # a roll-forward still needs entry 23
    log.trim(state, plan)
    assert log_seqs(tmp_path)[0] == 23
    assert log.read_entry(23) == entry_for(23)
    # Once it completed, the next trim passes it.
    state = log.read_state()
    plan = plan_trim(state, completed=commits(100), pending=set(), keep_entries=10)
    assert plan is not None and plan.floor == 91


def test_an_archived_commit_does_not_pin_the_log(tmp_path: Path) -> None:
    """Neither completed nor pending but older than the latest completed instant: archived."""
    log = SinkLog(FS, str(tmp_path))
    fill(log, 1, 100)
    plan = plan_trim(log.read_state(), completed=commits(100) - {instant(23)}, pending=set(),
                     keep_entries=10)
    assert plan is not None and plan.floor == 91


def test_trim_keeps_aborts_of_pending_instants_and_the_newest_aborts(tmp_path: Path) -> None:
    log = SinkLog(FS, str(tmp_path))
    fill(log, 1, 100)
    state = log.read_state()
    plan = plan_trim(state, completed=commits(100), pending={instant(20)}, keep_entries=10,
                     keep_aborts=2)
    assert plan is not None and plan.floor == 91
    aborts = {i for i, r in plan.decisions.items() if r.kind is EntryKind.ABORT}
    assert aborts == {instant(20), instant(80), instant(90), instant(100)}
    assert plan_trim(state, completed=commits(100), pending=set(), keep_entries=100) is None


def test_a_zombie_whose_next_number_was_trimmed_is_fenced(tmp_path: Path) -> None:
    log = SinkLog(FS, str(tmp_path))
    fill(log, 1, 100)
    trim(log, 100)
    zombie_entry = LogEntry(seq=10, kind=EntryKind.COMMIT, epoch=1, instant=instant(999))
    assert not log.try_append(zombie_entry)
    with pytest.raises(FencedError, match="seq 10"):
        log.append_own(zombie_entry)  # the leader's append: its number was trimmed
    for seq in (60, 61):  # just below the floor (trimmed) and at it (present)
        assert not log.try_append(LogEntry(seq=seq, kind=EntryKind.ABORT, epoch=1,
                                           instant=instant(999)))
    assert log_seqs(tmp_path) == list(range(61, 101))  # the stray files were removed
    assert instant(999) not in log.read_state().decisions
    assert log.try_append(entry_for(101))  # the next free number is won as always


def test_zombie_appends_at_every_point_of_a_trim_are_fenced(tmp_path: Path) -> None:
    """The trimmer is paused before each of its operations while a zombie appends at the
    number that is about to be (or was just) trimmed; no interleaving lets the zombie win."""
    base = str(tmp_path)
    fill(SinkLog(FS, base), 1, 100)
    zombie = SinkLog(FS, base)
    outcomes: list[tuple[str, int, bool]] = []

    def interleave(op: Op) -> None:
        if op[0] != "delete" or "/log/" not in op[1]:
            if op[0] == "create_exclusive" and "/checkpoint/" in op[1]:
                # before the checkpoint exists: the number is still taken
                outcomes.append(("before checkpoint", 5, zombie.try_append(zombie_at(5))))
            return
        seq = int(op[1].rsplit("/", 1)[-1].removesuffix(".json"))
        # the entry about to be deleted still exists; the one before it is already gone
        outcomes.append(("about to be deleted", seq, zombie.try_append(zombie_at(seq))))
        if seq > 1:
            outcomes.append(("just deleted", seq - 1, zombie.try_append(zombie_at(seq - 1))))

    def zombie_at(seq: int) -> LogEntry:
        return LogEntry(seq=seq, kind=EntryKind.COMMIT, epoch=1, instant=instant(1000 + seq))

    trimmer = SinkLog(RecordingFileSystem(hook=interleave), base)
    state = trimmer.read_state()
    plan = plan_trim(state, completed=commits(100), pending=set(), keep_entries=40)
    assert plan is not None
    assert trimmer.trim(state, plan) == 61
    assert len(outcomes) == 1 + 60 + 59
    assert [o for o in outcomes if o[2]] == []  # the zombie never won a number
    fresh = SinkLog(FS, base).read_state()
    assert not any(i.startswith("20250101000001") for i in fresh.decisions)  # no zombie instant
    assert log_seqs(tmp_path) == list(range(61, 101))


def test_a_reader_never_folds_a_stray_file_below_the_floor(tmp_path: Path) -> None:
    """A fenced appender's file exists between its create and its removal: a reader lagging
    behind the trim that reads it in that window must not fold it."""
    base = str(tmp_path)
    log = SinkLog(FS, base)
    fill(log, 1, 30)
    lagging = log.read_state()
    fill(log, 31, 100)
    trim(log, 100)
    stray = LogEntry(seq=31, kind=EntryKind.EPOCH, epoch=7, leader={"id": "zombie"})
    assert FS.create_exclusive(str(tmp_path / ".hoodie/.sink/log/000000000031.json"),
                               stray.to_bytes())
    log.read_state(lagging)
    assert lagging.epoch == 1 and lagging.leader == {"id": "c1"}
    assert view(lagging) == view(SinkLog(FS, base).read_state())


def test_a_crash_mid_trim_leaves_a_readable_log_and_the_next_trim_finishes(tmp_path: Path) -> None:
    base = str(tmp_path)
    fill(SinkLog(FS, base), 1, 100)

    def crash_on_delete(op: Op) -> None:
        if op[0] == "delete":
            raise OSError("power lost")

    crashing = SinkLog(RecordingFileSystem(hook=crash_on_delete), base)
    state = crashing.read_state()
    plan = plan_trim(state, completed=commits(100), pending=set(), keep_entries=40)
    assert plan is not None
    with pytest.raises(OSError, match="power lost"):
        crashing.trim(state, plan)
    assert log_seqs(tmp_path) == list(range(1, 101))  # nothing deleted, checkpoint written
    log = SinkLog(FS, base)
    fresh = log.read_state()
    assert fresh.floor == 61 and fresh.last_seq == 100
    assert not log.try_append(entry_for(20))  # still present below the floor: taken anyway
    fill(log, 101, 120)
    assert trim(log, 120) == 81
    assert log_seqs(tmp_path) == list(range(81, 121))
    assert checkpoint_floors(tmp_path) == [61, 81]
    fill(log, 121, 140)
    assert trim(log, 140) == 101
    assert checkpoint_floors(tmp_path) == [81, 101]  # only the newest two stay


def test_a_corrupt_checkpoint_names_its_file(tmp_path: Path) -> None:
    log = SinkLog(FS, str(tmp_path))
    fill(log, 1, 100)
    trim(log, 100)
    (tmp_path / ".hoodie/.sink/checkpoint/000000000061.json").write_bytes(b"{")
    with pytest.raises(TableFormatError, match="checkpoint/000000000061.json is corrupt"):
        log.read_state()


def test_trimmer_appenders_and_a_reader_racing_never_break_the_fence(tmp_path: Path) -> None:
    """A leader appends and trims (a small log, so trims are frequent), zombies hammer numbers
    that were already won (trimmed or not), and a reader refreshes incrementally throughout."""
    base = str(tmp_path)
    log = SinkLog(FS, base)
    assert log.try_append(entry_for(1))
    won = [1]  # the leader's last number (read by the other threads)
    done = threading.Event()
    failures: list[str] = []

    def leader() -> None:
        try:
            for seq in range(2, 301):
                assert log.try_append(entry_for(seq)), f"leader lost its own number {seq}"
                won[0] = seq
                state = log.read_state()
                plan = plan_trim(state, completed=commits(seq), pending=set(), keep_entries=5,
                                 keep_aborts=2)
                if plan is not None and state.last_seq - max(state.floor, 1) + 1 > 8:
                    log.trim(state, plan)
        except Exception as exc:  # reported below, with the thread's name
            failures.append(f"leader: {exc!r}")
        finally:
            done.set()

    def zombie(seed: int) -> None:
        rng = random.Random(seed)
        while not done.is_set():
            seq = rng.randint(1, won[0])
            entry = LogEntry(seq=seq, kind=EntryKind.COMMIT, epoch=1, instant=instant(5000 + seq))
            if SinkLog(FS, base).try_append(entry):
                failures.append(f"zombie {seed} won number {seq}, already won by the leader")

    def reader() -> None:
        state = SinkLogState()
        while not done.is_set():
            before = state.last_seq
            try:
                SinkLog(FS, base).read_state(state)
            except Exception as exc:
                failures.append(f"reader: {exc!r}")
                return
            if state.last_seq < before or state.epoch != 1:
                failures.append(f"reader went back to {state.last_seq} / epoch {state.epoch}")
            if any(r.instant >= instant(5000) for r in state.decisions.values()):
                failures.append("reader folded a zombie's stray entry")

    threads = [threading.Thread(target=leader), threading.Thread(target=reader),
               *(threading.Thread(target=zombie, args=(i,)) for i in range(2))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    final = SinkLog(FS, base).read_state()
    assert final.last_seq == 300
    assert not any(r.instant >= instant(5000) for r in final.decisions.values())
    assert len(log_seqs(tmp_path)) <= 10
