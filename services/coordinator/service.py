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
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from fastapi import APIRouter

from services.coordinator.commit_state import AbortReason, CommitState
from services.coordinator.committer import DirectDisposal, TableCommitter
from services.coordinator.election import LeaderElection
from services.coordinator.history import TransactionHistory, inflight_view
from services.coordinator.maintenance.routine import MaintenanceRoutine
from services.coordinator.rest import (
    CurrentTransaction,
    TransactionView,
    build_maintenance_router,
    build_router,
)
from services.coordinator.transaction import DriverContext, Outgoing, TransactionDriver
from shared.channel import ControlEndpoint
from shared.clients import KafkaClientFactory
from shared.config import SinkConfig
from shared.deletion import DeletionBacklog, IntentSender, KafkaDisposal
from shared.errors import ConfigError, FencedError, HudiSinkBug, HudiSinkError, TableFormatError
from shared.faults import Faults
from shared.hudi.offsets import offsets_from_metadata
from shared.hudi.table import HudiTable
from shared.kafka import TopicAdmin
from shared.lifecycle import ServiceShell, kafka_prelude
from shared.partition_key import PartitionKey, key_text
from shared.protocol import (
    Envelope,
    Role,
    Sender,
)
from shared.sink_log import EntryKind
from shared.states import CoordinatorPhase, StateMachine
from shared.storage import filesystem_for

__all__ = ["CoordinatorService", "CoordinatorClients"]

log = logging.getLogger("hudi_sink.coordinator")

