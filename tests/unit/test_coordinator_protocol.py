"""The coordinator's protocol handling driven over the in-memory control bus, with a real
table on local disk: partial commits, waiting for participants, timeouts, late statuses,
REST commands bound to their instant. No broker, no Spark: each case takes about a second."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from memory_channel import MemoryChannel, MemoryControlBus

from hudi_sink.services.coordinator.disposal import DirectDisposal
from hudi_sink.services.coordinator.service import CoordinatorClients, CoordinatorService
from hudi_sink.shared.config.settings import SinkConfig, config_from_mapping
from hudi_sink.shared.hudi.sink_log_state import EntryKind
from hudi_sink.shared.kafka.protocol import (
    Envelope,
    MessageType,
    ParticipantReady,
    Role,
    Sender,
    TopicPartition,
    WriteStatus,
)
from hudi_sink.shared.runtime.faults import Faults

TOPIC = "d"
P0, P1 = TopicPartition(topic=TOPIC, partition=0), TopicPartition(topic=TOPIC, partition=1)


class _Admin:
    async def partition_counts(self, topics: list[str]) -> dict[str, int]:
        return dict.fromkeys(topics, 2)


class _Election:
    """Always the leader of generation 1 (election itself is tested with the broker)."""

    is_leader = True
    joined = True
    generation = 1

    def __init__(self) -> None:
        self.changed = asyncio.Event()

    async def run(self) -> None:
        await asyncio.Event().wait()

    async def stop(self) -> None:
        return None


class BusCoordinator(CoordinatorService):
    def __init__(self, config: SinkConfig, bus: MemoryControlBus) -> None:
        super().__init__(config, faults=Faults(""))
        self._bus = bus

    async def start(self) -> CoordinatorClients:
        await asyncio.to_thread(self._table.initialize, self.config.table, self.schema)
        parts = self.assemble(DirectDisposal(self._fs))  # no deleter: staged files go at once
        await asyncio.to_thread(parts.committer.refresh)
        self._running = CoordinatorClients(
            producer=None,  # type: ignore[arg-type]  # nothing is produced but control messages
            channel=self._bus.endpoint(self.sender),
            admin=_Admin(),  # type: ignore[arg-type]
            election=_Election(),  # type: ignore[arg-type]
        )
        return self._running


class Participant:
    """A scripted participant on the bus."""

    def __init__(self, bus: MemoryControlBus, member: str = "m1") -> None:
        self.channel: MemoryChannel = bus.endpoint(Sender(role=Role.PARTICIPANT, id=member))
        self.seen: list[Envelope] = []

    async def announce(self, *partitions: TopicPartition) -> None:
        await self.channel.send(ParticipantReady(partitions=list(partitions)), commit_time=None,
                                epoch=0)

    async def expect(self, kind: MessageType, timeout_s: float = 10,
                     where: Callable[[Envelope], bool] = lambda _: True) -> Envelope:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while asyncio.get_running_loop().time() < deadline:
            for envelope in await self.channel.receive(timeout_ms=100):
                self.seen.append(envelope)
                if envelope.sender.role is Role.COORDINATOR and envelope.type is kind \
                        and where(envelope):
                    return envelope
        raise AssertionError(f"no {kind} within {timeout_s} s; saw {[e.type for e in self.seen]}")

    async def status(self, start: Envelope, tp: TopicPartition, start_offset: int,
                     next_offset: int, **extra: Any) -> None:
        await self.channel.send(
            WriteStatus(topic=tp.topic, partition=tp.partition, start_offset=start_offset,
                        next_offset=next_offset, **extra),
            commit_time=start.commit_time, epoch=start.coordinator_epoch)


@pytest.fixture
async def sink(tmp_path: Path) -> AsyncIterator[tuple[BusCoordinator, MemoryControlBus]]:
    config = config_from_mapping({
        "name": "t",
        "kafka": {"topics": [TOPIC]},
        "table": {"base_path": str(tmp_path / "table"), "schema": "id STRING"},
        "transaction": {"interval_ms": 100, "write_status_timeout_ms": 1000,
                        "resend_interval_ms": 200},
    })
    async with _running(config) as (coordinator, bus):
        yield coordinator, bus


@asynccontextmanager
async def _running(config: SinkConfig) -> AsyncIterator[tuple[BusCoordinator, MemoryControlBus]]:
    """A coordinator of ``config`` running on its own in-memory bus, shut down on exit."""
    bus = MemoryControlBus(config.name)
    coordinator = BusCoordinator(config, bus)
    task = asyncio.create_task(coordinator.run())
    try:
        yield coordinator, bus
    finally:
        coordinator.shutdown()
        await asyncio.wait_for(task, 30)


def _commit_extra(coordinator: CoordinatorService, instant: str) -> dict[str, str]:
    path = Path(coordinator.config.table.base_path) / ".hoodie" / f"{instant}.commit"
    return orjson.loads(path.read_bytes())["extraMetadata"]  # type: ignore[no-any-return]


async def test_timeout_commits_the_partitions_that_answered_and_carries_the_rest(
    sink: tuple[BusCoordinator, MemoryControlBus],
) -> None:
    coordinator, bus = sink
    participant = Participant(bus)
    start = await participant.expect(MessageType.START_COMMIT)
    await participant.announce(P0, P1)  # as a WAITING participant re-announces
    await participant.expect(MessageType.END_COMMIT)
    await participant.status(start, P0, 0, 5, records_dlq=5)
    ack = await participant.expect(MessageType.ACK_COMMIT)  # after the 1 s deadline
    assert ack.commit_time == start.commit_time
    offsets = {(o.topic, o.partition): o.offset for o in ack.payload.offsets}  # type: ignore[union-attr]
    assert offsets == {(TOPIC, 0): 5, (TOPIC, 1): 0}
    extra = _commit_extra(coordinator, start.commit_time or "")
    assert extra["kafka.commit.offsets"] == "0=5,1=0"
    assert extra["hudi.sink.carried.partitions"] == "d:1"
    view = coordinator.history.get(start.commit_time or "")
    assert view is not None and view.state == "committed" and view.carried == ["d:1"]
    assert "hudi_sink_partial_commits_total 1.0" in coordinator.metrics.render().decode()
    # The carried partition starts the next instant from its old offset.
    nxt = await participant.expect(MessageType.START_COMMIT,
                                   where=lambda e: e.commit_time != start.commit_time)
    offsets = {(o.topic, o.partition): o.offset for o in nxt.payload.offsets}  # type: ignore[union-attr]
    assert offsets == {(TOPIC, 0): 5, (TOPIC, 1): 0}


async def test_an_instant_waits_for_the_first_announcement_instead_of_aborting(
    sink: tuple[BusCoordinator, MemoryControlBus],
) -> None:
    coordinator, bus = sink
    participant = Participant(bus)
    start = await participant.expect(MessageType.START_COMMIT)
    with pytest.raises(AssertionError, match="no END_COMMIT"):
        # Ten intervals and longer than the write-status timeout: no END, nothing aborted.
        await participant.expect(MessageType.END_COMMIT, timeout_s=1.5)
    assert coordinator.current is not None and coordinator.current.instant == start.commit_time
    assert coordinator.phase.state.value == "started"
    await participant.announce(P0, P1)  # a participant finally comes up
    joined = await participant.expect(MessageType.START_COMMIT, where=lambda e: e.payload.targets
                                      is not None)  # type: ignore[union-attr]
    assert joined.commit_time == start.commit_time
    await participant.expect(MessageType.END_COMMIT)
    await participant.status(start, P0, 0, 3)
    await participant.status(start, P1, 0, 4)
    ack = await participant.expect(MessageType.ACK_COMMIT)
    assert ack.commit_time == start.commit_time
    assert not [v for v in coordinator.transaction_views(10) if v.state == "aborted"]


def _timed_config(tmp_path: Path, mode: str, timeout_ms: int) -> SinkConfig:
    """A 3 s interval; ``write_status_timeout_ms`` as given."""
    keyed = {"write_mode": "upsert", "record_key_field": "id"} if mode == "upsert" else {}
    return config_from_mapping({
        "name": "t", "kafka": {"topics": [TOPIC]},
        "table": {"base_path": str(tmp_path / "table"), "schema": "id STRING", **keyed},
        "transaction": {"interval_ms": 3000, "write_status_timeout_ms": timeout_ms,
                        "resend_interval_ms": min(1000, timeout_ms // 5)}})


async def _next_instant_end(participant: Participant, previous: Envelope) -> tuple[Envelope, float]:
    """The END of the instant after ``previous`` and the seconds from its START to it."""
    loop = asyncio.get_running_loop()
    start = await participant.expect(MessageType.START_COMMIT,
                                     where=lambda e: e.commit_time != previous.commit_time)
    started = loop.time()
    end = await participant.expect(MessageType.END_COMMIT,
                                   where=lambda e: e.commit_time == start.commit_time)
    return end, loop.time() - started


@pytest.mark.parametrize("mode", ["upsert", "insert"])
async def test_after_an_instant_that_outlasted_the_interval_upsert_mode_ends_the_next_at_once(
    tmp_path: Path, mode: str,
) -> None:
    """Upsert mode counts the interval from the previous END: records that arrived during a
    slow instant's merges have waited long enough when the next one starts. Insert mode
    counts from START (its partitions write while an instant is open)."""
    async with _running(_timed_config(tmp_path, mode, 60000)) as (_, bus):
        participant = Participant(bus)
        first = await participant.expect(MessageType.START_COMMIT)
        await participant.announce(P0, P1)
        await participant.expect(MessageType.END_COMMIT)
        await asyncio.sleep(3.5)  # the stimulus: flushes slower than the interval
        await participant.status(first, P0, 0, 3)
        await participant.status(first, P1, 0, 4)
        await participant.expect(MessageType.ACK_COMMIT)
        end, waited = await _next_instant_end(participant, first)
        if mode == "upsert":
            assert waited < 2.0, f"END came {waited:.2f} s after START, not at once"
        else:
            assert waited > 2.5, f"END came {waited:.2f} s after START, not an interval"
        await participant.status(end, P0, 3, 3)  # answered: the shutdown has nothing to drain
        await participant.status(end, P1, 4, 4)


async def test_after_a_roll_back_an_upsert_instant_counts_its_interval_from_start(
    tmp_path: Path,
) -> None:
    """Rolled back, every partition seeks back with nothing read ahead: an instant ended at
    its START would hold almost nothing and still cost a merge of every group it touches."""
    async with _running(_timed_config(tmp_path, "upsert", 1000)) as (coordinator, bus):
        participant = Participant(bus)
        first = await participant.expect(MessageType.START_COMMIT)
        await participant.announce(P0, P1)
        await participant.expect(MessageType.END_COMMIT)  # no status: rolled back
        end, waited = await _next_instant_end(participant, first)
        assert waited > 2.5, f"END came {waited:.2f} s after START, not an interval"
        view = coordinator.history.get(first.commit_time or "")
        assert view is not None and view.state == "aborted"
        await participant.status(end, P0, 0, 0)
        await participant.status(end, P1, 0, 0)


async def test_no_answer_at_all_rolls_back_and_a_late_status_joins_the_next_instant(
    sink: tuple[BusCoordinator, MemoryControlBus],
) -> None:
    coordinator, bus = sink
    participant = Participant(bus)
    start = await participant.expect(MessageType.START_COMMIT)
    await participant.announce(P0, P1)  # as a WAITING participant re-announces
    await participant.expect(MessageType.END_COMMIT)
    nxt = await participant.expect(MessageType.START_COMMIT,
                                   where=lambda e: e.commit_time != start.commit_time)
    aborted = coordinator.history.get(start.commit_time or "")
    assert aborted is not None and aborted.state == "aborted"
    assert aborted.reason == "write status timeout"
    # Its START was lost: the partition still reports for the aborted instant.
    await participant.status(start, P1, 0, 9)
    rejoin = await participant.expect(
        MessageType.START_COMMIT,
        where=lambda e: e.commit_time == nxt.commit_time and e.payload.targets == [P1])  # type: ignore[union-attr]
    assert rejoin.coordinator_epoch == nxt.coordinator_epoch


async def test_rest_abort_applies_only_to_the_open_instant(
    sink: tuple[BusCoordinator, MemoryControlBus],
) -> None:
    coordinator, bus = sink
    participant = Participant(bus)
    assert coordinator.request_abort() is None or coordinator.current is not None
    start = await participant.expect(MessageType.START_COMMIT)
    instant = coordinator.request_abort()
    assert instant == start.commit_time
    nxt = await participant.expect(MessageType.START_COMMIT,
                                   where=lambda e: e.commit_time != start.commit_time)
    view = coordinator.history.get(instant or "")
    assert view is not None and view.state == "aborted" and view.reason == "forced through REST"
    # The next instant is not touched by the request made for the previous one.
    await participant.announce(P0, P1)
    await participant.expect(MessageType.END_COMMIT, where=lambda e: e.commit_time == nxt.commit_time)
    await participant.status(nxt, P0, 0, 1)
    await participant.status(nxt, P1, 0, 1)
    ack = await participant.expect(MessageType.ACK_COMMIT)
    assert ack.commit_time == nxt.commit_time


async def test_a_participant_still_preparing_its_report_is_waited_for_not_rolled_back(
    sink: tuple[BusCoordinator, MemoryControlBus],
) -> None:
    coordinator, bus = sink
    participant = Participant(bus)
    start = await participant.expect(MessageType.START_COMMIT)
    await participant.announce(P0, P1)
    end = await participant.expect(MessageType.END_COMMIT)
    assert end.commit_time == start.commit_time
    # A slow flush: past the 1 s write-status timeout, the participant only says it is alive.
    loop = asyncio.get_running_loop()
    until = loop.time() + 2.5
    while loop.time() < until:
        await participant.announce(P0, P1)
        await asyncio.sleep(0.2)
    assert coordinator.current is not None and coordinator.current.instant == start.commit_time
    await participant.status(start, P0, 0, 2)
    await participant.status(start, P1, 0, 3)
    ack = await participant.expect(MessageType.ACK_COMMIT)
    assert ack.commit_time == start.commit_time
    assert coordinator.history.get(start.commit_time or "").state == "committed"  # type: ignore[union-attr]


def _idle_config(tmp_path: Path, timeout_ms: int) -> SinkConfig:
    """Empty commits not asked for (``transaction.allow_empty_commit: false``, seed
    ``hoodie.allow.empty.commit=false``)."""
    return config_from_mapping({
        "name": "t", "kafka": {"topics": [TOPIC]},
        "table": {"base_path": str(tmp_path / "table"), "schema": "id STRING"},
        "transaction": {"interval_ms": 100, "write_status_timeout_ms": timeout_ms,
                        "resend_interval_ms": 200, "allow_empty_commit": False},
    })


async def test_an_instant_in_which_no_offset_moved_is_withdrawn_without_a_trace(
    tmp_path: Path,
) -> None:
    """No commit while nothing arrives, and nothing left behind: no timeline file, no sink log
    entry, no ``GET /transactions`` entry, only ``hudi_sink_instants_skipped_total``. A
    dead-lettered record moves an offset, so its instant commits (without a file); the
    offsets the next instant starts from are always the table's."""
    config = _idle_config(tmp_path, 5000)
    bus = MemoryControlBus(config.name)
    coordinator = BusCoordinator(config, bus)
    task = asyncio.create_task(coordinator.run())
    timeline = tmp_path / "table" / ".hoodie"
    try:
        participant = Participant(bus)

        async def one_instant(next_p0: int, **extra: Any) -> Envelope:
            start = await participant.expect(MessageType.START_COMMIT,
                                             where=lambda e: e.commit_time not in seen)
            seen.add(start.commit_time)
            await participant.announce(P0, P1)  # as a WAITING participant re-announces
            offsets = {o.partition: o.offset for o in start.payload.offsets}  # type: ignore[union-attr]
            await participant.expect(MessageType.END_COMMIT)
            await participant.status(start, P0, offsets[0], next_p0, **extra)
            await participant.status(start, P1, offsets[1], offsets[1])
            return start

        seen: set[str | None] = set()
        empty = await one_instant(0)
        dlq = await one_instant(3, records_dlq=3)
        await participant.expect(MessageType.ACK_COMMIT, where=lambda e: e.commit_time == dlq.commit_time)
        again_empty = await one_instant(3)
        after = await participant.expect(MessageType.START_COMMIT,
                                         where=lambda e: e.commit_time not in seen)
        views = await asyncio.to_thread(coordinator.transaction_views, 100)
        decisions = dict(coordinator.parts.committer.refresh().decisions)
        metrics = coordinator.metrics.render().decode()
    finally:
        coordinator.shutdown()
        await asyncio.wait_for(task, 30)
    commits = sorted(p.name.removesuffix(".commit") for p in timeline.glob("*.commit"))
    assert commits == [dlq.commit_time]
    assert _commit_extra(coordinator, dlq.commit_time or "")["kafka.commit.offsets"] == "0=3,1=0"
    for withdrawn in (empty, again_empty):
        instant = withdrawn.commit_time or ""
        assert not list(timeline.glob(f"{instant}*")) and not (timeline / ".temp" / instant).exists()
        assert coordinator.history.get(instant) is None and instant not in decisions
        assert instant not in {v.commit_time for v in views}
    assert "hudi_sink_instants_skipped_total 2.0" in metrics
    assert "hudi_sink_aborts_total{" not in metrics and "hudi_sink_commits_total 1.0" in metrics
    assert [v.state for v in views if v.commit_time == dlq.commit_time] == ["committed"]
    assert {o.partition: o.offset for o in after.payload.offsets} == {0: 3, 1: 0}  # type: ignore[union-attr]


