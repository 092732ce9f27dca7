"""TableCommitter + SinkLog on real files: epochs fence zombies, recovery rolls forward/back.

Every table is read back with hudi-rs, the independent reader, so "visible" means what a real
reader sees.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiReadOptions, HudiTableBuilder
from recording_fs import RecordingFileSystem

from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.disposal import DirectDisposal, StagedFileDisposal
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.errors import FencedError, TableFormatError
from hudi_sink.shared.hudi.naming import (
    base_file_name,
    new_file_id,
    parse_base_file_name,
    partition_path,
    write_token,
)
from hudi_sink.shared.hudi.offsets import KAFKA_COMMIT_OFFSETS_KEY, format_offsets, parse_offsets
from hudi_sink.shared.hudi.sink_log import SinkLog
from hudi_sink.shared.hudi.sink_log_state import DecisionRecord, EntryKind, LogEntry, SinkLogState, plan_trim
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.write_stats import WriteStat, build_commit_metadata
from hudi_sink.shared.schema.table_schema import TableSchema
from hudi_sink.shared.storage.fs import FileSystem, LocalFileSystem

DDL = "id STRING, country STRING, amount DOUBLE"
T1, T2, T3 = "20250101000000001", "20250101000000002", "20250101000000003"
FS = LocalFileSystem()


@dataclass(frozen=True)
class Staged:
    staged: str  # relative to the base path, under .hoodie/.temp/<T>/
    final: str  # relative to the base path
    stat: WriteStat
    ids: tuple[str, ...]

    @property
    def move(self) -> tuple[str, str]:
        return (self.staged, self.final)


@dataclass
class Env:
    base: Path
    config: TableConfig
    schema: TableSchema

    def table(self) -> HudiTable:
        """A fresh table object, as a separate coordinator process would have."""
        return HudiTable(FS, str(self.base))

    def committer(self, name: str, claim: bool = True, fs: FileSystem = FS,
                  disposal: StagedFileDisposal | None = None, **limits: int) -> TableCommitter:
        """A coordinator's committer; ``disposal`` defaults to deleting staged files at once,
        ``limits`` are its sink log trim thresholds."""
        disposal = DirectDisposal(fs) if disposal is None else disposal
        committer = TableCommitter(fs, HudiTable(fs, str(self.base)), disposal, **limits)
        if claim:
            committer.claim_epoch({"id": name})
        return committer

    def stage(self, instant: str, country: str, ids: list[str], flush_no: int = 0,
              kafka_partition: int = 0) -> Staged:
        """Write one Parquet base file of ``instant`` into its staging area."""
        part = partition_path(country, self.config.partition_field, False)
        fid = new_file_id()
        name = base_file_name(fid, write_token(kafka_partition, flush_no, 1), instant)
        target = self.table().staging_path(instant, part, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        n = len(ids)
        data = pa.Table.from_arrays(
            [
                pa.array([instant] * n, pa.string()),
                pa.array([f"{instant}_{kafka_partition}_{i}" for i in range(n)], pa.string()),
                pa.array(ids, pa.string()),
                pa.array([part] * n, pa.string()),
                pa.array([name] * n, pa.string()),
                pa.array(ids, pa.string()),
                pa.array([country] * n, pa.string()),
                pa.array([float(i) for i in range(n)], pa.float64()),
            ],
            schema=self.schema.file_arrow_schema,
        )
        pq.write_table(data, target)
        size = os.path.getsize(target)
        final = f"{part}/{name}"
        return Staged(
            staged=os.path.relpath(target, self.base),
            final=final,
            stat=WriteStat(fid, final, part, n, n, size, size),
            ids=tuple(ids),
        )

    def metadata(self, files: list[Staged], offset: int) -> dict[str, object]:
        extra = {
            "schema": self.schema.avro_schema_json(),
            KAFKA_COMMIT_OFFSETS_KEY: format_offsets({("orders", 0): offset}, ["orders"]),
        }
        return build_commit_metadata([f.stat for f in files], extra)

    def read_ids(self) -> list[str]:
        batches = HudiTableBuilder.from_base_uri(str(self.base)).build().read(HudiReadOptions())
        if not batches:
            return []
        return sorted(pa.Table.from_batches(batches).column("id").to_pylist())

    def timeline(self) -> list[str]:
        return sorted(p.name for p in (self.base / ".hoodie").iterdir() if p.is_file())

    def staging(self, instant: str) -> Path:
        return self.base / ".hoodie" / ".temp" / instant

    def log_state(self) -> SinkLogState:
        return SinkLog(FS, str(self.base)).read_state()

    def partition_files(self) -> set[str]:
        """Relative paths of every base file in a partition directory (outside .hoodie)."""
        found = set()
        for directory, _dirs, files in os.walk(self.base):
            rel_dir = os.path.relpath(directory, self.base)
            if rel_dir.split(os.sep)[0].startswith("."):
                continue
            for name in files:
                if parse_base_file_name(name) is not None:
                    found.add(os.path.relpath(os.path.join(directory, name), self.base))
        return found


@pytest.fixture
def env(tmp_path: Path) -> Env:
    base = tmp_path / "warehouse" / "orders"
    config = TableConfig(base_path=str(base), name="orders", partition_field="country", schema=DDL)
    schema = config.table_schema()
    HudiTable(FS, str(base)).initialize(config, schema)
    return Env(base, config, schema)


def _assert_no_unlisted_partition_files(env: Env) -> None:
    """The commit invariant: no partition dir holds a file of a completed instant it does not list."""
    table = env.table()
    completed = set(table.completed_commits())
    listed = {
        stat["path"]
        for instant in completed
        for stats in table.read_commit_metadata(instant)["partitionToWriteStats"].values()
        for stat in stats
    }
    for path in env.partition_files():
        parsed = parse_base_file_name(os.path.basename(path))
        assert parsed is not None
        if parsed.instant in completed:
            assert path in listed, f"{path} is in a partition dir but not listed by {parsed.instant}"
    for path in listed:
        assert (env.base / path).is_file(), f"commit lists missing file {path}"


# --- epochs ---------------------------------------------------------------------------------


def test_epochs_are_claimed_in_order(env: Env) -> None:
    first = env.committer("c1")
    second = env.committer("c2")
    third = env.committer("c3")
    assert (first.epoch, second.epoch, third.epoch) == (1, 2, 3)
    state = env.log_state()
    assert state.epoch == 3
    assert state.leader == {"id": "c3"}
    assert state.last_seq == 3
    assert state.decisions == {}


def test_claim_epoch_continues_after_decisions(env: Env) -> None:
    first = env.committer("c1")
    first.start(T1)
    first.commit(T1, env.metadata([], 0), [])
    second = env.committer("c2")
    assert second.epoch == 2
    assert second.state.committed(T1)


# --- (a) zombie coordinator -----------------------------------------------------------------


def test_zombie_commit_is_fenced_by_the_table(env: Env) -> None:
    zombie = env.committer("c1")
    assert zombie.epoch == 1
    zombie.start(T1)
    files = [env.stage(T1, "de", ["a", "b"]), env.stage(T1, "fr", ["c"], kafka_partition=1)]

    leader = env.committer("c2")  # the zombie was frozen; a new leader took over
    assert leader.epoch == 2

    with pytest.raises(FencedError):
        zombie.commit(T1, env.metadata(files, 3), [f.move for f in files])

    assert not (env.base / ".hoodie" / f"{T1}.commit").exists()
    assert T1 not in env.table().completed_commits()
    for f in files:  # nothing was placed or deleted by the fenced zombie
        assert (env.base / f.staged).is_file()
        assert not (env.base / f.final).exists()
    assert env.partition_files() == set()
    state = env.log_state()
    assert not state.committed(T1)
    assert state.epoch == 2
    assert zombie.state.epoch == 2  # the zombie learned who leads


def test_zombie_stays_fenced_after_new_leader_recovers(env: Env) -> None:
    zombie = env.committer("c1")
    zombie.start(T1)
    files = [env.stage(T1, "de", ["a"])]
    leader = env.committer("c2")
    report = leader.recover()
    assert report.rolled_back == [T1]

    before = env.log_state()
    with pytest.raises(FencedError):
        zombie.commit(T1, env.metadata(files, 1), [f.move for f in files])
    # The zombie now knows T1 was decided ABORT: repeating that abort is a no-op, not a
    # second decision.
    zombie.abort(T1, "zombie abort")
    after = env.log_state()
    assert after.last_seq == before.last_seq
    assert after.decisions[T1].epoch == 2
    assert not (env.base / ".hoodie" / f"{T1}.commit").exists()
    assert env.table().pending_instants() == []
    assert env.partition_files() == set()


def test_zombie_abort_is_fenced_and_changes_nothing(env: Env) -> None:
    zombie = env.committer("c1")
    zombie.start(T1)
    staged = env.stage(T1, "de", ["a"])
    env.committer("c2")
    with pytest.raises(FencedError):
        zombie.abort(T1, "timeout")
    assert (env.base / staged.staged).is_file()  # files are not handed to deletion
    assert env.table().pending_instants() == [T1]  # the new leader decides, not the zombie
    assert T1 not in env.log_state().decisions


def test_leader_commits_after_zombie_was_fenced(env: Env) -> None:
    zombie = env.committer("c1")
    leader = env.committer("c2")
    leader.start(T1)
    files = [env.stage(T1, "de", ["a", "b"])]
    with pytest.raises(FencedError):
        zombie.abort(T1, "zombie sees a foreign instant")
    leader.commit(T1, env.metadata(files, 2), [f.move for f in files])
    assert env.read_ids() == ["a", "b"]
    assert env.log_state().committed(T1)
    assert env.log_state().decisions[T1].epoch == 2


# --- (b) roll forward -----------------------------------------------------------------------


def _decide_commit_then_crash(env: Env, committer: TableCommitter, instant: str,
                              files: list[Staged], offset: int) -> dict[str, object]:
    """Append the COMMIT decision exactly as commit() does, then 'crash' before placing."""
    metadata = env.metadata(files, offset)
    entry = LogEntry(
        seq=committer.state.last_seq + 1,
        kind=EntryKind.COMMIT,
        epoch=committer.epoch,
        instant=instant,
        metadata=metadata,
        moves=[f.move for f in files],
    )
    assert SinkLog(FS, str(env.base)).try_append(entry)
    return metadata


def test_recover_rolls_decided_commit_forward(env: Env) -> None:
    old = env.committer("c1")
    old.start(T1)
    files = [
        env.stage(T1, "de", ["a", "b"]),
        env.stage(T1, "fr", ["c"], kafka_partition=1),
        env.stage(T1, "de", ["d"], flush_no=1),
    ]
    unlisted = env.stage(T1, "es", ["zombie"], kafka_partition=7)  # no status lists it
    metadata = _decide_commit_then_crash(env, old, T1, files, 4)
    assert not (env.base / ".hoodie" / f"{T1}.commit").exists()
    assert env.read_ids() == []  # nothing visible before recovery

    new = env.committer("c2")
    report = new.recover()

    assert report.rolled_forward == [T1]
    assert report.rolled_back == []
    assert (env.base / ".hoodie" / f"{T1}.commit").is_file()
    for f in files:
        assert (env.base / f.final).is_file()
        assert not (env.base / f.staged).exists()
    assert not (env.base / unlisted.staged).exists()
    assert not (env.base / unlisted.final).exists()
    assert not env.staging(T1).exists()
    assert env.table().completed_commits() == [T1]
    assert env.table().pending_instants() == []
    stored = env.table().read_commit_metadata(T1)
    assert stored == orjson.loads(orjson.dumps(metadata))
    assert parse_offsets(stored["extraMetadata"][KAFKA_COMMIT_OFFSETS_KEY], ["orders"]) == {
        ("orders", 0): 4
    }
    assert env.read_ids() == ["a", "b", "c", "d"]
    _assert_no_unlisted_partition_files(env)


def test_recover_finishes_a_partly_placed_commit(env: Env) -> None:
    old = env.committer("c1")
    old.start(T1)
    files = [env.stage(T1, "de", ["a"]), env.stage(T1, "fr", ["b"], kafka_partition=1)]
    _decide_commit_then_crash(env, old, T1, files, 2)
    # The crash struck after the first file was moved.
    env.table().place_file(str(env.base / files[0].staged), files[0].stat)
    assert (env.base / files[0].final).is_file()

    report = env.committer("c2").recover()
    assert report.rolled_forward == [T1]
    assert all((env.base / f.final).is_file() for f in files)
    assert env.read_ids() == ["a", "b"]
    _assert_no_unlisted_partition_files(env)


def test_recover_is_idempotent(env: Env) -> None:
    old = env.committer("c1")
    old.start(T1)
    files = [env.stage(T1, "de", ["a"])]
    _decide_commit_then_crash(env, old, T1, files, 1)
    assert env.committer("c2").recover().rolled_forward == [T1]
    again = env.committer("c3").recover()
    assert again.rolled_forward == [] and again.rolled_back == []
    assert env.read_ids() == ["a"]


def test_roll_forward_keeps_earlier_commits_visible(env: Env) -> None:
    first = env.committer("c1")
    first.start(T1)
    one = [env.stage(T1, "de", ["a"])]
    first.commit(T1, env.metadata(one, 1), [f.move for f in one])
    first.start(T2)
    two = [env.stage(T2, "de", ["b"]), env.stage(T2, "fr", ["c"], kafka_partition=1)]
    _decide_commit_then_crash(env, first, T2, two, 3)
    assert env.read_ids() == ["a"]

    report = env.committer("c2").recover()
    assert report.rolled_forward == [T2]
    assert env.read_ids() == ["a", "b", "c"]
    _assert_no_unlisted_partition_files(env)


# --- (c) roll back ---------------------------------------------------------------------------


def test_recover_rolls_back_undecided_instant(env: Env) -> None:
    old = env.committer("c1")
    old.start(T1)
    committed = [env.stage(T1, "de", ["a"])]
    old.commit(T1, env.metadata(committed, 1), [f.move for f in committed])
    old.start(T2)
    staged = [env.stage(T2, "de", ["b"]), env.stage(T2, "fr", ["c"], kafka_partition=1)]
    assert env.table().pending_instants() == [T2]

    new = env.committer("c2")
    report = new.recover()

    assert report.rolled_back == [T2]
    assert report.rolled_forward == []
    state = env.log_state()
    assert state.rolled_back(T2)
    assert not state.committed(T2)
    decision = state.decisions[T2]
    assert decision.kind is EntryKind.ABORT
    assert decision.epoch == 2
    assert decision.reason
    for f in staged:
        assert not (env.base / f.staged).exists()
        assert not (env.base / f.final).exists()
    assert not env.staging(T2).exists()
    assert not any(name.startswith(T2) for name in env.timeline())
    assert env.table().pending_instants() == []
    assert env.table().completed_commits() == [T1]
    assert env.read_ids() == ["a"]
    _assert_no_unlisted_partition_files(env)


def test_recover_rolls_back_instant_without_staged_files(env: Env) -> None:
    old = env.committer("c1")
    old.start(T1)
    report = env.committer("c2").recover()
    assert report.rolled_back == [T1]
    assert env.log_state().rolled_back(T1)
    assert env.timeline() == ["hoodie.properties"]
    assert not env.staging(T1).exists()


def test_rolled_back_instant_cannot_be_completed_later(env: Env) -> None:
    old = env.committer("c1")
    old.start(T1)
    files = [env.stage(T1, "de", ["a"])]
    metadata = env.metadata(files, 1)
    env.committer("c2").recover()
    # Even bypassing the log, the table refuses to complete an instant that is not inflight.
    with pytest.raises(TableFormatError):
        env.table().complete_instant(T1, metadata)
    assert not (env.base / ".hoodie" / f"{T1}.commit").exists()


def test_recover_cleans_orphan_staging_dirs(env: Env) -> None:
    leader = env.committer("c1")
    leader.start(T1)
    leader.commit(T1, env.metadata([], 0), [])
    # A late zombie participant flushed into T1's staging area after the commit.
    late = env.stage(T1, "de", ["late"], kafka_partition=9)
    assert (env.base / late.staged).is_file()
    env.committer("c2").recover()
    assert not env.staging(T1).exists()
    assert env.read_ids() == []
    _assert_no_unlisted_partition_files(env)


# --- (d) what commit does with files ---------------------------------------------------------


def test_commit_moves_listed_and_deletes_unlisted_staged_files(env: Env) -> None:
    committer = env.committer("c1")
    committer.start(T1)
    listed = [
        env.stage(T1, "de", ["a", "b"]),
        env.stage(T1, "fr", ["c"], kafka_partition=1),
    ]
    unlisted = [
        env.stage(T1, "de", ["dup-a"], kafka_partition=5),  # a zombie participant's file
        env.stage(T1, "it", ["only-unlisted"], kafka_partition=6),
    ]
    committer.commit(T1, env.metadata(listed, 3), [f.move for f in listed])

    assert (env.base / ".hoodie" / f"{T1}.commit").is_file()
    for f in listed:
        assert (env.base / f.final).is_file()
        assert not (env.base / f.staged).exists()
    for f in unlisted:
        assert not (env.base / f.staged).exists()
        assert not (env.base / f.final).exists()
    assert not (env.base / "it").exists()  # no partition dir for an unlisted-only partition
    assert not env.staging(T1).exists()
    assert env.partition_files() == {f.final for f in listed}
    assert env.read_ids() == ["a", "b", "c"]
    assert env.log_state().committed(T1)
    record = env.log_state().decisions[T1]
    assert SinkLog(FS, str(env.base)).read_entry(record.seq).moves == [f.move for f in listed]
    _assert_no_unlisted_partition_files(env)


def test_empty_commit_discards_every_staged_file(env: Env) -> None:
    committer = env.committer("c1")
    committer.start(T1)
    one = [env.stage(T1, "de", ["a"])]
    committer.commit(T1, env.metadata(one, 1), [f.move for f in one])
    committer.start(T2)
    stray = env.stage(T2, "de", ["stray"])
    committer.commit(T2, env.metadata([], 1), [])
    assert not (env.base / stray.staged).exists()
    assert not env.staging(T2).exists()
    assert env.table().completed_commits() == [T1, T2]
    assert env.read_ids() == ["a"]
    _assert_no_unlisted_partition_files(env)


def test_commit_refuses_move_without_write_stat(env: Env) -> None:
    committer = env.committer("c1")
    committer.start(T1)
    listed = env.stage(T1, "de", ["a"])
    other = env.stage(T1, "fr", ["b"], kafka_partition=1)
    with pytest.raises(TableFormatError):
        committer.commit(T1, env.metadata([listed], 1), [listed.move, other.move])
    assert not (env.base / ".hoodie" / f"{T1}.commit").exists()


def test_verify_staged_reports_missing_and_resized_files(env: Env) -> None:
    committer = env.committer("c1")
    committer.start(T1)
    f = env.stage(T1, "de", ["a"])
    size = f.stat.file_size_bytes
    assert committer.verify_staged([f.move], {f.staged: size}) is None
    assert "bytes" in (committer.verify_staged([f.move], {f.staged: size + 1}) or "")
    os.unlink(env.base / f.staged)
    assert "missing" in (committer.verify_staged([f.move], {f.staged: size}) or "")


# --- (e) abort of a committed instant --------------------------------------------------------


def test_abort_of_committed_instant_raises(env: Env) -> None:
    committer = env.committer("c1")
    committer.start(T1)
    files = [env.stage(T1, "de", ["a"])]
    committer.commit(T1, env.metadata(files, 1), [f.move for f in files])
    with pytest.raises(TableFormatError, match="COMMIT"):
        committer.abort(T1, "late timeout")
    assert (env.base / ".hoodie" / f"{T1}.commit").is_file()
    assert (env.base / files[0].final).is_file()
    assert env.read_ids() == ["a"]


def test_new_leader_cannot_abort_a_decided_commit(env: Env) -> None:
    old = env.committer("c1")
    old.start(T1)
    files = [env.stage(T1, "de", ["a"])]
    _decide_commit_then_crash(env, old, T1, files, 1)
    new = env.committer("c2")
    with pytest.raises(TableFormatError, match="COMMIT"):
        new.abort(T1, "operator abort")
    assert (env.base / files[0].staged).is_file()  # still there to roll forward
    assert not env.log_state().rolled_back(T1)
    assert new.recover().rolled_forward == [T1]
    assert env.read_ids() == ["a"]


def test_abort_foreign_leaves_decided_and_current_instants(env: Env) -> None:
    leader = env.committer("c1")
    leader.start(T1)
    leader.start(T2)
    assert leader.abort_foreign(T2) == [T1]
    assert env.table().pending_instants() == [T2]
    assert env.log_state().rolled_back(T1)


def test_abort_decides_once_and_is_repeatable(env: Env) -> None:
    leader = env.committer("c1")
    leader.start(T1)
    staged = env.stage(T1, "de", ["a"])
    leader.abort(T1, "timeout")
    leader.abort(T1, "timeout again")  # a retried abort appends no second decision
    state = env.log_state()
    assert state.rolled_back(T1)
    assert state.last_seq == 2  # EPOCH + one ABORT
    assert not (env.base / staged.staged).exists()
    assert env.table().pending_instants() == []
    leader.start(T3)  # the next instant is unaffected
    assert env.table().pending_instants() == [T3]


def test_recover_finishes_an_interrupted_abort(env: Env) -> None:
    old = env.committer("c1")
    old.start(T1)
    staged = env.stage(T1, "de", ["a"])
    # The ABORT decision is durable, then the process died before rolling back.
    entry = LogEntry(seq=old.state.last_seq + 1, kind=EntryKind.ABORT, epoch=old.epoch,
                     instant=T1, reason="timeout")
    assert SinkLog(FS, str(env.base)).try_append(entry)
    assert env.table().pending_instants() == [T1]

    new = env.committer("c2")
    report = new.recover()
    assert report.rolled_back == [T1]
    state = env.log_state()
    assert state.decisions[T1].epoch == 1  # the original decision stands, no second one
    assert state.last_seq == 3  # EPOCH 1, ABORT, EPOCH 2
    assert not (env.base / staged.staged).exists()
    assert env.table().pending_instants() == []
    assert not any(name.startswith(T1) for name in env.timeline())


# --- the sink log itself ---------------------------------------------------------------------


def test_log_entry_round_trips() -> None:
    entry = LogEntry(
        seq=7, kind=EntryKind.COMMIT, epoch=3, instant=T1, leader={"id": "c"},
        metadata={"partitionToWriteStats": {}, "extraMetadata": {"schema": "{}"}},
        moves=[(".hoodie/.temp/x/a.parquet", "de/a.parquet")], reason="r", created_at="now",
    )
    assert LogEntry.from_bytes(entry.to_bytes()) == entry


def test_sink_log_one_writer_wins_each_sequence_number(tmp_path: Path) -> None:
    log = SinkLog(FS, str(tmp_path))
    first = LogEntry(seq=1, kind=EntryKind.EPOCH, epoch=1, leader={"id": "a"})
    second = LogEntry(seq=1, kind=EntryKind.EPOCH, epoch=2, leader={"id": "b"})
    assert log.try_append(first)
    assert not log.try_append(second)
    with pytest.raises(FencedError, match="seq 1"):  # the leader's append: another epoch won
        log.append_own(second)
    state = log.read_state()
    assert state.leader == {"id": "a"}  # the loser's content never replaced the winner's


def test_sink_log_first_decision_wins_and_state_folds_incrementally(tmp_path: Path) -> None:
    log = SinkLog(FS, str(tmp_path))
    log.try_append(LogEntry(seq=1, kind=EntryKind.EPOCH, epoch=1))
    log.try_append(LogEntry(seq=2, kind=EntryKind.ABORT, epoch=1, instant=T1))
    state = log.read_state()
    assert state.rolled_back(T1) and not state.committed(T1)
    log.try_append(LogEntry(seq=3, kind=EntryKind.COMMIT, epoch=1, instant=T1))  # a buggy late one
    log.try_append(LogEntry(seq=4, kind=EntryKind.COMMIT, epoch=1, instant=T2))
    state = log.read_state(state)
    assert state.last_seq == 4
    assert state.rolled_back(T1)  # unchanged by the later entry
    assert state.committed(T2)
    assert not state.committed(T3) and not state.rolled_back(T3)


def test_sink_log_ignores_foreign_files_and_rejects_corrupt_entries(tmp_path: Path) -> None:
    log = SinkLog(FS, str(tmp_path))
    log_dir = tmp_path / ".hoodie" / ".sink" / "log"
    log_dir.mkdir(parents=True)
    (log_dir / "README.txt").write_text("not an entry", encoding="utf-8")
    (log_dir / ".000000000001.json.abc.tmp").write_text("{", encoding="utf-8")
    assert log.read_state().last_seq == 0
    (log_dir / "000000000001.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(TableFormatError, match="000000000001.json"):
        log.read_state()


# --- (f) a bounded sink log -------------------------------------------------------------------


def nth(i: int) -> str:
    """The i-th of many instants, all after T1..T3."""
    return f"20250102{i:09d}"


def _log_seqs(env: Env) -> list[int]:
    return sorted(int(p.stem) for p in (env.base / ".hoodie/.sink/log").glob("*.json"))


def test_sink_log_and_states_stay_bounded_over_many_decisions(env: Env) -> None:
    standby = env.committer("standby", claim=False)
    standby.refresh()
    leader = env.committer("c1", keep_entries=4, trim_above=8)
    for i in range(40):
        leader.start(nth(i))
        if i % 4 == 3:
            leader.abort(nth(i), "timeout")
        else:
            leader.commit(nth(i), env.metadata([], i), [])
        standby.refresh()
        assert len(_log_seqs(env)) <= 8
        assert len(standby.state.decisions) <= 8 + 10  # recent entries + the ten aborts
    assert leader.state.last_seq == 41 and len(_log_seqs(env)) >= 4
    assert len(env.table().completed_commits()) == 30
    fresh = env.log_state()
    for state in (fresh, leader.refresh(), standby.state):
        assert (state.last_seq, state.epoch, state.floor) == (41, 1, fresh.floor)
        assert state.decisions == fresh.decisions
        # Completed commits below the floor are forgotten; every abort is still known.
        assert all(r.seq >= state.floor for r in state.decisions.values()
                   if r.kind is EntryKind.COMMIT)
        assert all(state.rolled_back(nth(i)) for i in range(3, 40, 4))
    assert env.committer("c2").epoch == 2  # a new leader claims from the checkpoint


def test_zombie_whose_next_number_was_trimmed_cannot_commit(env: Env) -> None:
    zombie = env.committer("c1")  # entry 1; its next number is 2
    zombie.start(T1)
    files = [env.stage(T1, "de", ["a"])]
    leader = env.committer("c2", keep_entries=4, trim_above=8)  # takes number 2
    for i in range(12):
        leader.start(nth(i))
        leader.commit(nth(i), env.metadata([], i), [])
    assert 2 not in _log_seqs(env)  # the zombie's next number was trimmed
    with pytest.raises(FencedError):
        zombie.commit(T1, env.metadata(files, 1), [f.move for f in files])
    with pytest.raises(FencedError):
        zombie.abort(T1, "timeout")
    assert 2 not in _log_seqs(env)  # its stray entry did not stay
    assert not (env.base / ".hoodie" / f"{T1}.commit").exists()
    assert (env.base / files[0].staged).is_file() and not (env.base / files[0].final).exists()
    assert T1 not in env.log_state().decisions
    assert zombie.state.epoch == 2  # the zombie learned who leads
    assert env.read_ids() == []


def test_recover_rolls_a_decided_commit_forward_after_trims(env: Env) -> None:
    old = env.committer("c1", keep_entries=4, trim_above=8)
    for i in range(10):
        old.start(nth(i))
        old.commit(nth(i), env.metadata([], i), [])
    decided = nth(100)
    old.start(decided)
    files = [env.stage(decided, "de", ["a", "b"]), env.stage(decided, "fr", ["c"], kafka_partition=1)]
    _decide_commit_then_crash(env, old, decided, files, 3)
    decided_seq = env.log_state().decisions[decided].seq
    # Another trimmer, as eager as it can be: it must stop at the undone commit's entry.
    log = SinkLog(FS, str(env.base))
    state = log.read_state()
    table = env.table()
    plan = plan_trim(state, completed=table.completed_commits(), pending=table.pending_instants(),
                     keep_entries=1)
    assert plan is not None and plan.floor == decided_seq
    log.trim(state, plan)
    assert _log_seqs(env)[0] == decided_seq

    new = env.committer("c2", keep_entries=4, trim_above=8)  # reads from the checkpoint
    assert new.recover().rolled_forward == [decided]
    assert env.read_ids() == ["a", "b", "c"]
    _assert_no_unlisted_partition_files(env)
    for i in range(101, 112):  # once complete, the entry is trimmed like any other
        new.start(nth(i))
        new.commit(nth(i), env.metadata([], i), [])
    assert decided_seq not in _log_seqs(env)
    again = env.committer("c3").recover()
    assert again.rolled_forward == [] and again.rolled_back == []


def test_a_failed_trim_does_not_fail_the_commit(env: Env) -> None:
    broken = [True]

    def deny_log_deletes(op: tuple[str, ...]) -> None:
        if op[0] == "delete" and "/.sink/log/" in op[1] and broken[0]:
            raise PermissionError("delete denied")

    leader = env.committer("c1", fs=RecordingFileSystem(hook=deny_log_deletes),
                           keep_entries=4, trim_above=8)
    for i in range(10):
        leader.start(nth(i))
        leader.commit(nth(i), env.metadata([], i), [])
    assert len(env.table().completed_commits()) == 10
    assert _log_seqs(env)[0] == 1  # the checkpoint was written, nothing deleted
    broken[0] = False
    leader.start(nth(10))
    leader.commit(nth(10), env.metadata([], 10), [])
    assert len(_log_seqs(env)) <= 8 and _log_seqs(env)[0] > 1


# --- (g) durability before the commit file ----------------------------------------------------


def test_commit_syncs_files_before_the_decision_and_moves_before_the_commit_file(env: Env) -> None:
    fs = RecordingFileSystem()
    committer = env.committer("c1", fs=fs)
    committer.start(T1)
    files = [env.stage(T1, "de", ["a"]), env.stage(T1, "de", ["b"], kafka_partition=1),
             env.stage(T1, "fr", ["c"], kafka_partition=2)]
    fs.clear()
    committer.commit(T1, env.metadata(files, 3), [f.move for f in files])

    base = str(env.base)
    decision = fs.index(("create_exclusive", f"{base}/.hoodie/.sink/log/000000000002.json"))
    commit_file = fs.index(("create_exclusive", f"{base}/.hoodie/{T1}.commit"))
    staged = sorted(f"{base}/{f.staged}" for f in files)
    assert sorted(op[1] for op in fs.named("fsync_file")) == staged  # one sync per file
    assert all(fs.index(("fsync_file", path)) < decision for path in staged)
    before = [op[1] for op in fs.ops[:decision] if op[0] == "fsync_dir"]
    assert {f"{base}/.hoodie/.temp/{T1}/de", f"{base}/.hoodie/.temp/{T1}/fr",
            f"{base}/.hoodie/.temp/{T1}", base} <= set(before)
    assert len(before) == len(set(before))  # each directory once
    renames = [i for i, op in enumerate(fs.ops) if op[0] == "rename"]
    assert len(renames) == 3 and decision < renames[0]
    after = [op[1] for op in fs.ops[renames[-1]:commit_file] if op[0] == "fsync_dir"]
    assert {f"{base}/de", f"{base}/fr", base, f"{base}/.hoodie/.temp/{T1}/de"} <= set(after)
    assert len(after) == len(set(after))
    assert env.read_ids() == ["a", "b", "c"]


def test_roll_forward_syncs_placed_files_before_the_commit_file(env: Env) -> None:
    old = env.committer("c1")
    old.start(T1)
    files = [env.stage(T1, "de", ["a"]), env.stage(T1, "fr", ["b"], kafka_partition=1)]
    _decide_commit_then_crash(env, old, T1, files, 2)
    env.table().place_file(str(env.base / files[0].staged), files[0].stat)  # moved before the crash
    fs = RecordingFileSystem()
    new = env.committer("c2", fs=fs)
    fs.clear()
    assert new.recover().rolled_forward == [T1]
    base = str(env.base)
    commit_file = fs.index(("create_exclusive", f"{base}/.hoodie/{T1}.commit"))
    for f in files:
        assert fs.index(("fsync_file", f"{base}/{f.final}")) < commit_file
    for directory in (f"{base}/de", f"{base}/fr", base):
        assert fs.index(("fsync_dir", directory)) < commit_file
    assert env.read_ids() == ["a", "b"]


def test_500_decisions_with_default_thresholds_keep_log_and_memory_bounded(env: Env) -> None:
    """Issue 9: the decision log and what the coordinator (and deleter) keep in memory stay
    bounded over a long run with the committer's default trimming."""
    from hudi_sink.services.coordinator.history import KEEP, TransactionHistory
    from hudi_sink.services.coordinator.views import TransactionView

    leader = env.committer("c1")
    history = TransactionHistory()
    for i in range(500):
        leader.start(nth(i))
        if i % 50 == 49:
            leader.abort(nth(i), "timeout")
        else:
            leader.commit(nth(i), env.metadata([], i), [])
        history.record(TransactionView(commit_time=nth(i), state="committed"))
        assert len(_log_seqs(env)) <= 60
    state = leader.refresh()
    assert len(state.decisions) <= 60 + 10  # recent entries + the ten aborts
    # Small records only: commit metadata is read from the entry when a roll-forward needs it.
    assert all(type(r) is DecisionRecord for r in state.decisions.values())
    assert len(env.log_state().decisions) == len(state.decisions)
    for i in range(500, 1500):  # a longer run: the coordinator's history stops growing
        history.record(TransactionView(commit_time=nth(i), state="committed"))
    assert len(history) == KEEP
    assert history.get(nth(0)) is None and history.get(nth(1499)) is not None