STEP_S = 0.05
RETRY_AFTER_FAILURE_S = 1.0
STANDBY_TABLE_CHECK_S = 15.0
"""How often a standby reads the table's latest commit time (for the stall metric)."""


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
        self.schema = config.table.table_schema()
        self._faults = faults if faults is not None else Faults()
        self._factory = clients if clients is not None else KafkaClientFactory(config)
        self.sender = Sender(role=Role.COORDINATOR, id=uuid.uuid4().hex, host=socket.gethostname())
        self.admin_url = admin_url
        self._fs = filesystem_for(config.table.base_path, config.table.storage_options)
        self._table = HudiTable(self._fs, config.table.base_path)
        self.committer = TableCommitter(self._fs, self._table, DirectDisposal(self._fs))
        self.driver = TransactionDriver(DriverContext(
            config, self.schema, self._table, self.committer, self.metrics,
            channel_send=self._channel_send, expected_partitions=self._expected_partitions))
        self.maintenance = MaintenanceRoutine(config, self._table, self.committer, self.driver,
                                              self.metrics)
        self._inbox: asyncio.Queue[Envelope] = asyncio.Queue()
        self._table_checked_at: float | None = None
        self._running: CoordinatorClients | None = None
        self._backlog: DeletionBacklog | None = None
        self._fenced_at_generation: int | None = None
        self._led_generation: int | None = None

    @property
    def clients(self) -> CoordinatorClients:
        if self._running is None:
            raise HudiSinkBug("coordinator clients used before start-up finished")
        return self._running

    # --- lifecycle ------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.driver.is_leader

    # Read by tests and the REST views.
    @property
    def phase(self) -> StateMachine[CoordinatorPhase]:
        return self.driver.phase

    @property
    def current(self) -> CommitState | None:
        return self.driver.current

    @property
    def history(self) -> TransactionHistory:
        return self.driver.history

    def running_readiness(self) -> list[str]:
        if self._running is None or not self._running.election.joined:
            return [f"not yet joined group {self.config.coordinator_group}"]
        if not self.is_leader and not self.leader_info():
            return ["no leader known yet"]
        return []

    def leader_info(self) -> dict[str, Any]:
        return dict(self.committer.state.leader)

    def routers(self) -> list[APIRouter]:
        return [build_router(self), build_maintenance_router(self)]

    def routines(self, running: CoordinatorClients) -> dict[str, Coroutine[Any, Any, Any]]:
        log.info("coordinator %s started; waiting for leadership", self.sender.id)
        routines = {
            "coordinator-election": running.election.run(),
            "coordinator-control": self._control_routine(running.channel),
            "coordinator-process": self._process_routine(running.election),
            "coordinator-maintenance": self.maintenance.run(),
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
        state = self.driver.current
        if state is None or not self.driver.has_undecided_instant():
            return
        try:
            await asyncio.wait_for(self.driver.abort(AbortReason.SHUTDOWN), timeout=15)
            log.info("rolled back open instant %s on shutdown", state.instant)
        except HudiSinkBug:
            raise
        except (HudiSinkError, OSError, TimeoutError) as exc:
            log.warning("left open instant %s to the next leader: %s", state.instant, exc)

    async def close(self, running: CoordinatorClients | None) -> None:
        """Roll back the open instant (never half-commit on the way out), leave the group so
        a standby takes over at once, close clients."""
        log.info("coordinator stopping")
        await self._abort_on_shutdown()
        self.driver.stop()
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

    async def _channel_send(self, payload: Outgoing, instant: str, epoch: int) -> None:
        await self.clients.channel.send(payload, commit_time=instant, epoch=epoch)

    async def _expected_partitions(self) -> frozenset[PartitionKey]:
        counts = await self.clients.admin.partition_counts(list(self.config.kafka.topics))
        missing = [t for t in self.config.kafka.topics if t not in counts]
        if missing:
            raise HudiSinkError(f"data topic(s) {missing} no longer exist")
        return frozenset((t, p) for t, n in counts.items() for p in range(n))

    # --- leadership -----------------------------------------------------------------------
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
                if self.driver.phase.state is CoordinatorPhase.STANDBY:
                    await self._become_leader()
                while not self._inbox.empty():
                    for payload, instant in self.driver.receive(self._inbox.get_nowait()):
                        await self.driver.send(payload, instant)
                await self.driver.step()
            except FencedError as exc:
                log.error("fenced: %s", exc)
                # A newer epoch owns the table: our group view is stale. Wait for a new
                # assignment before claiming again, or two leaders would fence each other.
                self._fenced_at_generation = election.generation
                self._step_down("fenced by a newer epoch")
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)
                continue
            except (ConfigError, HudiSinkBug):
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
        self.driver.stand_by(reason)
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
        self.driver.begin_recovery()
        leader = {"member_id": self.sender.id, "host": self.sender.host, "admin_url": self.admin_url}
        epoch = await asyncio.to_thread(self.committer.claim_epoch, leader)
        report = await asyncio.to_thread(self.committer.recover)
        metadata = await asyncio.to_thread(self._table.latest_commit_metadata)
        committed: dict[PartitionKey, int] = {}
        if metadata is not None:
            try:
                committed = offsets_from_metadata(
                    metadata.get("extraMetadata") or {}, list(self.config.kafka.topics))
            except TableFormatError as exc:  # the topic set cannot be matched to the table
                raise ConfigError(str(exc), key="kafka.topics") from exc
        latest = await asyncio.to_thread(self._table.latest_instant_time)
        await self._observe_table_commit(every_s=0)
        self.metrics.leadership(True, epoch)
        self.driver.take_over(epoch, report, committed, latest)

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

    def _restart_leadership(self, reason: str) -> None:
        """After a failed step, start over as a fresh leader: the recovery path (new epoch,
        roll decided commits forward, roll the rest back) is the one way out of any
        half-done state, so there is no second, special-case repair path."""
        log.error("restarting leadership after failure: %s", reason)
        if self.driver.phase.state is not CoordinatorPhase.STANDBY:
            self._step_down(reason)

    # --- REST -----------------------------------------------------------------------------
    def current_transaction(self) -> CurrentTransaction:
        state = self.driver.current
        return CurrentTransaction(
            role="leader" if self.is_leader else "standby",
            phase=self.driver.phase.state.value,
            commit_time=state.instant if state else None,
            epoch=self.committer.epoch if self.is_leader else self.committer.state.epoch,
            partitions_expected=len(state.expected) if state else 0,
            partitions_answered=sorted(key_text(k) for k in state.statuses) if state else [],
            partitions_pending=[key_text(k) for k in state.pending()] if state else [],
            age_s=round(time.monotonic() - state.started_at, 3) if state else None,
            leader=self.leader_info(),
        )

    def inflight_view(self) -> TransactionView | None:
        state = self.driver.current
        return None if state is None else inflight_view(state, time.monotonic())

    def transaction_views(self, limit: int) -> list[TransactionView]:
        """The newest transactions (blocking table reads: call from a worker thread)."""
        decisions = dict(self.committer.state.decisions)  # snapshot; a worker may append
        aborted = {instant: getattr(entry, "reason", "") or "aborted"
                   for instant, entry in decisions.items() if entry.kind is EntryKind.ABORT}
        return self.driver.history.newest(limit, table=self._table, aborted=aborted,
                                          topics=list(self.config.kafka.topics))

    def request_commit(self) -> str | None:
        return self.driver.request_commit()

    def request_abort(self) -> str | None:
        return self.driver.request_abort()

    def maintenance_view(self) -> dict[str, Any]:
        m = self.maintenance
        return {"role": "leader" if self.is_leader else "standby", **m.stats,
                "last": m.last, "last_error": m.last_error}

    def request_clustering(self) -> None:
        self.maintenance.request_clustering()
