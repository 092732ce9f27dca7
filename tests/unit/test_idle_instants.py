"""The rule for instants in which no offset moved (``services.coordinator.idle``): which are
committed, which are withdrawn without a trace, which are rolled back — one row per case, on
a real table on local disk (no broker, no Spark)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hudi_sink.services.coordinator.commit_metadata import PlannedCommit, plan_commit
from hudi_sink.services.coordinator.commit_state import CommitState
from hudi_sink.services.coordinator.idle import IdleInstants, withdraw_instant
from hudi_sink.services.coordinator.phase import PhaseMachine
from hudi_sink.shared.config.settings import TransactionConfig
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.kafka.partition_key import PartitionKey
from hudi_sink.shared.kafka.protocol import StagedFile, WriteStatus
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.runtime.states import CoordinatorPhase
from hudi_sink.shared.storage.fs import LocalFileSystem

T = "d"
P0: PartitionKey = (T, 0)
P1: PartitionKey = (T, 1)
INSTANT = "20250101000000000"


def _planned(start: dict[PartitionKey, int], answers: dict[PartitionKey, WriteStatus],
             expected: frozenset[PartitionKey] = frozenset({P0, P1}),
             unconfigured: dict[PartitionKey, int] | None = None) -> PlannedCommit:
    state = CommitState(instant=INSTANT, epoch=1, expected=expected, start_offsets=dict(start),
                        started_at=0.0)
    for key, status in answers.items():
        state.statuses[key] = status
    return plan_commit(state, schema={"schema": "{}"}, sink_name="s", topics=[T],
                       unconfigured_offsets=unconfigured or {})


def _status(key: PartitionKey, start: int, nxt: int, **extra: object) -> WriteStatus:
    return WriteStatus(topic=key[0], partition=key[1], start_offset=start, next_offset=nxt,
                       **extra)  # type: ignore[arg-type]


def _committing() -> PhaseMachine:
    """The driver's phase when it decides: COMMITTING ``INSTANT``."""
    phase = PhaseMachine()
    phase.close(CoordinatorPhase.RECOVERING, "elected")
    phase.close(CoordinatorPhase.IDLE, "epoch 1")
    phase.open(CommitState(instant=INSTANT, epoch=1, expected=frozenset({P0, P1}),
                           start_offsets={}, started_at=0.0))
    phase.advance(CoordinatorPhase.ENDED)
    phase.advance(CoordinatorPhase.COMMITTING)
    return phase


def _idle(tmp_path: Path, *, allow_empty_commit: bool = False,
          phase: PhaseMachine | None = None) -> tuple[IdleInstants, Metrics]:
    metrics = Metrics("coordinator")
    table = HudiTable(LocalFileSystem(), str(tmp_path / "table"))
    config = TransactionConfig(allow_empty_commit=allow_empty_commit)
    return IdleInstants(table, metrics, config, phase or _committing()), metrics


COMMITTED = {P0: 5, P1: 7}
STAGED = StagedFile(staged_path=f".hoodie/.temp/{INSTANT}/a.parquet",
                    final_path=f"a-0_0-0-0_{INSTANT}.parquet", file_id="a-0", partition_path="",
                    num_records=3, size_bytes=10)


@pytest.mark.parametrize(("case", "answers", "expected_nothing_moved"), [
    ("every partition answered, nothing consumed",
     {P0: _status(P0, 5, 5), P1: _status(P1, 7, 7)}, True),
    ("rows written", {P0: _status(P0, 5, 8, records_written=3, files=[STAGED]),
                      P1: _status(P1, 7, 7)}, False),
    ("only dead letters: the offsets moved", {P0: _status(P0, 5, 9, records_dlq=4),
                                              P1: _status(P1, 7, 7)}, False),
    ("only a skipped tombstone", {P0: _status(P0, 5, 5), P1: _status(P1, 7, 8, records_skipped=1)},
     False),
    ("one answered empty, the other carried", {P0: _status(P0, 5, 5)}, True),
    ("a failed partition gave the instant up", {P0: _status(P0, 5, 5, failed="bad record at 5"),
                                                P1: _status(P1, 7, 7)}, True),
])
def test_what_counts_as_nothing_moved(tmp_path: Path, case: str, answers: dict[PartitionKey, WriteStatus],
                                      expected_nothing_moved: bool) -> None:
    idle, _metrics = _idle(tmp_path)
    planned = _planned(COMMITTED, answers)
    assert idle.nothing_moved(planned, COMMITTED) is expected_nothing_moved, case


