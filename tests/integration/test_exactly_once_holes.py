"""Acceptance tests for issue 9 (exactly-once holes), through the contract only.

Everything here is observable by a user: the ``hudi-sink`` CLI, the YAML config, the
``HUDI_SINK_FAULTS`` environment variable, REST (``/transactions``, ``/partitions``,
``/metrics``), the Kafka topics (data DLQ, the participants' consumer group) and the table
on disk read back with hudi-rs. Nothing imports the services' internals, so the tests hold
whatever shape the participant and coordinator take.

- a flush that fails for good mid-transaction loses nothing (it used to be skipped over and
  the commit's offsets passed its rows);
- start-up in any order, however long Spark warms, aborts nothing and dead-letters each bad
  record once (the first instant used to time out and its replay re-sent dead letters);
- a participant frozen past the write-status timeout costs the others nothing: a partial
  commit carries its partitions' offsets unchanged;
- the stall metric and the consumer group's offsets tell the truth about a frozen participant.

The file-leak acceptance (participant SIGKILL, deleter, no file left behind) lives in
``test_deletion_acceptance.py``, which already drove that scenario.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from eventually import eventually
from pipeline import HTTP, Pipeline, Service, metric_total
from test_bad_records import BAD_KINDS, _produce, _read_all
from test_failures import _aborts_metric, _assert_exactly

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(900)

LONG_SESSION_MS = 30_000
"""A group session longer than every freeze below: the frozen participant keeps its
partitions, so what is measured is the timeout/stall handling, not a rebalance."""


# --- 1. a flush that fails for good ---------------------------------------------------------

def test_a_flush_failing_for_good_mid_transaction_loses_nothing(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    """The participant's 3rd flush fails on every attempt. Its partition must not report
    that instant (no committed offset may pass rows no listed file holds); the records are
    written again later: exactly 8,000 rows, and the failure is counted."""
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "transaction": {"interval_ms": 3000, "write_status_timeout_ms": 60000,
                        "flush_records": 500, "resend_interval_ms": 1000}})
    pipeline.produce(8_000)
    try:
        coordinator = pipeline.start("coordinator")
        participant = pipeline.start("participant", env={"HUDI_SINK_FAULTS": "fail:flush:3"})
        pipeline.wait_ready(coordinator, timeout_s=240)
        pipeline.wait_ready(participant, timeout_s=240)
        pipeline.wait_offsets(2_000, timeout_s=300)

        _assert_exactly(pipeline, 8_000)
        failures = metric_total(participant, "hudi_sink_flush_failures_total")
        assert failures >= 1, "the injected flush failure was not counted (did it happen at all?)"
    finally:
        pipeline.stop_all()


# --- 2. start-up in any order ---------------------------------------------------------------

def _produce_good_bad_and_hostile(pipeline: Pipeline, bootstrap: str) -> int:
    """5,000 good, 300 bad (six kinds) and 40 valid records with a hostile partition value,
    all in the topic before any service starts (as in test_bad_records). Returns the total."""
    pipeline.produce(5_000)
    hostile: list[bytes | None] = [
        orjson.dumps({"id": f"hostile-{i}", "ts": 1700000000000 + i, "country": "../../etc",
                      "amount": float(i), "payload": "p"})
        for i in range(40)
    ]
    bad = [value for value in BAD_KINDS.values() for _ in range(50)]
    asyncio.run(_produce(bootstrap, pipeline.topic, bad + hostile, pipeline.partitions))
    return 5_000 + len(bad) + len(hostile)


def _hold(seconds: float, services: list[Service]) -> None:
    """The scenario's gap between two starts (not a synchronisation): ``seconds`` pass while
    the services already started must stay alive."""
    started = time.monotonic()

    def elapsed() -> bool:
        for service in services:
            if not service.alive():
                raise AssertionError(f"{service.role} exited:\n{service.log_tail()}")
        return time.monotonic() - started >= seconds

    eventually(elapsed, seconds + 30, f"{seconds:.0f} s with only {[s.role for s in services]}")


START_ORDERS = [
    pytest.param(("coordinator", "participant"), 0, id="together"),
    pytest.param(("coordinator", "participant"), 30, id="coordinator-first",
                 marks=pytest.mark.chaos),
    pytest.param(("participant", "coordinator"), 30, id="participant-first",
                 marks=pytest.mark.chaos),
]


@pytest.mark.parametrize(("order", "gap_s"), START_ORDERS)
def test_start_up_in_any_order_aborts_nothing_and_dead_letters_once(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str, order: tuple[str, str],
    gap_s: float,
) -> None:
    """A backlog with bad records waits in Kafka; the services start in ``order``, ``gap_s``
    apart. A 5 s write-status timeout is far shorter than Spark's warm-up (~15 s): the first
    instant used to time out, roll back and re-send its dead letters. Now: no abort, the
    5,040 valid rows once, and exactly one dead letter per bad record."""
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "transaction": {"interval_ms": 3000, "write_status_timeout_ms": 5000,
                        "flush_records": 2000, "resend_interval_ms": 1000}})
    total = _produce_good_bad_and_hostile(pipeline, broker.bootstrap)
    try:
        if gap_s:
            first = pipeline.start(order[0])
            pipeline.wait_ready(first, timeout_s=240)
            _hold(gap_s, [first])
            pipeline.wait_ready(pipeline.start(order[1]), timeout_s=240)
        else:
            pipeline.start_ready(*order)
        coordinator = next(s for s in pipeline.services if s.role == "coordinator")
        eventually(lambda: sum(pipeline.latest_offsets().values()) == total, 300,
                   f"offsets covering all {total} records", every_s=1)

        assert pipeline.aborted_transactions(coordinator) == []
        assert _aborts_metric(coordinator) == 0
        _assert_exactly(pipeline, 5_040)
        dead = asyncio.run(_read_all(broker.bootstrap, f"{unique_name}-dlq", pipeline.partitions))
        sources = Counter(
            tuple(v.decode() for k, v in record.headers  # type: ignore[attr-defined]
                  if k in ("hudi.sink.source.partition", "hudi.sink.source.offset"))
            for record in dead)
        repeated = {source for source, times in sources.items() if times > 1}
        assert not repeated, f"source offsets dead-lettered more than once: {sorted(repeated)[:10]}"
        assert len(dead) == 300
    finally:
        pipeline.stop_all()


# --- 4. partial commit instead of an abort --------------------------------------------------

def _owned(participant: Service) -> list[dict[str, Any]]:
    views: list[dict[str, Any]] = HTTP.get(f"{participant.url}/partitions", timeout=5).json()
    return views


def _named(views: list[dict[str, Any]]) -> set[str]:
    return {f"{v['topic']}:{v['partition']}" for v in views}


def _all_buffered(participants: list[Service], last_offset: int) -> bool:
    """Every partition of every participant holds records up to ``last_offset`` in the open
    instant (flush_records is too large for an early flush: they are unflushed rows)."""
    return all(v["state"] == "writing" and v["last_written_offset"] == last_offset
               for participant in participants for v in _owned(participant))


def test_a_participant_frozen_past_the_timeout_gets_a_partial_commit(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    """Two participants; one freezes right after END_COMMIT reached it, while it still holds
    unflushed rows of every partition it owns (it cannot have answered). Past the 8 s
    write-status timeout the instant commits the other participant's partitions and carries
    the frozen ones' offsets unchanged — no abort. Resumed, everything lands exactly once."""
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "kafka": {"session_timeout_ms": LONG_SESSION_MS},
        "transaction": {"interval_ms": 20000, "write_status_timeout_ms": 8000,
                        "flush_records": 100000, "resend_interval_ms": 1000}})
    pipeline.produce(0)  # creates the data topic
    try:
        coordinator, victim, survivor = pipeline.start_ready("coordinator", "participant",
                                                             "participant")
        both = [victim, survivor]
        eventually(lambda: [len(_owned(p)) for p in both] == [2, 2], 120,
                   "two partitions on each participant")
        # A first commit with rows everywhere: both Spark sessions have written once, so the
        # survivor's flush below is a warm one and answers well inside the 8 s.
        pipeline.produce(4_000)
        eventually(lambda: _all_buffered(both, 999), 120, "the first 1,000 records per partition")
        assert HTTP.post(f"{coordinator.url}/transactions/commit", timeout=5).status_code == 202
        pipeline.wait_offsets(1_000, timeout_s=120)
        warmed = pipeline.completed_commits()[-1]

        pipeline.produce(4_000)
        eventually(lambda: _all_buffered(both, 1_999), 120, "the next 1,000 records per partition")
        opened = next(t for t in pipeline.transactions(coordinator) if t["state"] == "inflight")
        instant = opened["commit_time"]
        assert {v["commit_time"] for v in _owned(victim)} == {instant}
        assert HTTP.post(f"{coordinator.url}/transactions/commit", timeout=5).status_code == 202

        def reached_by_end() -> list[dict[str, Any]] | None:
            views = _owned(victim)
            return views if any(v["state"] in ("draining", "ending") for v in views) else None

        at_freeze = eventually(reached_by_end, 30, "END_COMMIT reaching the victim", every_s=0.02)
        victim.process.send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        frozen = _named([v for v in at_freeze if v["state"] != "reported"])

        def outcome() -> dict[str, Any] | None:
            return next((t for t in pipeline.transactions(coordinator)
                         if t["commit_time"] == instant and t["state"] != "inflight"), None)

        decided = eventually(outcome, 30, f"instant {instant} decided", every_s=0.5)
        assert time.monotonic() - frozen_at < LONG_SESSION_MS / 1000, "the freeze outlived the session"
        assert decided["state"] == "committed", (decided, pipeline.logs())
        assert frozen and set(decided["carried"] or ()) == frozen, (decided, frozen)
        committed = pipeline.offsets_of(instant)
        for name, start in opened["offsets"].items():
            partition = int(name.rsplit(":", 1)[1])
            assert committed[partition] == (start if name in frozen else 2_000), (name, committed)
        assert metric_total(coordinator, "hudi_sink_partial_commits_total") >= 1

        victim.process.send_signal(signal.SIGCONT)
        pipeline.wait_offsets(2_000, timeout_s=240)
        assert [t for t in pipeline.aborted_transactions(coordinator) if t["commit_time"] > warmed] == []
        _assert_exactly(pipeline, 8_000)
    finally:
        pipeline.stop_all()


