"""The coordinator service: RFC-32's transaction loop, elected, epoch-fenced.

``_process_routine`` is the whole protocol as a short script, one step per pass:
  not leader → stand by | just elected → claim epoch, recover the table |
  IDLE → start | STARTED and interval reached (or forced) → end |
  ENDED and every partition answered → commit | ENDED and timed out → abort |
  ENDED → re-send END to partitions that have not answered (lost messages heal fast).
Control messages arrive through ``_inbox`` and are applied between steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from fastapi import APIRouter

from services.coordinator.commit_metadata import PlannedCommit, plan_commit
from services.coordinator.commit_state import AbortReason, CommitState, StatusOutcome
from services.coordinator.committer import DirectDisposal, TableCommitter
from services.coordinator.election import LeaderElection
from services.coordinator.history import TransactionHistory
from services.coordinator.rest import CurrentTransaction, TransactionView, build_router
from shared.channel import ControlEndpoint
from shared.clients import KafkaClientFactory
from shared.config import SinkConfig
from shared.deletion import DeletionBacklog, IntentSender, KafkaDisposal
from shared.errors import ConfigError, FencedError, HudiSinkError, IllegalTransition, TableFormatError
from shared.faults import Faults
from shared.fs import filesystem_for
from shared.hudi.naming import next_instant_time
from shared.hudi.offsets import offsets_from_metadata
from shared.hudi.table import HudiTable
from shared.kafka import TopicAdmin
from shared.lifecycle import ServiceShell, kafka_prelude
from shared.protocol import (
    AckCommit,
    EndCommit,
    Envelope,
    ParticipantReady,
    PartitionOffset,
    Role,
    Sender,
    StartCommit,
    TopicPartition,
    WriteStatus,
)
from shared.schema import TableSchema
from shared.sink_log import EntryKind
from shared.states import COORDINATOR_TRANSITIONS, CoordinatorPhase, StateMachine

__all__ = ["CoordinatorService", "CoordinatorClients"]

log = logging.getLogger("hudi_sink.coordinator")

Key = tuple[str, int]
Outgoing = StartCommit | EndCommit | AckCommit
Reply = tuple[Outgoing, str | None]
"""A message to send and the instant it is for (None: the open instant)."""
STEP_S = 0.05
RETRY_AFTER_FAILURE_S = 1.0
STANDBY_TABLE_CHECK_S = 15.0
"""How often a standby reads the table's latest commit time (for the stall metric)."""
COMMIT_REQUEST_WINDOW_S = 5.0
"""A forced commit asked for between two instants applies to the next instant only if it
starts this soon (it normally starts within milliseconds); it never lingers."""


@dataclass(frozen=True)
class CoordinatorClients:
    """What start-up opens; the routines take it as an argument."""

    producer: AIOKafkaProducer
    channel: ControlEndpoint
    admin: TopicAdmin
    election: LeaderElection


