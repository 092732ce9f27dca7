"""Failure handling as separate processes: lost control messages heal fast, participants join
and leave without aborted transactions, a SIGKILLed participant loses and duplicates nothing,
a standby coordinator takes over and a frozen (zombie) leader cannot commit after it."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from eventually import eventually
from pipeline import HTTP, Pipeline, Service

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(900)


def _assert_exactly(pipeline: Pipeline, expected: int) -> None:
    ids = pipeline.read_agreed()[0].column("id").to_pylist()  # Hudi's Java reader agrees
    assert len(ids) == expected, f"{len(ids)} rows, expected {expected}"
    assert len(set(ids)) == expected
    assert not pipeline.unlisted_completed_files()
    for relative in pipeline.live_files():
        assert (pipeline.base_path / relative).exists(), f"committed file {relative} is missing"


def _aborts_metric(service: Service) -> float:
    text = HTTP.get(f"{service.url}/metrics", timeout=5).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("hudi_sink_aborts_total"))


def test_lost_control_messages_heal_before_the_timeout(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "transaction": {"interval_ms": 2000, "write_status_timeout_ms": 120000,
                        "flush_records": 100000, "resend_interval_ms": 1000}})
    pipeline.produce(2_000)
    try:
        participant = pipeline.start(
            "participant", env={"HUDI_SINK_FAULTS": "drop:WRITE_STATUS:2,drop:PARTICIPANT_READY:1"})
        pipeline.wait_ready(participant, timeout_s=180)
        coordinator = pipeline.start(
            "coordinator", env={"HUDI_SINK_FAULTS": "drop:START_COMMIT:1,drop:END_COMMIT:1"})
        pipeline.wait_ready(coordinator)
        started = time.monotonic()
        pipeline.wait_offsets(500, timeout_s=60)
        healed_in = time.monotonic() - started
        assert healed_in < 40, f"took {healed_in:.1f} s; the 120 s timeout must not be what healed it"
        assert _aborts_metric(coordinator) == 0
        assert not pipeline.aborted_transactions(coordinator)
        logs = "\n".join(s.log_path.read_text() for s in pipeline.services)
        for kind in ("START_COMMIT", "END_COMMIT", "WRITE_STATUS", "PARTICIPANT_READY"):
            assert f"fault injection: dropped a {kind}" in logs
        _assert_exactly(pipeline, 2_000)
    finally:
        pipeline.stop_all()


def test_participants_join_and_leave_without_aborts(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap)
    pipeline.produce(0)  # creates the data topic
    try:
        coordinator, first = pipeline.start_ready("coordinator", "participant")
        producer = pipeline.produce_in_background(12_000, rate=400)
        eventually(lambda: sum(pipeline.latest_offsets().values()) > 1_000, 120, "first data")
        second = pipeline.start("participant")  # scale out while data flows
        pipeline.wait_ready(second, timeout_s=180)
        eventually(lambda: HTTP.get(f"{second.url}/partitions").json(), 60,
                   "partitions on the new participant")
        pipeline.wait_transactions(coordinator, 2)  # transactions with both participants answering
        pipeline.kill(first, signal.SIGTERM)  # scale in cleanly
        assert first.process.returncode == 0
        assert producer.wait(timeout=120) == 0
        pipeline.wait_offsets(3_000, timeout_s=240)
        assert not pipeline.aborted_transactions(coordinator)
        assert _aborts_metric(coordinator) == 0
        _assert_exactly(pipeline, 12_000)
    finally:
        pipeline.stop_all()


@pytest.mark.long  # test_chaos_small SIGKILLs participants mid-transaction in the main suite
def test_participant_sigkill_mid_transaction_loses_and_duplicates_nothing(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "transaction": {"interval_ms": 4000, "write_status_timeout_ms": 60000,
                        "flush_records": 500, "resend_interval_ms": 1000}})
    pipeline.produce(0)  # creates the data topic
    try:
        _, victim, _ = pipeline.start_ready("coordinator", "participant", "participant")
        producer = pipeline.produce_in_background(8_000, rate=1_000)
        pipeline.wait_holding_staged_files(victim)
        pipeline.kill(victim, signal.SIGKILL)
        assert producer.wait(timeout=120) == 0
        restarted = pipeline.start("participant")
        pipeline.wait_ready(restarted, timeout_s=180)
        pipeline.wait_offsets(2_000, timeout_s=300)
        _assert_exactly(pipeline, 8_000)
    finally:
        pipeline.stop_all()


def test_standby_takes_over_and_a_zombie_leader_cannot_commit(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap)
    pipeline.produce(0)  # creates the data topic
    try:
        *coordinators, _ = pipeline.start_ready("coordinator", "coordinator", "participant")

        def leader() -> Service:
            found = [s for s in coordinators if s.alive() and
                     HTTP.get(f"{s.url}/transactions/current").json()["role"] == "leader"]
            return found[0] if len(found) == 1 else None  # type: ignore[return-value]

        first = eventually(leader, 60, "one leader")
        pipeline.produce(4_000)
        pipeline.wait_offsets(1_000, timeout_s=180)

        # Freeze the leader: the standby must take over within session timeout + 10 s.
        last_before = pipeline.completed_commits()[-1]
        first.process.send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        standby = next(s for s in coordinators if s is not first)
        epoch_before = HTTP.get(f"{standby.url}/transactions/current").json()["epoch"]
        eventually(lambda: HTTP.get(f"{standby.url}/transactions/current").json()["role"] == "leader",
                   6 + 10 + 5, "the standby to lead", every_s=0.2)
        assert time.monotonic() - frozen_at < 6 + 10 + 5
        new_epoch = HTTP.get(f"{standby.url}/transactions/current").json()["epoch"]
        assert new_epoch > epoch_before
        pipeline.produce(4_000)

        def epoch_of(instant: str) -> int:
            extra = pipeline.commit_metadata(instant)["extraMetadata"]
            return int(extra["hudi.sink.coordinator.epoch"])

        pipeline.wait_commits(1, where=lambda instant: epoch_of(instant) >= new_epoch)
        pipeline.wait_transactions(standby, 1)  # (an idle instant commits nothing)
        first.process.send_signal(signal.SIGCONT)  # the zombie wakes up mid-transaction

        pipeline.wait_offsets(2_000, timeout_s=240)
        zombie_words = ("fenced", "lost leadership", "was claimed while")
        eventually(lambda: any(word in first.log_path.read_text() for word in zombie_words), 60,
                   "the zombie to notice it no longer leads")
        pipeline.wait_transactions(standby, 2)  # the table moves on after the zombie acted on what it had
        _assert_exactly(pipeline, 8_000)
        # Commits after the freeze were decided by the new epoch or later; the only possible
        # exception is one the frozen leader had already decided (rolled forward, not redone).
        after = [i for i in pipeline.completed_commits() if i > last_before]
        old_epoch = [i for i in after if int(pipeline.commit_metadata(i)["extraMetadata"]
                                             ["hudi.sink.coordinator.epoch"]) < new_epoch]
        assert len(old_epoch) <= 1 and (not old_epoch or old_epoch[0] == after[0])
        zombie_log = first.log_path.read_text()
        assert any(word in zombie_log for word in zombie_words)
    finally:
        pipeline.stop_all()


@pytest.mark.long  # a frozen participant: test_a_participant_frozen_past_the_timeout_... covers it
def test_zombie_participant_cannot_get_a_file_into_the_table(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "transaction": {"interval_ms": 4000, "write_status_timeout_ms": 60000,
                        "flush_records": 500, "resend_interval_ms": 1000}})
    pipeline.produce(0)  # creates the data topic
    try:
        coordinator, zombie, survivor = pipeline.start_ready("coordinator", "participant", "participant")
        producer = pipeline.produce_in_background(8_000, rate=1_000)
        pipeline.wait_holding_staged_files(zombie)
        zombie.process.send_signal(signal.SIGSTOP)
        # Past its 6 s session: its partitions move to the survivor, whose statuses win.
        eventually(lambda: len(HTTP.get(f"{survivor.url}/partitions").json()) == 4, 60,
                   "the survivor to own all partitions")
        pipeline.wait_commits(1)  # a transaction without the zombie
        zombie.process.send_signal(signal.SIGCONT)  # late flushes and statuses
        assert producer.wait(timeout=120) == 0
        pipeline.wait_offsets(2_000, timeout_s=240)
        pipeline.wait_transactions(coordinator, 2)  # the zombie's late messages had transactions to hit
        _assert_exactly(pipeline, 8_000)
        assert pipeline.partition_files() <= pipeline.listed_files()
    finally:
        pipeline.stop_all()


def test_write_status_timeout_aborts_then_restarts_from_committed_offsets(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    """The only participant freezes past the write-status timeout: the coordinator rolls the
    instant back and starts a new one from the committed offsets; after the participant
    resumes, everything lands exactly once."""
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "transaction": {"interval_ms": 2000, "write_status_timeout_ms": 5000,
                        "flush_records": 500, "resend_interval_ms": 1000}})
    pipeline.produce(2_000)
    try:
        coordinator, participant = pipeline.start_ready("coordinator", "participant")
        pipeline.wait_offsets(500, timeout_s=120)
        participant.process.send_signal(signal.SIGSTOP)
        pipeline.produce(2_000)
        eventually(lambda: any(h.get("reason") == "write status timeout"
                               for h in pipeline.aborted_transactions(coordinator)),
                   60, "an abort by write-status timeout", every_s=0.5)
        assert _aborts_metric(coordinator) >= 1
        participant.process.send_signal(signal.SIGCONT)
        pipeline.wait_offsets(1_000, timeout_s=180)
        _assert_exactly(pipeline, 4_000)
    finally:
        pipeline.stop_all()


def test_partitions_moving_away_and_back_within_one_instant_lose_nothing(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    """One long instant: the first participant flushes, a second one takes half of the
    partitions and leaves again, so they come back to the first as fresh states that flush
    again into the same instant. Staged names must never collide (they did: flush numbers
    restarted at 0 with the same writer nonce, the rename failed and the rows were lost)."""
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "transaction": {"interval_ms": 600000, "write_status_timeout_ms": 120000,
                        "flush_records": 100, "resend_interval_ms": 1000}})
    pipeline.produce(2_000)
    try:
        coordinator, first = pipeline.start_ready("coordinator", "participant")
        pipeline.wait_holding_staged_files(first)
        instant = HTTP.get(f"{coordinator.url}/transactions/current").json()["commit_time"]
        second = pipeline.start("participant")
        pipeline.wait_ready(second, timeout_s=180)
        eventually(lambda: any(v["state"] != "waiting" for v in
                               HTTP.get(f"{second.url}/partitions").json()), 60,
                   "the second participant writing its partitions")
        pipeline.kill(second, signal.SIGTERM)  # its partitions go back to the first
        eventually(lambda: len(HTTP.get(f"{first.url}/partitions").json()) == 4, 60,
                   "all partitions back on the first participant")
        pipeline.produce(2_000)
        eventually(lambda: all(v["state"] == "writing" and v["last_written_offset"] == 999
                               for v in HTTP.get(f"{first.url}/partitions").json()), 120,
                   "every record buffered or flushed in the open instant")
        assert HTTP.get(f"{coordinator.url}/transactions/current").json()["commit_time"] == instant
        assert HTTP.post(f"{coordinator.url}/transactions/commit").status_code == 202
        pipeline.wait_offsets(1_000, timeout_s=120)
        assert instant in pipeline.completed_commits()
        _assert_exactly(pipeline, 4_000)
    finally:
        pipeline.stop_all()


def test_sigterm_while_spark_starts_exits_without_waiting_for_it(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    """SIGTERM while the SparkSession is still being built (a pod stopped during a rollout,
    or a participant that just joined): the process exits at once, not after the session it
    no longer needs. It used to wait for the build (stopping Spark queued behind it), then
    for the warm-up that built a second session, and ``asyncio.run`` joined that thread
    without a bound: 35–47 s on a busy 2-core machine, beyond the shutdown budget."""
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap,
                        overrides={"service": {"shutdown_timeout_ms": 5000}})
    pipeline.produce(10)  # the data topic must exist before the participant starts Spark
    with pipeline:
        participant = pipeline.start("participant")
        eventually(lambda: "starting SparkSession" in HTTP.get(f"{participant.url}/ready",
                                                                  timeout=2).text,
                   120, "the participant starting its SparkSession", every_s=0.1)
        asked = time.monotonic()
        participant.process.send_signal(signal.SIGTERM)
        participant.process.wait(timeout=60)
        took = time.monotonic() - asked
    log = participant.log_path.read_text(errors="replace")
    assert participant.process.returncode == 0, log
    assert took < 5, f"exit took {took:.1f} s (shutdown budget 5 s):\n{log}"
    assert "SparkSession was still starting" in log, log
    assert "forcing exit" not in log, log  # graceful, not cut by the watchdog