# --- 5. stall and lag metrics, consumer-group offsets ---------------------------------------

@pytest.mark.long  # metrics only; the suite's budget keeps the data-safety tests
def test_stall_and_lag_metrics_and_group_offsets_tell_the_truth(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    """The only participant freezes while records keep arriving: the coordinator's
    ``hudi_sink_seconds_since_last_commit`` grows past anything a healthy 3 s cycle shows,
    and drops once the participant resumes. The participant's table lag is positive while
    a backlog exists and 0 once all is committed; its consumer group's committed offsets
    then equal the latest commit's offsets (what external lag tools read)."""
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "kafka": {"session_timeout_ms": LONG_SESSION_MS},
        "transaction": {"interval_ms": 3000, "write_status_timeout_ms": 60000,
                        "flush_records": 2000, "resend_interval_ms": 1000}})
    pipeline.produce(0)  # creates the data topic
    try:
        coordinator, participant = pipeline.start_ready("coordinator", "participant")
        producer = pipeline.produce_in_background(10_000, rate=200)
        eventually(lambda: sum(pipeline.latest_offsets().values()) > 0, 120, "a first commit with data")
        stall = "hudi_sink_seconds_since_last_commit"
        participant.process.send_signal(signal.SIGSTOP)
        eventually(lambda: metric_total(coordinator, stall) >= 10, 25,
                   "the stall metric past 10 s", every_s=0.5)
        stalled = metric_total(coordinator, stall)
        eventually(lambda: metric_total(coordinator, stall) >= stalled + 3, 10,
                   "the stall metric still growing", every_s=0.5)
        participant.process.send_signal(signal.SIGCONT)
        eventually(lambda: producer.poll() is None
                   and metric_total(participant, "hudi_sink_table_lag_records") > 0, 30,
                   "a positive table lag while records keep arriving", every_s=0.2)
        eventually(lambda: metric_total(coordinator, stall) < 8, 60,
                   "the stall metric back to a healthy value", every_s=0.5)

        assert producer.wait(timeout=120) == 0
        pipeline.wait_offsets(2_500, timeout_s=240)
        _assert_exactly(pipeline, 10_000)
        eventually(lambda: metric_total(participant, "hudi_sink_table_lag_records") == 0, 30,
                   "no table lag once everything is committed", every_s=0.5)
        eventually(lambda: pipeline.group_offsets() == pipeline.latest_offsets(), 30,
                   "the participants' group offsets equal to the latest commit's", every_s=1)
    finally:
        pipeline.stop_all()
