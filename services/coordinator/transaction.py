"""One leader's transactions: RFC-32's instant life cycle, one step per call.

``step`` is the whole protocol as a short script: IDLE → start (not while ``draining``) |
  STARTED and interval reached (or forced) → end | ENDED and every partition answered → commit
  | ENDED and timed out → partial commit, keep waiting, or abort | ENDED → re-send END to the silent.
``receive`` applies one participant message between steps and returns the replies. Leadership is
``leadership``'s (here: ``take_over`` to ``stand_by``). Phases move by ``COORDINATOR_TRANSITIONS``;
open ones carry their ``CommitState`` (``phase.PhaseMachine``). Time: the context's ``clock``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiokafka.errors import KafkaError

from hudi_sink.services.coordinator.commit_metadata import PlannedCommit, plan_commit
from hudi_sink.services.coordinator.commit_state import AbortReason, CommitState, StatusOutcome
from hudi_sink.services.coordinator.committer import RecoveryReport, TableCommitter
from hudi_sink.services.coordinator.history import TransactionHistory, transaction_view
from hudi_sink.services.coordinator.idle import IdleInstants
from hudi_sink.services.coordinator.instants import reserve_instant
from hudi_sink.services.coordinator.offset_requests import OffsetRequests
from hudi_sink.services.coordinator.operator_requests import OperatorRequests
from hudi_sink.services.coordinator.phase import UNDECIDED_PHASES, Closed, Open, PhaseMachine
from hudi_sink.services.coordinator.status_checks import StatusChecks
from hudi_sink.services.coordinator.table_schemas import TableSchemas
from hudi_sink.services.coordinator.views import TransactionView
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.kafka.partition_key import PartitionKey, key_text, keys_text, offsets_text
from hudi_sink.shared.kafka.protocol import (
    AckCommit,
    EndCommit,
    Envelope,
    ParticipantReady,
    PartitionOffset,
    StartCommit,
    TopicPartition,
    WriteStatus,
)
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.runtime.states import CoordinatorPhase
from hudi_sink.shared.schema.evolution import Evolution
from hudi_sink.shared.schema.table_schema import TableSchema

__all__ = ["TransactionDriver", "DriverContext", "Outgoing", "Reply", "Clock"]

log = logging.getLogger("hudi_sink.coordinator")

Outgoing = StartCommit | EndCommit | AckCommit
Reply = tuple[Outgoing, str]
"""A message to send and the instant it is for."""
Clock = Callable[[], float]
"""Monotonic seconds (``time.monotonic``; tests pass their own)."""
ChannelSend = Callable[[Outgoing, str, int], Awaitable[None]]
"""Send (payload, instant, epoch) on the control topic."""
ExpectedPartitions = Callable[[], Awaitable[frozenset[PartitionKey]]]


@dataclass(frozen=True)
class DriverContext:
    """What a leader's transactions work with: the table, its committer, the control topic
    (``channel_send``), the data topics' partitions (``expected_partitions``) and the clock."""

    config: SinkConfig
    schema: TableSchema  # the config's; the table's evolved one: TransactionDriver.schemas
    table: HudiTable
    committer: TableCommitter
    metrics: Metrics
    channel_send: ChannelSend
    expected_partitions: ExpectedPartitions
    clock: Clock = field(default=time.monotonic)