async def test_nothing_moved_but_a_partition_carried_is_rolled_back_visibly(tmp_path: Path) -> None:
    """A partition that did not answer in time is a stall, not an idle sink: with nothing
    moved there is still nothing to commit, but the instant is an abort (sink log decision,
    ``GET /transactions``, ``hudi_sink_aborts_total``), never counted as skipped."""
    config = _idle_config(tmp_path, 1000)
    async with _running(config) as (coordinator, bus):
        participant = Participant(bus)
        start = await participant.expect(MessageType.START_COMMIT)
        await participant.announce(P0, P1)
        await participant.expect(MessageType.END_COMMIT)
        await participant.status(start, P0, 0, 0)  # P1 never answers
        nxt = await participant.expect(MessageType.START_COMMIT,
                                       where=lambda e: e.commit_time != start.commit_time)
        decisions = dict(coordinator.parts.committer.refresh().decisions)
        metrics = coordinator.metrics.render().decode()
    view = coordinator.history.get(start.commit_time or "")
    assert view is not None and view.state == "aborted"
    assert view.reason == "no offset moved: partitions carried: d:1"
    assert decisions[start.commit_time or ""].kind is EntryKind.ABORT
    assert 'hudi_sink_aborts_total{reason="no offset moved"} 1.0' in metrics
    assert "hudi_sink_instants_skipped_total 0.0" in metrics
    assert not list((tmp_path / "table" / ".hoodie").glob("*.commit"))
    assert {o.partition: o.offset for o in nxt.payload.offsets} == {0: 0, 1: 0}  # type: ignore[union-attr]