def test_a_new_partition_at_offset_zero_and_an_unconfigured_topic_move_nothing(tmp_path: Path) -> None:
    """A partition the table never stored starts at 0; a topic removed from the config keeps
    its stored offset: neither is an offset that moved."""
    idle, _ = _idle(tmp_path)
    old_topic: PartitionKey = ("gone", 0)
    committed = {P0: 5, old_topic: 11}
    planned = _planned({P0: 5, P1: 0}, {P0: _status(P0, 5, 5), P1: _status(P1, 0, 0)},
                       unconfigured={old_topic: 11})
    assert idle.nothing_moved(planned, committed)


def test_allow_empty_commit_commits_idle_instants(tmp_path: Path) -> None:
    idle, _ = _idle(tmp_path, allow_empty_commit=True)
    planned = _planned(COMMITTED, {P0: _status(P0, 5, 5), P1: _status(P1, 7, 7)})
    assert not idle.nothing_moved(planned, COMMITTED)


def _started(tmp_path: Path) -> HudiTable:
    table = HudiTable(LocalFileSystem(), str(tmp_path / "table"))
    table.start_instant(INSTANT)
    return table


def test_withdrawal_leaves_nothing_on_the_table(tmp_path: Path) -> None:
    table = _started(tmp_path)
    timeline = tmp_path / "table" / ".hoodie"
    assert sorted(p.name for p in timeline.glob(f"{INSTANT}.*")) == [f"{INSTANT}.commit.requested",
                                                                      f"{INSTANT}.inflight"]
    assert withdraw_instant(table, INSTANT)
    assert not list(timeline.glob(f"{INSTANT}*"))
    assert not (timeline / ".temp" / INSTANT).exists()
    assert table.pending_instants() == [] and table.completed_commits() == []


def test_a_staged_file_stops_the_withdrawal(tmp_path: Path) -> None:
    """A file in the instant's staging needs the sink log's ABORT decision before the
    deleter may delete it: the instant is left as it was, for a rollback."""
    table = _started(tmp_path)
    staged = Path(table.staging_dir(INSTANT)) / "country=x" / "f.parquet"
    staged.parent.mkdir(parents=True)
    staged.write_bytes(b"x")
    assert not withdraw_instant(table, INSTANT)
    assert staged.exists() and table.pending_instants() == [INSTANT]


def test_withdraw_closes_the_instant_counts_it_and_says_why_not(tmp_path: Path) -> None:
    phase = _committing()
    idle, metrics = _idle(tmp_path, phase=phase)
    table = _started(tmp_path)
    assert asyncio.run(idle.withdraw(INSTANT, [P1])) == "partitions carried: d:1"
    assert table.pending_instants() == [INSTANT]  # a stall is rolled back, visibly, not withdrawn
    assert phase.state is CoordinatorPhase.COMMITTING  # the caller aborts it
    assert asyncio.run(idle.withdraw(INSTANT, [])) is None
    assert table.pending_instants() == [] and phase.state is CoordinatorPhase.IDLE
    assert phase.txn is None
    assert "hudi_sink_instants_skipped_total 1.0" in metrics.render().decode()



def test_an_idle_instant_is_not_committed_by_default() -> None:
    """The default (contract: "an instant in which no offset moved is not committed"); empty
    commits every interval only when asked for (seed ``hoodie.allow.empty.commit=true``)."""
    assert TransactionConfig().allow_empty_commit is False