class CoordinatorService(ServiceShell[CoordinatorClients]):
    name = "coordinator"

    def __init__(self, config: SinkConfig, *, admin_url: str = "", faults: Faults | None = None,
                 clients: KafkaClientFactory | None = None) -> None:
        super().__init__(config)
        self.schema = TableSchema.from_config(config.table)
        self._faults = faults if faults is not None else Faults()
        self._factory = clients if clients is not None else KafkaClientFactory(config)
        self.sender = Sender(role=Role.COORDINATOR, id=uuid.uuid4().hex, host=socket.gethostname())
        self.admin_url = admin_url
        self._fs = filesystem_for(config.table.base_path)
        self._table = HudiTable(self._fs, config.table.base_path)
        self.committer = TableCommitter(self._fs, self._table, DirectDisposal(self._fs))
        self.phase = StateMachine("coordinator", CoordinatorPhase.STANDBY, COORDINATOR_TRANSITIONS)
        self.current: CommitState | None = None
        self.committed_offsets: dict[Key, int] = {}
        self.history = TransactionHistory()
        self._latest_instant: str | None = None
        self._owners: dict[Key, str] = {}
        self._inbox: asyncio.Queue[Envelope] = asyncio.Queue()
        self._commit_request: tuple[str | None, float] | None = None
        """A REST commit: (instant it is for, or None for "the next one", when asked)."""
        self._abort_request: str | None = None
        """A REST abort: the instant it is for (never applied to another one)."""
        self._waiting_logged_for: tuple[str, str] | None = None
        self._table_checked_at: float | None = None
        self._running: CoordinatorClients | None = None
        self._backlog: DeletionBacklog | None = None
        self._fenced_at_generation: int | None = None
        self._led_generation: int | None = None

    @property
    def clients(self) -> CoordinatorClients:
        if self._running is None:
            raise RuntimeError("coordinator clients used before start-up finished")
        return self._running

    # --- lifecycle ------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.phase.state not in (CoordinatorPhase.STANDBY, CoordinatorPhase.STOPPED)

    def running_readiness(self) -> list[str]:
        if self._running is None or not self._running.election.joined:
            return [f"not yet joined group {self.config.coordinator_group}"]
        if not self.is_leader and not self.leader_info():
            return ["no leader known yet"]
        return []

    def leader_info(self) -> dict[str, Any]:
        return dict(self.committer.state.leader)

    def routers(self) -> list[APIRouter]:
        return [build_router(self)]

    def routines(self, running: CoordinatorClients) -> dict[str, Coroutine[Any, Any, Any]]:
        log.info("coordinator %s started; waiting for leadership", self.sender.id)
        routines = {
            "coordinator-election": running.election.run(),
            "coordinator-control": self._control_routine(running.channel),
            "coordinator-process": self._process_routine(running.election),
        }
        if self._backlog is not None:
            routines["coordinator-deletion-backlog"] = self._backlog.run(self._stop)
        return routines

    async def start(self) -> CoordinatorClients:
        cfg = self.config
        await kafka_prelude(cfg, self.set_not_ready, data_topics=True)
        admin = await self._factory.admin(f"coordinator-{self.sender.id}")
        await asyncio.to_thread(self._table.initialize, cfg.table, self.schema)
        await asyncio.to_thread(self.committer.refresh)
        producer = await self._factory.producer("hudi-sink-coordinator")
        intents = IntentSender(producer, cfg.deletion_topic, metrics=self.metrics)
        # Deletion intents, now that we can send them; their backlog shows a missing deleter.
        self.committer.disposal = KafkaDisposal(intents, asyncio.get_running_loop(), cfg)
        self._backlog = DeletionBacklog(cfg, intents, self.metrics)
        channel = await self._factory.channel(self.sender, producer, self._faults)
        election = LeaderElection(
            cfg, self.sender.id,
            leading_epoch=lambda: self.committer.epoch if self.is_leader else 0,
        )
        await election.start()
        self._running = CoordinatorClients(producer=producer, channel=channel, admin=admin,
                                           election=election)
        return self._running

    async def _abort_on_shutdown(self) -> None:
        """Roll back the open, undecided instant so the table is left without an inflight
        instant; if that is not possible in time, the next leader rolls it back."""
        state = self.current
        if state is None or self.phase.state not in (CoordinatorPhase.STARTED, CoordinatorPhase.ENDED):
            return
        try:
            await asyncio.wait_for(self._abort(AbortReason.SHUTDOWN), timeout=15)
            log.info("rolled back open instant %s on shutdown", state.instant)
        except (HudiSinkError, OSError, TimeoutError) as exc:
            log.warning("left open instant %s to the next leader: %s", state.instant, exc)

    async def close(self, running: CoordinatorClients | None) -> None:
        """Roll back the open instant (never half-commit on the way out), leave the group so
        a standby takes over at once, close clients."""
        log.info("coordinator stopping")
        await self._abort_on_shutdown()
        if self.phase.can(CoordinatorPhase.STOPPED):
            self.phase.transition_to(CoordinatorPhase.STOPPED, "shutdown")
        if running is not None:
            with contextlib.suppress(Exception):
                await running.election.stop()
            await self._factory.close(running.channel, running.producer, running.admin)

    # --- control messages ----------------------------------------------------------------
    async def _control_routine(self, channel: ControlEndpoint) -> None:
        while True:
            for envelope in await channel.receive(timeout_ms=200):
                # A standby drops messages (its inbox would grow for as long as it waits);
                # participants re-announce, so a new leader learns what it needs.
                if envelope.sender.role is Role.PARTICIPANT and self.is_leader:
                    self._inbox.put_nowait(envelope)

    def _receive(self, envelope: Envelope) -> list[Reply]:
        """Apply one participant message; returns follow-up sends."""
        payload = envelope.payload
        state = self.current
        if isinstance(payload, ParticipantReady):
            for tp in payload.partitions:
                self._owners[tp.key()] = envelope.sender.id
                if state is not None:
                    state.announce(tp.key(), envelope.sender.id, time.monotonic())
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
        state = self.current
        if state is None or self.phase.state not in (CoordinatorPhase.STARTED, CoordinatorPhase.ENDED):
            return []
        targets = [tp for tp in partitions if tp.key() in state.expected
                   and tp.key() not in state.statuses]
        if not targets:
            return []
        sends: list[Reply] = [(StartCommit(offsets=self._offsets_list(state.start_offsets),
                                           targets=targets), None)]
        if self.phase.state is CoordinatorPhase.ENDED:
            sends.append((EndCommit(targets=targets), None))
        return sends

    def _answer_late_status(self, envelope: Envelope, status: WriteStatus) -> list[Reply]:
        """A status for an instant that is not the open one.

        Committed by us: its ACK was lost; repeat it. Otherwise (aborted, or of an older
        leader) the partition holds an instant that is over and missed the START of the
        open one: answer as if it had announced itself, so it joins the open instant."""
        instant = envelope.commit_time
        view = self.history.get(instant or "")
        same_epoch = envelope.coordinator_epoch == self.committer.epoch
        if view is not None and view.state == "committed" and same_epoch:
            return [(AckCommit(offsets=self._offsets_list(self.committed_offsets)), instant)]
        return self._answer_ready([TopicPartition(topic=status.topic, partition=status.partition)])

    # --- the loop -----------------------------------------------------------------------
    async def _process_routine(self, election: LeaderElection) -> None:
        while True:
            fenced_here = self._fenced_at_generation == election.generation
            if not election.is_leader or fenced_here:
                if self.is_leader:
                    self._step_down("lost group leadership")
                election.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(election.changed.wait(), timeout=1)
                await asyncio.to_thread(self.committer.refresh)
                await self._observe_table_commit(every_s=STANDBY_TABLE_CHECK_S)
                continue
            try:
                if self.is_leader and self._led_generation != election.generation:
                    await self._revalidate_leadership()
                if self.phase.state is CoordinatorPhase.STANDBY:
                    await self._become_leader()
                while not self._inbox.empty():
                    for payload, instant in self._receive(self._inbox.get_nowait()):
                        await self._send(payload, instant)
                await self._step()
            except FencedError as exc:
                log.error("fenced: %s", exc)
                # A newer epoch owns the table: our group view is stale. Wait for a new
                # assignment before claiming again, or two leaders would fence each other.
                self._fenced_at_generation = election.generation
                self._step_down("fenced by a newer epoch")
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)
                continue
            except (ConfigError, IllegalTransition):
                # A config no leader can work with (exit 2 naming the key), or a bug (an
                # illegal state transition): neither is an ordinary runtime failure to retry.
                raise
            except KafkaError as exc:
                # Kafka trouble (admin metadata, a send): nothing in the table changed, and
                # every message heals by re-sending, so keep leading and try again.
                log.warning("Kafka error in transaction step, retrying: %r", exc)
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)
            except (HudiSinkError, OSError, ValueError) as exc:
                log.exception("transaction step failed: %s", exc)
                self._restart_leadership(f"error: {exc}")
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)
            if self._inbox.empty():
                await asyncio.sleep(STEP_S)

    def _step_down(self, reason: str) -> None:
        log.warning("stepping down: %s", reason)
        if self.current is not None:
            self.history.record_if_absent(self._view(self.current, "inflight"))
        self.current = None
        self._owners.clear()  # learnt again from announcements under the next leadership
        self.phase.transition_to(CoordinatorPhase.STANDBY, reason)
        self.metrics.leadership(False, self.committer.epoch)

    async def _revalidate_leadership(self) -> None:
        """A new group assignment while we lead (e.g. we were frozen, then rejoined and won
        again): if another epoch was claimed meanwhile, our state is stale — start over."""
        self._led_generation = self.clients.election.generation
        state = await asyncio.to_thread(self.committer.refresh)
        if state.epoch != self.committer.epoch:
            self._step_down(f"epoch {state.epoch} was claimed while we led with "
                            f"{self.committer.epoch}")

    async def _become_leader(self) -> None:
        self._led_generation = self.clients.election.generation
        self._owners.clear()  # announcements heard as a standby are not trusted
        self.phase.transition_to(CoordinatorPhase.RECOVERING, "elected")
        leader = {"member_id": self.sender.id, "host": self.sender.host, "admin_url": self.admin_url}
        epoch = await asyncio.to_thread(self.committer.claim_epoch, leader)
        report = await asyncio.to_thread(self.committer.recover)
        for instant in report.rolled_back:
            self.history.record(TransactionView(commit_time=instant, state="aborted",
                                                reason=AbortReason.TAKEOVER))
            self.metrics.transaction_aborted(AbortReason.TAKEOVER)
        metadata = await asyncio.to_thread(self._table.latest_commit_metadata)
        self.committed_offsets = {}
        if metadata is not None:
            try:
                self.committed_offsets = offsets_from_metadata(
                    metadata.get("extraMetadata") or {}, list(self.config.kafka.topics))
            except TableFormatError as exc:  # the topic set cannot be matched to the table
                raise ConfigError(str(exc), key="kafka.topics") from exc
        self._latest_instant = await asyncio.to_thread(self._table.latest_instant_time)
        await self._observe_table_commit(every_s=0)
        self.metrics.leadership(True, epoch)
        self.phase.transition_to(CoordinatorPhase.IDLE, f"epoch {epoch}")
        log.info("leader with epoch %d; committed offsets %s; rolled forward %s, back %s",
                 epoch, self._offsets_text(self.committed_offsets), report.rolled_forward,
                 report.rolled_back)

    async def _observe_table_commit(self, every_s: float) -> None:
        """Feed ``seconds_since_last_commit`` from the table's newest commit file, so the
        stall alarm tells the truth after a restart or a failover (not time since start)."""
        now = time.monotonic()
        if self._table_checked_at is not None and now - self._table_checked_at < every_s:
            return
        self._table_checked_at = now
        committed_at = await asyncio.to_thread(self._latest_commit_unix)
        if committed_at is not None:
            self.metrics.table_committed_at(committed_at)

    def _latest_commit_unix(self) -> float | None:
        completed = self._table.completed_commits()
        if not completed:
            return None
        info = self._fs.file_info(self._table.commit_path(completed[-1]))
        return info.mtime if info is not None else None

    async def _step(self) -> None:
        now = time.monotonic()
        phase = self.phase.state
        txn = self.config.transaction
        if phase is CoordinatorPhase.IDLE:
            await self._start_transaction()
            return
        state = self.current
        assert state is not None
        if self._abort_request is not None:
            requested, self._abort_request = self._abort_request, None
            if requested == state.instant:
                await self._abort(AbortReason.FORCED)
                return
        if phase is CoordinatorPhase.STARTED:
            forced = self._take_commit_request(state.instant, now)
            if forced or state.is_interval_reached(now, txn.interval_ms / 1000):
                if not forced and not state.has_known_owner():
                    self._log_waiting(state, "no participant has announced a partition yet")
                    return  # nobody could answer an END yet (participants still starting)
                await self._end_transaction()
        elif phase is CoordinatorPhase.ENDED:
            if state.is_complete():
                await self._commit()
            elif state.is_timed_out(now, txn.write_status_timeout_ms / 1000):
                await self._on_timeout(state)
            elif state.should_resend_end(now, txn.resend_interval_ms / 1000):
                state.end_sent_at = now
                targets = [TopicPartition(topic=t, partition=p) for t, p in state.pending()]
                await self._send(EndCommit(targets=targets))

    def _timeout_s(self) -> float:
        return self.config.transaction.write_status_timeout_ms / 1000

    def _log_waiting(self, state: CommitState, why: str) -> None:
        if self._waiting_logged_for != (state.instant, why):
            self._waiting_logged_for = (state.instant, why)
            log.info("%s stays open: %s", state.instant, why)

    def _take_commit_request(self, instant: str, now: float) -> bool:
        """Whether a REST commit applies to ``instant``: asked for it, or asked between two
        instants just before it started. A stale request is dropped, never applied."""
        request, self._commit_request = self._commit_request, None
        if request is None:
            return False
        target, asked_at = request
        if target == instant:
            return True
        return target is None and now - asked_at <= COMMIT_REQUEST_WINDOW_S

    async def _on_timeout(self, state: CommitState) -> None:
        """Write-status deadline passed: commit the partitions that answered and carry the
        others' offsets (a partial commit); roll back only when none answered and someone
        could have. When no participant has ever announced, keep waiting instead: there is
        nothing to roll back for and a participant that comes up joins this instant."""
        missing = state.pending()
        alive_s = 3 * self.config.transaction.resend_interval_ms / 1000
        if state.statuses:
            log.warning("write status timeout for %s: committing %d partition(s), carrying %s",
                        state.instant, len(state.statuses), self._keys_text(missing))
            await self._commit()
        elif (state.heard_recently(time.monotonic(), alive_s)
              and not state.is_timed_out(time.monotonic(), 3 * self._timeout_s())):
            # Nobody answered, but participants say they are still working (a slow flush,
            # Spark warming under load): rolling back would only throw their work away. For
            # at most three timeouts: a report hanging longer than that is given up.
            self._log_waiting(state, "participants are still preparing their reports")
        elif state.has_known_owner():
            log.error("write status timeout for %s; no partition answered (missing %s)",
                      state.instant, self._keys_text(missing))
            await self._abort(AbortReason.WRITE_STATUS_TIMEOUT)
        else:
            self._log_waiting(state, "no participant has announced a partition yet")

    async def _expected_partitions(self) -> frozenset[Key]:
        counts = await self.clients.admin.partition_counts(list(self.config.kafka.topics))
        missing = [t for t in self.config.kafka.topics if t not in counts]
        if missing:
            raise HudiSinkError(f"data topic(s) {missing} no longer exist")
        return frozenset((t, p) for t, n in counts.items() for p in range(n))

    async def _start_transaction(self) -> None:
        expected = await self._expected_partitions()
        instant = next_instant_time(self._latest_instant, datetime.now(UTC))
        await asyncio.to_thread(self.committer.abort_foreign, None)
        await asyncio.to_thread(self.committer.start, instant)
        self._latest_instant = instant
        start_offsets = {key: self.committed_offsets.get(key, 0) for key in expected}
        self.current = CommitState(
            instant=instant,
            epoch=self.committer.epoch,
            expected=expected,
            start_offsets=start_offsets,
            started_at=time.monotonic(),
            owners={k: v for k, v in self._owners.items() if k in expected},
        )
        self.phase.transition_to(CoordinatorPhase.STARTED, instant)
        await self._send(StartCommit(offsets=self._offsets_list(start_offsets)))
        log.info("started %s (epoch %d, %d partitions)", instant, self.committer.epoch, len(expected))

    async def _end_transaction(self) -> None:
        state = self.current
        assert state is not None
        state.mark_ended(time.monotonic())
        self.phase.transition_to(CoordinatorPhase.ENDED, state.instant)
        await self._send(EndCommit())

    async def _commit(self) -> None:
        state = self.current
        assert state is not None
        self.phase.transition_to(CoordinatorPhase.COMMITTING, state.instant)
        problems = await asyncio.to_thread(self._verify_statuses, state)
        for key, problem in problems.items():
            log.error("%s: status of %s:%d dropped (partition carried): %s", state.instant,
                      key[0], key[1], problem)
            state.drop_status(key)
        if problems and not state.statuses:
            await self._abort(AbortReason.STAGED_FILES_UNUSABLE, "; ".join(problems.values()))
            return
        planned = self._plan_commit(state)
        await asyncio.to_thread(self.committer.commit, state.instant, planned.metadata, planned.moves)
        self.committed_offsets = planned.offsets
        duration = time.monotonic() - state.started_at
        self.metrics.commit_completed(duration, planned.records)
        if planned.carried:
            self.metrics.partial_commit(len(planned.carried))
        self.history.record(self._view(
            state, "committed", records=planned.records, files=len(planned.moves),
            bytes_=sum(planned.sizes.values()), duration=duration, carried=planned.carried))
        self.current = None
        self.phase.transition_to(CoordinatorPhase.IDLE, f"committed {state.instant}")
        log.info("committed %s: %d rows, %d files, %d dlq, offsets %s%s (%.2f s)", state.instant,
                 planned.records, len(planned.moves), planned.dlq,
                 self._offsets_text(planned.offsets),
                 f", carried {self._keys_text(planned.carried)}" if planned.carried else "",
                 duration)
        await self._send(AckCommit(offsets=self._offsets_list(planned.offsets)), state.instant)

    def _plan_commit(self, state: CommitState) -> PlannedCommit:
        topics = list(self.config.kafka.topics)
        return plan_commit(
            state,
            schema_json=self.schema.avro_schema_json(),
            sink_name=self.config.name,
            topics=topics,
            unconfigured_offsets={k: o for k, o in self.committed_offsets.items()
                                  if k[0] not in topics},
        )

    def _verify_statuses(self, state: CommitState) -> dict[Key, str]:
        """Statuses whose staged files are not all there with their reported sizes
        (blocking file checks: run in a worker thread)."""
        problems: dict[Key, str] = {}
        for key, status in list(state.statuses.items()):
            moves = [(f.staged_path, f.final_path) for f in status.files]
            sizes = {f.staged_path: f.size_bytes for f in status.files}
            problem = self.committer.verify_staged(moves, sizes)
            if problem is not None:
                problems[key] = problem
        return problems

    async def _abort(self, why: AbortReason, detail: str = "") -> None:
        state = self.current
        assert state is not None
        reason = f"{why.value}: {detail}" if detail else why.value
        self.phase.transition_to(CoordinatorPhase.ABORTING, reason)
        await asyncio.to_thread(self.committer.abort, state.instant, reason)
        self.metrics.transaction_aborted(why.value)
        self.history.record(self._view(state, "aborted", reason=reason,
                                       duration=time.monotonic() - state.started_at))
        self.current = None
        self.phase.transition_to(CoordinatorPhase.IDLE, f"aborted {state.instant}")

    def _restart_leadership(self, reason: str) -> None:
        """After a failed step, start over as a fresh leader: the recovery path (new epoch,
        roll decided commits forward, roll the rest back) is the one way out of any
        half-done state, so there is no second, special-case repair path."""
        log.error("restarting leadership after failure: %s", reason)
        if self.phase.state is not CoordinatorPhase.STANDBY:
            self._step_down(reason)

    # --- sending --------------------------------------------------------------------------
    async def _send(self, payload: Outgoing, instant: str | None = None) -> None:
        """Send for the open instant, or for ``instant`` (an ACK after it was closed).

        A failed send is a lost message: every one heals (participants re-announce and
        re-send, END is re-sent), so it is logged, never allowed to end leadership."""
        if instant is None:
            assert self.current is not None
            instant = self.current.instant
        try:
            await self.clients.channel.send(payload, commit_time=instant, epoch=self.committer.epoch)
        except KafkaError as exc:
            log.warning("%s for %s not sent (heals by re-send): %r", payload.type.value, instant, exc)

    def _offsets_list(self, offsets: dict[Key, int]) -> list[PartitionOffset]:
        return [PartitionOffset(topic=t, partition=p, offset=o) for (t, p), o in sorted(offsets.items())]

    @staticmethod
    def _offsets_text(offsets: dict[Key, int]) -> str:
        return ",".join(f"{t}:{p}={o}" for (t, p), o in sorted(offsets.items()))

    @staticmethod
    def _keys_text(keys: list[Key]) -> str:
        return ",".join(f"{t}:{p}" for t, p in keys) or "none"

    # --- REST -----------------------------------------------------------------------------
    def _view(self, state: CommitState, status: str, *, records: int | None = None,
              files: int | None = None, bytes_: int | None = None,
              duration: float | None = None, reason: str | None = None,
              carried: list[Key] | None = None) -> TransactionView:
        return TransactionView(
            commit_time=state.instant,
            state=status,
            epoch=state.epoch,
            records=records,
            files=files,
            bytes=bytes_,
            offsets={f"{t}:{p}": o for (t, p), o in sorted(state.next_offsets().items())}
            if status == "committed"
            else {f"{t}:{p}": o for (t, p), o in sorted(state.start_offsets.items())},
            duration_s=round(duration, 3) if duration is not None else None,
            reason=reason,
            carried=[f"{t}:{p}" for t, p in carried] if carried else None,
        )

    def current_transaction(self) -> CurrentTransaction:
        state = self.current
        return CurrentTransaction(
            role="leader" if self.is_leader else "standby",
            phase=self.phase.state.value,
            commit_time=state.instant if state else None,
            epoch=self.committer.epoch if self.is_leader else self.committer.state.epoch,
            partitions_expected=len(state.expected) if state else 0,
            partitions_answered=sorted(f"{t}:{p}" for t, p in state.statuses) if state else [],
            partitions_pending=[f"{t}:{p}" for t, p in state.pending()] if state else [],
            age_s=round(time.monotonic() - state.started_at, 3) if state else None,
            leader=self.leader_info(),
        )

    def inflight_view(self) -> TransactionView | None:
        state = self.current
        if state is None:
            return None
        return TransactionView(
            commit_time=state.instant, state="inflight", epoch=state.epoch,
            offsets={f"{t}:{p}": o for (t, p), o in sorted(state.start_offsets.items())},
            duration_s=round(time.monotonic() - state.started_at, 3),
        )

    def transaction_views(self, limit: int) -> list[TransactionView]:
        """The newest transactions (blocking table reads: call from a worker thread)."""
        decisions = dict(self.committer.state.decisions)  # snapshot; a worker may append
        aborted = {instant: getattr(entry, "reason", "") or "aborted"
                   for instant, entry in decisions.items() if entry.kind is EntryKind.ABORT}
        return self.history.newest(limit, table=self._table, aborted=aborted,
                                   topics=list(self.config.kafka.topics))

    def _open_instant(self) -> str | None:
        state = self.current
        if state is None or self.phase.state not in (CoordinatorPhase.STARTED, CoordinatorPhase.ENDED):
            return None
        return state.instant

    def request_commit(self) -> str | None:
        """End the open instant now; between two instants, the one that starts next (only
        within COMMIT_REQUEST_WINDOW_S). Returns the open instant, if any."""
        instant = self._open_instant()
        self._commit_request = (instant, time.monotonic())
        return instant

    def request_abort(self) -> str | None:
        """Roll back the open instant; None (nothing done) when no instant is open, so an
        abort can never hit a transaction the operator did not see."""
        instant = self._open_instant()
        self._abort_request = instant
        return instant
