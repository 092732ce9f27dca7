"""What the coordinator's control messages do to this process's partitions.

- START_COMMIT resets each addressed partition to the coordinator's offset (the coordinator
  is the source of truth): seek, resume, write. A repeat is ignored. A START of an epoch we
  have not announced to yet means a new leader that does not know who owns what: it is told.
- END_COMMIT makes a writing partition drain (the intake reports it once drained) and a
  failed one report at once; it restarts a report that failed, re-sends a status the
  coordinator lost, and answers an END of an instant we never started (its START was lost)
  with an announcement, so the coordinator re-sends START.
- ACK_COMMIT closes the instant and commits the consumer-group offsets (for lag tools only).

Messages of an older coordinator epoch than one already heard are dropped. Every handler is
synchronous, so it never interleaves with the intake loop inside one state change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.structs import OffsetAndMetadata

from hudi_sink.services.participant.intake import Intake
from hudi_sink.services.participant.reports import Reporter
from hudi_sink.services.participant.runtime import Runtime
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.shared.kafka.protocol import AckCommit, EndCommit, Envelope, Role, StartCommit, TopicPartition
from hudi_sink.shared.runtime.states import PartitionPhase

__all__ = ["ControlHandler"]

log = logging.getLogger("hudi_sink.participant")


class ControlHandler:
    def __init__(self, runtime: Runtime, intake: Intake, reporter: Reporter) -> None:
        self._rt = runtime
        self._intake = intake
        self._reporter = reporter
        self._epochs = reporter.epochs

    async def run(self) -> None:
        channel = self._rt.clients.channel
        while True:
            for envelope in await channel.receive(timeout_ms=200):
                self.on_control(envelope)

    def on_control(self, envelope: Envelope) -> None:
        if envelope.sender.role is not Role.COORDINATOR:
            return
        if envelope.coordinator_epoch < self._epochs.seen:
            log.debug("dropped %s of stale epoch %d", envelope.type, envelope.coordinator_epoch)
            return
        self._epochs.seen = envelope.coordinator_epoch
        payload = envelope.payload
        if envelope.commit_time is None:
            return
        if isinstance(payload, StartCommit):
            self._on_start(envelope.commit_time, envelope.coordinator_epoch, payload)
        elif isinstance(payload, EndCommit):
            self._on_end(envelope.commit_time, envelope.coordinator_epoch, payload)
        elif isinstance(payload, AckCommit):
            self._on_ack(envelope.commit_time, payload)

    def _targets(self, targets: list[TopicPartition] | None) -> Iterable[TransactionParticipant]:
        active = self._rt.registry.active
        if targets is None:
            return list(active.values())
        return [active[t.key()] for t in targets if t.key() in active]

    def _on_start(self, instant: str, epoch: int, start: StartCommit) -> None:
        active = self._rt.registry.active
        if epoch > self._epochs.announced and active:
            # A new leader forgot who owns what: tell it (it waits for an owner before
            # ending an instant, so an unannounced writer would never be asked to report).
            self._epochs.announced = epoch
            self._reporter.announce_soon([TopicPartition(topic=t, partition=p)
                                          for t, p in sorted(active)])
        offsets = {(o.topic, o.partition): o.offset for o in start.offsets}
        for state in self._targets(start.targets):
            if not state.should_begin(instant, epoch):
                state.last_signal_at = self._rt.clock()
                continue
            offset = offsets.get(state.key, 0)
            state.begin(instant, epoch, offset, start.table_schema, start.follow_writers)
            self._rt.clients.dlq.begin_instant(state.key, offset)
            self._rt.metrics.partition_failed(state.topic, state.partition, False)
            self._intake.fetch_from_start(state)

    def _on_end(self, instant: str, epoch: int, end: EndCommit) -> None:
        unknown: list[TopicPartition] = []
        for state in self._targets(end.targets):
            if (epoch, instant) > (state.epoch, state.instant or ""):
                # END of an instant we never started: its START was lost. Announce, and the
                # coordinator answers with START (and END) for this partition.
                unknown.append(TopicPartition(topic=state.topic, partition=state.partition))
                continue
            if state.instant != instant or state.epoch != epoch:
                continue
            if state.phase is PartitionPhase.WRITING:
                state.drain(self._rt.clock())  # the intake reports once drained
            elif state.phase is PartitionPhase.FAILED:
                self._intake.begin_report(state)
            elif state.phase is PartitionPhase.ENDING and not self._intake.reporting(state):
                self._intake.report(state, instant)  # the earlier report failed: try again
            elif state.phase is PartitionPhase.REPORTED and state.last_status is not None:
                # The coordinator re-sent END: our status was lost (or refused because an
                # announcement of ours was lost). Statuses are idempotent.
                self._reporter.resend_soon(state)
        if unknown:
            self._reporter.announce_soon(unknown)

    def _on_ack(self, instant: str, ack: AckCommit) -> None:
        consumer = self._rt.clients.consumer
        offsets = {(o.topic, o.partition): o.offset for o in ack.offsets}
        to_commit: dict[KafkaTopicPartition, OffsetAndMetadata] = {}
        for state in self._rt.registry.active.values():
            if state.instant != instant or state.phase is not PartitionPhase.REPORTED:
                continue
            offset = offsets.get(state.key, state.next_offset)
            state.acked(offset)
            ktp = KafkaTopicPartition(state.topic, state.partition)
            if ktp in consumer.assignment():
                to_commit[ktp] = OffsetAndMetadata(offset, "")
        if to_commit:
            self._rt.tasks.spawn(self._commit_group_offsets(to_commit), "commit")

    async def _commit_group_offsets(
        self, offsets: dict[KafkaTopicPartition, OffsetAndMetadata]
    ) -> None:
        """Consumer-group offsets follow Hudi commits, so lag tools see the truth. They are
        never read back for correctness (the table's offsets are)."""
        try:
            await self._rt.clients.consumer.commit(offsets)
        except Exception as exc:  # noqa: BLE001 - informational only; a rebalance may race
            log.debug("group offset commit skipped: %s", exc)
