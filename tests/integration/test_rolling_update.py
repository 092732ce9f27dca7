"""A rolling update under load, as Kubernetes does it: each pod SIGTERMed in turn, its
replacement started once it is gone. The stopping leader ends its open instant and commits
what the participants report (services/coordinator/drain.py) instead of rolling it back; a
stopping participant's partitions move to the other one mid-instant; the standby takes over
at once. Nothing is aborted, nothing rolled back, every row lands exactly once, and the last
stop leaves no inflight instant."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest
from eventually import eventually
from pipeline import HTTP, Pipeline, Service
from test_failures import _assert_exactly

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(600)


def _leader(coordinators: list[Service]) -> Service | None:
    found = [s for s in coordinators if s.alive() and
             HTTP.get(f"{s.url}/transactions/current", timeout=5).json()["role"] == "leader"]
    return found[0] if len(found) == 1 else None


def _open_instant(leader: Service, pipeline: Pipeline, participants: list[Service]) -> str | None:
    """The leader's open instant once a participant holds staged files of it (mid-instant)."""
    current = HTTP.get(f"{leader.url}/transactions/current", timeout=5).json()
    if current["phase"] != "started":
        return None
    staged = any(v["staged_files"] for p in participants if p.alive()
                 for v in HTTP.get(f"{p.url}/partitions", timeout=5).json())
    return current["commit_time"] if staged else None


def _mid_instant_under_load(pipeline: Pipeline, coordinators: list[Service],
                            participants: list[Service]) -> tuple[Service, str, Load]:
    """The leader, and its open instant once a participant holds staged files of it, with
    the producer of the batch that opened it still running. A batch takes ~5 s at 300
    records/s; on a loaded machine a flush may land only after its instant has ended, so a
    batch that ends without the window gets the next one (up to three)."""
    leader = eventually(lambda: _leader(coordinators), 60, "one leader")
    load = Load(pipeline)

    def caught_or_done() -> tuple[str | None] | None:
        if instant := _open_instant(leader, pipeline, participants):
            return (instant,)
        return (None,) if load.ended() else None

    for _ in range(3):
        load.next_batch()
        (instant,) = eventually(caught_or_done, 120, "an open instant holding staged files, "
                                "or the batch's end", every_s=0.2)
        if instant is not None:
            return leader, instant, load
    raise AssertionError(f"{load.batches} batches ended without an open instant holding "
                         "staged files")


class Load:
    """Batches of BATCH records at 300 a second; ``batches`` counts those started."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.batches = 0
        self.producer: subprocess.Popen[bytes] | None = None

    def next_batch(self) -> None:
        self.wait()
        self.batches += 1
        self.producer = self.pipeline.produce_in_background(BATCH, rate=300)

    def ended(self) -> bool:
        return self.producer is None or self.producer.poll() is not None

    def wait(self) -> None:
        if self.producer is not None:
            assert self.producer.wait(timeout=120) == 0


def _stop_leader_mid_instant(pipeline: Pipeline, coordinators: list[Service],
                             participants: list[Service]) -> int:
    """SIGTERM the leader, under load, while an instant with staged files is open; check it
    drained (ended and committed that instant) and start its replacement. Returns the
    batches produced (all of them written to the topic)."""
    leader, instant, load = _mid_instant_under_load(pipeline, coordinators, participants)
    pipeline.kill(leader, signal.SIGTERM)
    log = leader.log_path.read_text(errors="replace")
    assert leader.process.returncode == 0, log
    drained = re.search(r"stopping: (\d+) (\w+); no new instant started", log)
    assert drained is not None, log
    assert drained.group(2) == "committed", log  # not rolled back: what was reported landed
    assert drained.group(1) >= instant and drained.group(1) in pipeline.completed_commits()
    coordinators.remove(leader)
    replacement = pipeline.start("coordinator")
    coordinators.append(replacement)
    pipeline.wait_ready(replacement)
    load.wait()
    return load.batches


BATCH = 1_600
"""Records produced around each stop (400 a partition): the load that keeps instants open."""


def _config(tmp_path: Path, unique_name: str, bootstrap: str) -> Pipeline:
    return Pipeline(tmp_path, unique_name, bootstrap, overrides={
        "transaction": {"interval_ms": 4000, "write_status_timeout_ms": 60000,
                        "flush_records": 150, "resend_interval_ms": 1000},
        # The drain's share is this minus the roll back's 15 s and 3 s to close: 42 s, for
        # flushes after END on a loaded 2-core machine (a pod's grace period must cover it).
        "service": {"shutdown_timeout_ms": 60000}})


def _final_checks(pipeline: Pipeline, coordinators: list[Service], batches: int) -> None:
    """Every row once, no abort in the last leader's history (the sink log's decisions of
    every leader), then the last stop as a rollout's end or ``hudi-sink dev`` does it:
    coordinators first (the standby, then the leader, which drains), then the rest; no
    roll back and no inflight instant left on the timeline."""
    pipeline.wait_offsets(batches * BATCH // pipeline.partitions, timeout_s=180)
    final = eventually(lambda: _leader(coordinators), 60, "one leader")
    history = pipeline.transactions(final)
    assert not [h for h in history if h["state"] == "aborted"], history
    for coordinator in sorted(coordinators, key=lambda s: s is final):
        pipeline.kill(coordinator, signal.SIGTERM)
        assert coordinator.process.returncode == 0, coordinator.log_tail()
    pipeline.stop_all()
    _assert_exactly(pipeline, batches * BATCH)
    names = [p.name for p in pipeline.timeline.iterdir()]
    assert not [n for n in names if ".rollback" in n], names
    inflight = {n.removesuffix(".inflight") for n in names if n.endswith(".inflight")}
    assert inflight <= {n.removesuffix(".commit") for n in names if n.endswith(".commit")}, names


def test_a_stopped_leader_commits_its_open_instant_and_the_standby_takes_over(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    """The leader's drain alone (the default suite's part of the rolling update below)."""
    pipeline = _config(tmp_path, unique_name, broker.bootstrap)
    pipeline.produce(0)  # creates the data topic
    with pipeline:
        *coordinators, participant = pipeline.start_ready("coordinator", "coordinator",
                                                          "participant")
        batches = _stop_leader_mid_instant(pipeline, coordinators, [participant])
        _final_checks(pipeline, coordinators, batches)


@pytest.mark.long  # ~2 min on a quiet machine: three Spark sessions start
def test_a_rolling_update_under_load_aborts_nothing(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = _config(tmp_path, unique_name, broker.bootstrap)
    pipeline.produce(0)  # creates the data topic
    with pipeline:
        *coordinators, first, second, _ = pipeline.start_ready(
            "coordinator", "coordinator", "participant", "participant", "deleter")
        participants = [first, second]
        batches = _stop_leader_mid_instant(pipeline, coordinators, participants)

        # A participant mid-instant: its partitions move to the other one, no abort.
        _, _, load = _mid_instant_under_load(pipeline, coordinators, participants)
        pipeline.kill(first, signal.SIGTERM)
        assert first.process.returncode == 0, first.log_tail()
        participants = [second, pipeline.start("participant")]
        pipeline.wait_ready(participants[1], timeout_s=180)
        load.wait()
        batches += load.batches

        batches += _stop_leader_mid_instant(pipeline, coordinators, participants)
        _final_checks(pipeline, coordinators, batches)