class TransactionDriver:
    """The open transaction and everything one leadership knows about transactions."""

    def __init__(self, context: DriverContext) -> None:
        self._ctx = context
        self._config = context.config
        self._committer = context.committer
        self._metrics = context.metrics
        self._clock = context.clock
        self.phase = PhaseMachine()
        self.committed_offsets: dict[PartitionKey, int] = {}
        self.history = TransactionHistory()
        self.latest_instant: str | None = None
        self.starting: str | None = None  # reserved, not yet open (services.coordinator.instants)
        self.last_end_at: float | None = None  # this leadership's latest END (upsert mode's window_from)
        self.owners: dict[PartitionKey, str] = {}  # latest announcer of each partition
        self._requests = OperatorRequests(context.clock)  # REST's (and a drain's) commit, abort
        self._waiting_logged_for: tuple[str, str] | None = None
        self.draining = False  # stopping (services.coordinator.drain): start no new instant
        self._idle = IdleInstants(context.table, context.metrics, context.config.transaction, self.phase)
        self._status_checks = StatusChecks(context.committer, context.table, context.metrics)
        self.schemas = TableSchemas(context.config, context.schema, context.metrics)
        self.offsets = OffsetRequests(context.config, context.table, context.committer,
                                      context.schema.avro_schema_json)

    @property
    def is_leader(self) -> bool:
        return self.phase.state not in (CoordinatorPhase.STANDBY, CoordinatorPhase.STOPPED)

    @property
    def current(self) -> CommitState | None:
        """The open transaction (read-only: only the phase's transitions change it)."""
        return self.phase.txn

    def undecided(self) -> CommitState | None:
        """The open transaction while no decision was asked for (STARTED or ENDED)."""
        return self.phase.txn if self.phase.state in UNDECIDED_PHASES else None

    # --- leadership boundaries ------------------------------------------------------------
    def begin_recovery(self) -> None:
        """Elected: announcements heard as a standby are not trusted, nor a change pending."""
        self.owners.clear()
        self.last_end_at = None
        self.offsets.drop("a new leadership began")
        self.phase.close(CoordinatorPhase.RECOVERING, "elected")

    def take_over(self, epoch: int, report: RecoveryReport,
                  committed_offsets: dict[PartitionKey, int], latest_instant: str | None) -> None:
        """Recovery done: record what it rolled back and become IDLE under ``epoch``."""
        for instant in report.rolled_back:
            self.history.record(TransactionView(commit_time=instant, state="aborted",
                                                reason=AbortReason.TAKEOVER))
            self._metrics.transaction_aborted(AbortReason.TAKEOVER)
        self.committed_offsets = committed_offsets
        self.latest_instant, self.starting = latest_instant, None
        self.phase.close(CoordinatorPhase.IDLE, f"epoch {epoch}")
        log.info("leader with epoch %d; committed offsets %s; rolled forward %s, back %s",
                 epoch, offsets_text(committed_offsets), report.rolled_forward,
                 report.rolled_back)

    def stand_by(self, reason: str) -> None:
        """Leadership lost: forget the open instant (the next leader rolls it back)."""
        if self.current is not None:
            self.history.record_if_absent(transaction_view(self.current, "inflight"))
        self.owners.clear()  # learnt again from announcements under the next leadership
        self.offsets.drop(f"leadership ended: {reason}")
        self.phase.close(CoordinatorPhase.STANDBY, reason)

    def stop(self) -> None:
        if self.phase.can(CoordinatorPhase.STOPPED):
            self.offsets.drop("coordinator shut down")
            self.phase.close(CoordinatorPhase.STOPPED, "shutdown")

    # --- control messages -----------------------------------------------------------------
    def receive(self, envelope: Envelope) -> list[Reply]:
        """Apply one participant message; returns follow-up sends."""
        payload = envelope.payload
        state = self.current
        if isinstance(payload, ParticipantReady):
            for tp in payload.partitions:
                self.owners[tp.key()] = envelope.sender.id
                if state is not None:
                    state.announce(tp.key(), envelope.sender.id, self._clock())
            return self._answer_ready(payload.partitions)
        if isinstance(payload, WriteStatus):
            if state is None or envelope.commit_time != state.instant:
                return self._answer_late_status(envelope, payload)
            if envelope.coordinator_epoch != state.epoch:
                log.info("dropped WRITE_STATUS of stale epoch %d", envelope.coordinator_epoch)
                return []
            outcome = state.record_status(payload, envelope.sender.id)
            if outcome is StatusOutcome.DUPLICATE:
                log.debug("WRITE_STATUS %s-%d for %s: duplicate", payload.topic, payload.partition,
                          state.instant)
            elif outcome is not StatusOutcome.ACCEPTED:
                log.info("WRITE_STATUS %s-%d for %s: %s", payload.topic, payload.partition,
                         state.instant, outcome.value)
            if payload.failed:
                log.error("partition %s-%d failed: %s", payload.topic, payload.partition,
                          payload.failed)
        return []

    def _answer_ready(self, partitions: list[TopicPartition]) -> list[Reply]:
        """A partition joined mid-transaction: it joins this instant (no abort needed)."""
        state = self.undecided()
        if state is None:
            return []
        targets = [tp for tp in partitions if tp.key() in state.expected
                   and tp.key() not in state.statuses]
        if not targets:
            return []
        start = StartCommit(offsets=PartitionOffset.list_of(state.start_offsets), targets=targets,
                            table_schema=self.schemas.ddl, follow_writers=self.schemas.follow)
        sends: list[Reply] = [(start, state.instant)]
        if self.phase.state is CoordinatorPhase.ENDED:
            sends.append((EndCommit(targets=targets), state.instant))
        return sends

    def _answer_late_status(self, envelope: Envelope, status: WriteStatus) -> list[Reply]:
        """A status for an instant that is not the open one.

        Committed by us: its ACK was lost; repeat it. Otherwise (aborted, or of an older
        leader) the partition holds an instant that is over and missed the START of the
        open one: answer as if it had announced itself, so it joins the open instant."""
        instant = envelope.commit_time
        view = self.history.get(instant or "")
        same_epoch = envelope.coordinator_epoch == self._committer.epoch
        if instant is not None and view is not None and view.state == "committed" and same_epoch:
            return [(AckCommit(offsets=PartitionOffset.list_of(self.committed_offsets)), instant)]
        return self._answer_ready([TopicPartition(topic=status.topic, partition=status.partition)])

    # --- the protocol step ----------------------------------------------------------------
    async def step(self) -> None:
        now = self._clock()
        match self.phase.now:
            case Closed(name=CoordinatorPhase.IDLE):  # a boundary: an offset change first
                if await self.offsets.apply(self) is None and not self.draining:
                    await self._start_transaction()
            case Open(txn=state) if self._requests.take_abort(state.instant):
                await self.abort(AbortReason.FORCED)
            case Open(name=CoordinatorPhase.STARTED, txn=state):
                await self._step_started(state, now)
            case Open(name=CoordinatorPhase.ENDED, txn=state):
                await self._step_ended(state, now)

    async def _step_started(self, state: CommitState, now: float) -> None:
        forced = self._requests.take_commit(state.instant, now)
        if forced or state.is_interval_reached(now, self._config.transaction.interval_ms / 1000):
            if not forced and not state.has_known_owner():
                self._log_waiting(state, "no participant has announced a partition yet")
                return  # nobody could answer an END yet (participants still starting)
            await self._end_transaction(now)

    async def _step_ended(self, state: CommitState, now: float) -> None:
        if state.is_complete():
            await self._commit()
        elif state.is_timed_out(now, self._timeout_s()):
            await self._on_timeout(state, now)
        elif state.should_resend_end(now, self._config.transaction.resend_interval_ms / 1000):
            state.end_sent_at = now
            targets = [TopicPartition(topic=t, partition=p) for t, p in state.pending()]
            await self.send(EndCommit(targets=targets), state.instant)

    def _timeout_s(self) -> float:
        return self._config.transaction.write_status_timeout_ms / 1000

    def _log_waiting(self, state: CommitState, why: str) -> None:
        if self._waiting_logged_for != (state.instant, why):
            self._waiting_logged_for = (state.instant, why)
            log.info("%s stays open: %s", state.instant, why)

    async def _on_timeout(self, state: CommitState, now: float) -> None:
        """Write-status deadline passed: commit the partitions that answered and carry the
        others' offsets (a partial commit); roll back only when none answered and someone
        could have. When no participant has ever announced, keep waiting instead: there is
        nothing to roll back for and a participant that comes up joins this instant."""
        missing = state.pending()
        alive_s = 3 * self._config.transaction.resend_interval_ms / 1000
        if state.statuses:
            log.warning("write status timeout for %s: committing %d partition(s), carrying %s",
                        state.instant, len(state.statuses), keys_text(missing, "none"))
            await self._commit()
        elif (state.heard_recently(now, alive_s)
              and not state.is_timed_out(now, 3 * self._timeout_s())):
            # Nobody answered, but participants say they are still working (a slow flush,
            # Spark warming under load): rolling back would only throw their work away. For
            # at most three timeouts: a report hanging longer than that is given up.
            self._log_waiting(state, "participants are still preparing their reports")
        elif state.has_known_owner():
            log.error("write status timeout for %s; no partition answered (missing %s)",
                      state.instant, keys_text(missing, "none"))
            await self.abort(AbortReason.WRITE_STATUS_TIMEOUT)
        else:
            self._log_waiting(state, "no participant has announced a partition yet")

    async def _start_transaction(self) -> None:
        expected = await self._ctx.expected_partitions()
        instant = self.starting = reserve_instant(self)  # before any await: one picker
        await asyncio.to_thread(self._committer.abort_foreign, None)
        await asyncio.to_thread(self._committer.start, instant)
        start_offsets = {key: self.committed_offsets.get(key, 0) for key in expected}
        self.phase.open(CommitState(
            instant=instant,
            epoch=self._committer.epoch,
            expected=expected,
            start_offsets=start_offsets,
            started_at=self._clock(),
            owners={k: v for k, v in self.owners.items() if k in expected},
            window_from=self.last_end_at if self._config.table.write_mode == "upsert" else None,
        ))
        self.starting = None
        await self.send(StartCommit(offsets=PartitionOffset.list_of(start_offsets), table_schema=
                                    self.schemas.ddl, follow_writers=self.schemas.follow), instant)
        log.info("started %s (epoch %d, %d partitions)", instant, self._committer.epoch, len(expected))

    async def _end_transaction(self, now: float) -> None:
        state = self.phase.advance(CoordinatorPhase.ENDED)
        state.mark_ended(now)
        self.last_end_at = now
        await self.send(EndCommit(), state.instant)

    async def _commit(self) -> None:
        state = self.phase.advance(CoordinatorPhase.COMMITTING)
        problems = await asyncio.to_thread(self._verify_statuses, state)
        for key, problem in problems.items():
            log.error("%s: status of %s dropped (partition carried): %s", state.instant,
                      key_text(key), problem)
            state.drop_status(key)
        if problems and not state.statuses:
            await self.abort(AbortReason.STAGED_FILES_UNUSABLE, "; ".join(problems.values()))
            return
        evolution = self.schemas.plan(state.statuses.values())
        planned = self._plan_commit(state, evolution)
        if not evolution.changes and self._idle.nothing_moved(planned, self.committed_offsets):
            if (why_not := await self._idle.withdraw(state.instant, planned.carried)) is not None:
                await self.abort(AbortReason.NOTHING_MOVED, why_not)
            return
        await asyncio.to_thread(self._committer.commit, state.instant, planned.metadata, planned.moves)
        self.committed_offsets = planned.offsets
        self.schemas.committed(evolution, state.instant)
        duration = self._clock() - state.started_at
        self._metrics.commit_completed(duration, planned.records)
        if planned.carried:
            self._metrics.partial_commit(len(planned.carried))
        self.history.record(transaction_view(
            state, "committed", records=planned.records, files=len(planned.moves),
            bytes_=sum(planned.sizes.values()), duration=duration, carried=planned.carried))
        self.phase.close(CoordinatorPhase.IDLE, f"committed {state.instant}")
        log.info("committed %s: %d rows, %d files, %d dlq, offsets %s%s (%.2f s)", state.instant,
                 planned.records, len(planned.moves), planned.dlq, offsets_text(planned.offsets),
                 f", carried {keys_text(planned.carried)}" if planned.carried else "", duration)
        await self.send(AckCommit(offsets=PartitionOffset.list_of(planned.offsets)), state.instant)

    def _plan_commit(self, state: CommitState, evolution: Evolution) -> PlannedCommit:
        topics = list(self._config.kafka.topics)
        return plan_commit(
            state, schema=self.schemas.metadata(evolution), sink_name=self._config.name,
            topics=topics, unconfigured_offsets={k: o for k, o in self.committed_offsets.items()
                                                 if k[0] not in topics},
            operation="UPSERT" if self._config.table.write_mode == "upsert" else "INSERT")

    def _verify_statuses(self, state: CommitState) -> dict[PartitionKey, str]:
        """Statuses whose staged files are not all there with their reported sizes, or whose
        new slices are not written over their groups' latest slices (``StatusChecks``;
        blocking: run in a worker thread)."""
        return self._status_checks.problems(dict(state.statuses), list(self._config.kafka.topics))

    async def abort(self, why: AbortReason, detail: str = "") -> None:
        """Roll the open transaction back (IllegalTransition when none is open)."""
        reason = f"{why.value}: {detail}" if detail else why.value
        state = self.phase.advance(CoordinatorPhase.ABORTING, reason)
        self.last_end_at = None  # every partition seeks back: the next instant gets its interval
        await asyncio.to_thread(self._committer.abort, state.instant, reason)
        self._metrics.transaction_aborted(why.value)
        self.history.record(transaction_view(state, "aborted", reason=reason,
                                             duration=self._clock() - state.started_at))
        self.phase.close(CoordinatorPhase.IDLE, f"aborted {state.instant}")

    # --- sending --------------------------------------------------------------------------
    async def send(self, payload: Outgoing, instant: str) -> None:
        """Send for ``instant`` (the open one, or one just closed: an ACK).

        A failed send is a lost message: every one heals (participants re-announce and
        re-send, END is re-sent), so it is logged, never allowed to end leadership."""
        try:
            await self._ctx.channel_send(payload, instant, self._committer.epoch)
        except KafkaError as exc:
            log.warning("%s for %s not sent (heals by re-send): %r", payload.type.value, instant, exc)

    # --- REST commands --------------------------------------------------------------------
    def open_instant(self) -> str | None:
        return None if (state := self.undecided()) is None else state.instant

    def request_commit(self) -> str | None:
        """End the open instant now; between two instants, the one that starts next (only
        within ``operator_requests.COMMIT_REQUEST_WINDOW_S``). Returns the open instant, if any."""
        instant = self.open_instant()
        self._requests.ask_commit(instant)
        return instant

    def request_abort(self) -> str | None:
        """Roll back the open instant; None (nothing done) when no instant is open, so an
        abort can never hit a transaction the operator did not see."""
        instant = self.open_instant()
        self._requests.ask_abort(instant)
        return instant
