"""What this process tells the coordinator, and telling it again when a message was lost.

Two messages go out: PARTICIPANT_READY (we own these partitions: answer with the current
START_COMMIT) and WRITE_STATUS (what a partition wrote in an instant). Both may be lost (a
broker hiccup, a new leader that did not hear them), so the heal routine re-announces
partitions the coordinator has been silent about and re-sends statuses it did not ACK, well
before the coordinator's timeout would roll the instant back. Statuses are idempotent per
(instant, partition), so a re-send is always safe.

Apart from the control handling (:mod:`.control`, what the coordinator tells us) because
the two change for different reasons: the rules of the protocol there, the delivery of our
own messages here.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from aiokafka.errors import KafkaError

from hudi_sink.services.participant.dlq_sender import DeadLetterSendError
from hudi_sink.services.participant.runtime import Runtime
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.shared.config.settings import TransactionConfig
from hudi_sink.shared.kafka.protocol import ParticipantReady, TopicPartition
from hudi_sink.shared.runtime.states import PartitionPhase

__all__ = ["Epochs", "Reporter"]

log = logging.getLogger("hudi_sink.participant")


@dataclass
class Epochs:
    """Coordinator epochs as this process saw them (shared with the control handling)."""

    seen: int = 0
    """Newest coordinator epoch heard; messages of older epochs are dropped."""
    announced: int = 0
    """Newest coordinator epoch this process announced its partitions to."""


class Reporter:
    def __init__(self, runtime: Runtime, transaction: TransactionConfig) -> None:
        self._rt = runtime
        self._channel = runtime.clients.channel
        self._resend_interval = transaction.resend_interval_ms / 1000
        self._interval = transaction.interval_ms / 1000
        self.epochs = Epochs()

    # --- PARTICIPANT_READY -----------------------------------------------------------------
    async def announce(self, partitions: list[TopicPartition]) -> None:
        self.epochs.announced = max(self.epochs.announced, self.epochs.seen)
        await self._channel.send(ParticipantReady(partitions=partitions), commit_time=None, epoch=0)
        now = self._rt.clock()
        for tp in partitions:
            state = self._rt.registry.active.get(tp.key())
            if state is not None:
                state.last_signal_at = now

    def announce_soon(self, partitions: list[TopicPartition]) -> None:
        self._rt.tasks.spawn(self.announce(partitions), "announce")

    # --- WRITE_STATUS ----------------------------------------------------------------------
    async def send_status(self, state: TransactionParticipant, instant: str) -> None:
        """The end of a report, once the partition's flushes are done: wait for the dead
        letters' acks, then send WRITE_STATUS. A failure before the status is sent leaves
        the partition in ENDING; the coordinator's END re-send starts the report again."""
        if state.instant != instant or state.phase is not PartitionPhase.ENDING:
            return  # a newer START replaced this instant while we flushed
        if state.gave_up is None:
            try:
                await self._rt.clients.dlq.wait_acked(state.key)
            except DeadLetterSendError as exc:
                # A committed offset must never hide a lost dead letter: carry this instant.
                state.give_up(instant, str(exc))
        if state.counters.records_skipped:
            self._rt.metrics.records_skipped(state.topic, state.counters.records_skipped)
        if state.instant != instant or state.phase is not PartitionPhase.ENDING:
            return
        status = state.build_status()
        await self._channel.send(status, commit_time=instant, epoch=state.epoch)
        if state.instant == instant and state.phase is PartitionPhase.ENDING:
            state.reported(status)

    def resend_soon(self, state: TransactionParticipant) -> None:
        self._rt.tasks.spawn(self.resend_status(state), "resend")

    async def resend_status(self, state: TransactionParticipant) -> None:
        """Send the status again; at most once per resend interval announce the partition
        first, so a coordinator that lost our announcement (and refuses our status as not
        the owner's) learns who owns it."""
        # Captured before any await: a START or ACK handled meanwhile changes the state.
        status, instant, epoch = state.last_status, state.instant, state.epoch
        if status is None or instant is None:
            return
        now = self._rt.clock()
        if now - state.last_announced_at > self._resend_interval:
            state.last_announced_at = now
            await self.announce([TopicPartition(topic=state.topic, partition=state.partition)])
        await self._channel.send(status, commit_time=instant, epoch=epoch)
        state.last_signal_at = self._rt.clock()

    # --- healing lost messages ---------------------------------------------------------------
    async def heal_routine(self) -> None:
        interval = self._resend_interval
        while True:
            await asyncio.sleep(interval / 2)
            try:
                await self.heal(self._rt.clock(), interval)
            except KafkaError as exc:  # a lost re-send is healed by the next pass
                log.warning("re-announce / status re-send failed, retrying: %r", exc)

    async def heal(self, now: float, interval: float) -> None:
        # WAITING: no START yet. WRITING for longer than an interval without END: the END
        # (or our announcement to a new leader) was lost. DRAINING / ENDING: END arrived and
        # the report is being prepared (a slow flush): tell the coordinator we are alive, so
        # it waits instead of rolling back an instant nobody answered yet.
        writing_silence = self._interval + interval
        working = (PartitionPhase.DRAINING, PartitionPhase.ENDING)
        idle = [
            TopicPartition(topic=s.topic, partition=s.partition)
            for s in self._rt.registry.active.values()
            if (s.phase in (PartitionPhase.WAITING, *working) and now - s.last_signal_at > interval)
            or (s.phase is PartitionPhase.WRITING and now - s.last_signal_at > writing_silence)
        ]
        if idle:
            await self.announce(idle)
        for state in list(self._rt.registry.active.values()):
            if state.phase is PartitionPhase.REPORTED and now - state.last_signal_at > interval:
                await self.resend_status(state)
            lag = state.lag()
            if lag is not None:  # paused partitions are not fetched: keep the gauge fresh
                self._rt.metrics.partition_lag(state.topic, state.partition, lag)
