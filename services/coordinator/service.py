"""The coordinator service: RFC-32's transaction loop, elected, epoch-fenced — the shell.

What is its own: the clients it opens (a producer, the control channel, an admin client, the
leader election), the parts it builds once a producer exists (``assemble``: the table
committer with its deletion-intent disposal, the transaction driver, the maintenance routine
and the leadership loop), its routines and its REST routes' reads and commands. The work is
in the parts:

- :mod:`.leadership`: the leadership loop (stand by, claim, recover, step, step down);
- :mod:`.transaction`: one leader's transactions, one protocol step per call;
- :mod:`.committer`: everything done to the table, fenced through the sink log;
- :mod:`.maintenance`: clustering, cleaning and archival beside ingestion.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaProducer
from fastapi import APIRouter

from hudi_sink.services.coordinator.commit_state import AbortReason, CommitState
from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.disposal import StagedFileDisposal
from hudi_sink.services.coordinator.drain import SHUTDOWN_ABORT_S, drain, drain_budget_s
from hudi_sink.services.coordinator.election import LeaderElection
from hudi_sink.services.coordinator.history import TransactionHistory, inflight_view
from hudi_sink.services.coordinator.leadership import Leadership
from hudi_sink.services.coordinator.maintenance.routine import MaintenanceRoutine
from hudi_sink.services.coordinator.offset_requests import new_request_id
from hudi_sink.services.coordinator.phase import PhaseMachine
from hudi_sink.services.coordinator.rest import build_maintenance_router, build_offsets_router, build_router
from hudi_sink.services.coordinator.transaction import Clock, DriverContext, Outgoing, TransactionDriver
from hudi_sink.services.coordinator.views import (
    CurrentTransaction,
    OffsetsAccepted,
    OffsetsView,
    TransactionView,
    current_transaction,
)
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.deletion.sender import DeletionBacklog, IntentSender, KafkaDisposal
from hudi_sink.shared.errors import HudiSinkBug, HudiSinkError
from hudi_sink.shared.hudi.offset_change import OffsetChange, check_reason, parse_requested
from hudi_sink.shared.hudi.offsets import offsets_from_metadata
from hudi_sink.shared.hudi.sink_log_state import EntryKind
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.table_record import keep_kafka_partitions, partitions_changed
from hudi_sink.shared.kafka.channel import ControlEndpoint
from hudi_sink.shared.kafka.clients import KafkaClientFactory
from hudi_sink.shared.kafka.connection import TopicAdmin
from hudi_sink.shared.kafka.partition_key import PartitionKey, offsets_by_text
from hudi_sink.shared.kafka.protocol import Role, Sender
from hudi_sink.shared.runtime.faults import Faults
from hudi_sink.shared.runtime.lifecycle import ServiceShell, kafka_prelude
from hudi_sink.shared.runtime.states import CoordinatorPhase
from hudi_sink.shared.schema.evolution import DDL_KEY
from hudi_sink.shared.storage.backend import filesystem_for

__all__ = ["CoordinatorService", "CoordinatorClients", "CoordinatorParts"]

log = logging.getLogger("hudi_sink.coordinator")

@dataclass(frozen=True)
class CoordinatorClients:
    """What start-up opens; the routines take it as an argument."""

    producer: AIOKafkaProducer
    channel: ControlEndpoint
    admin: TopicAdmin
    election: LeaderElection


@dataclass(frozen=True)
class CoordinatorParts:
    """What acts on the table, built once by ``CoordinatorService.assemble``."""

    committer: TableCommitter
    driver: TransactionDriver
    maintenance: MaintenanceRoutine
    leadership: Leadership


class CoordinatorService(ServiceShell[CoordinatorClients]):
    name = "coordinator"

    def __init__(self, config: SinkConfig, *, admin_url: str = "", faults: Faults | None = None,
                 clients: KafkaClientFactory | None = None, clock: Clock = time.monotonic) -> None:
        """``clock`` is monotonic seconds for every timer of the transactions and the
        leadership loop (tests pass their own)."""
        super().__init__(config)
        self.schema = config.table.table_schema()
        self._faults = faults if faults is not None else Faults()
        self._factory = clients if clients is not None else KafkaClientFactory(config)
        self._clock = clock
        self.sender = Sender(role=Role.COORDINATOR, id=uuid.uuid4().hex, host=socket.gethostname())
        self.admin_url = admin_url
        self._fs = filesystem_for(config.table.base_path, config.table.storage_options)
        self._table = HudiTable(self._fs, config.table.base_path)
        self._parts: CoordinatorParts | None = None
        self._running: CoordinatorClients | None = None
        self._backlog: DeletionBacklog | None = None
        self._key_partitions: int | None = None
        """Upsert mode: the data topic's partition count the table recorded (keys map to it)."""

    @property
    def clients(self) -> CoordinatorClients:
        if self._running is None:
            raise HudiSinkBug("coordinator clients used before start-up finished")
        return self._running

    @property
    def parts(self) -> CoordinatorParts:
        if self._parts is None:
            raise HudiSinkBug("coordinator parts used before start-up built them")
        return self._parts

    def assemble(self, disposal: StagedFileDisposal) -> CoordinatorParts:
        """Build the parts that act on the table around ``disposal`` (where staged files no
        commit lists go), once: start-up calls it as soon as the producer its deletion
        intents need exists; a test without Kafka passes a disposal of its own."""
        if self._parts is not None:
            raise HudiSinkBug("coordinator parts assembled twice")
        cfg = self.config
        committer = TableCommitter(self._fs, self._table, disposal)
        context = DriverContext(
            cfg, self.schema, self._table, committer, self.metrics, channel_send=self._channel_send,
            expected_partitions=self._expected_partitions, clock=self._clock)
        driver = TransactionDriver(context)
        member = {"member_id": self.sender.id, "host": self.sender.host, "admin_url": self.admin_url}
        self._parts = CoordinatorParts(
            committer=committer, driver=driver,
            maintenance=MaintenanceRoutine(cfg, self._table, committer, driver, self.metrics),
            leadership=Leadership(context, driver, member=member))
        return self._parts

    # --- lifecycle ------------------------------------------------------------------------
    # Read by tests.
    @property
    def phase(self) -> PhaseMachine:
        return self.parts.driver.phase

    @property
    def current(self) -> CommitState | None:
        return self.parts.driver.current

    @property
    def history(self) -> TransactionHistory:
        return self.parts.driver.history

    def running_readiness(self) -> list[str]:
        if self._running is None or not self._running.election.joined:
            return [f"not yet joined group {self.config.coordinator_group}"]
        if not self.is_leader and not self.leader_info():
            return ["no leader known yet"]
        return []

    def routers(self) -> list[APIRouter]:
        return [build_router(self), build_maintenance_router(self), build_offsets_router(self)]

    def routines(self, running: CoordinatorClients) -> dict[str, Coroutine[Any, Any, Any]]:
        log.info("coordinator %s started; waiting for leadership", self.sender.id)
        parts = self.parts
        routines = {
            "coordinator-election": running.election.run(),
            "coordinator-control": parts.leadership.receive(running.channel),
            "coordinator-process": parts.leadership.run(running.election),
            "coordinator-maintenance": parts.maintenance.run(),
        }
        if self._backlog is not None:
            routines["coordinator-deletion-backlog"] = self._backlog.run(self._stop)
        return routines

    async def start(self) -> CoordinatorClients:
        cfg = self.config
        await kafka_prelude(cfg, self.set_not_ready, data_topics=True)
        admin = await self._factory.admin(f"coordinator-{self.sender.id}")
        count = await self._upsert_partition_count(admin)
        await asyncio.to_thread(self._table.initialize, cfg.table, self.schema,
                                kafka_partitions=count)
        if count is not None:  # upsert: record the count, or refuse another one (exit 2)
            self._key_partitions = await asyncio.to_thread(
                keep_kafka_partitions, self._fs, cfg.table.base_path, cfg.kafka.topics[0], count)
        producer = await self._factory.producer("hudi-sink-coordinator")
        intents = IntentSender(producer, cfg.deletion_topic, metrics=self.metrics)
        # Deletion intents, now that we can send them; their backlog shows a missing deleter.
        parts = self.assemble(KafkaDisposal(intents, asyncio.get_running_loop(), cfg))
        await asyncio.to_thread(parts.committer.refresh)
        # A table.schema the table cannot follow exits 2 here, naming the column (a leader
        # adopts the latest commit's schema again when it takes over).
        latest = await asyncio.to_thread(self._table.latest_commit_metadata)
        parts.driver.schemas.adopt(latest.get("extraMetadata") if latest is not None else None)
        self._backlog = DeletionBacklog(cfg, intents, self.metrics)
        channel = await self._factory.channel(self.sender, producer, self._faults, self.metrics)
        election = LeaderElection(
            cfg, self.sender.id,
            leading_epoch=lambda: parts.committer.epoch if parts.driver.is_leader else 0,
        )
        await election.start()
        self._running = CoordinatorClients(producer=producer, channel=channel, admin=admin,
                                           election=election)
        return self._running

    async def on_stop(self, routines: list[asyncio.Task[Any]]) -> None:
        """A leader drains while its leadership loop still runs (``.drain``): it ends the
        open instant and commits what was reported, within its share of the budget."""
        if self._parts is not None:
            await drain(self._parts.driver,
                        drain_budget_s(self.config.service.shutdown_timeout_ms / 1000))

    async def _abort_on_shutdown(self, driver: TransactionDriver) -> None:
        """Roll back the open, undecided instant so the table is left without an inflight
        instant; if that is not possible in time, the next leader rolls it back."""
        state = driver.undecided()
        if state is None:
            return
        try:
            await asyncio.wait_for(driver.abort(AbortReason.SHUTDOWN), timeout=SHUTDOWN_ABORT_S)
            log.info("rolled back open instant %s on shutdown", state.instant)
        except (HudiSinkError, OSError, TimeoutError) as exc:
            log.warning("left open instant %s to the next leader: %s", state.instant, exc)

    async def close(self, running: CoordinatorClients | None) -> None:
        """Roll back an instant the drain could not decide in time (never half-commit on the
        way out), leave the group so a standby takes over at once, close clients."""
        log.info("coordinator stopping")
        if self._parts is not None:
            await self._abort_on_shutdown(self._parts.driver)
            self._parts.driver.stop()
        if running is not None:
            with contextlib.suppress(Exception):
                await running.election.stop()
            await self._factory.close(running.channel, running.producer, running.admin)

    # --- what the driver sends and asks ----------------------------------------------------
    async def _channel_send(self, payload: Outgoing, instant: str, epoch: int) -> None:
        await self.clients.channel.send(payload, commit_time=instant, epoch=epoch)

    async def _upsert_partition_count(self, admin: TopicAdmin) -> int | None:
        """Upsert mode: the partition count of the one data topic (``kafka_prelude`` waited
        for it to exist); None in insert mode, which records none."""
        if self.config.table.write_mode != "upsert":
            return None
        topic = self.config.kafka.topics[0]
        counts = await admin.partition_counts([topic])
        if topic not in counts:
            raise HudiSinkError(f"data topic {topic!r} no longer exists")
        return counts[topic]

    async def _expected_partitions(self) -> frozenset[PartitionKey]:
        counts = await self.clients.admin.partition_counts(list(self.config.kafka.topics))
        missing = [t for t in self.config.kafka.topics if t not in counts]
        if missing:
            raise HudiSinkError(f"data topic(s) {missing} no longer exist")
        if self._key_partitions is not None:  # upsert: a count changed while running → exit 2
            topic = self.config.kafka.topics[0]
            refused = partitions_changed(self.config.table.base_path, topic,
                                         self._key_partitions, counts[topic])
            if refused is not None:
                raise refused
        return frozenset((t, p) for t, n in counts.items() for p in range(n))

    # --- REST (rest.TransactionControl, rest.MaintenanceControl) ---------------------------
    # Served from the start, before start-up built the parts: until then, a standby that
    # knows no leader.
    @property
    def is_leader(self) -> bool:
        return self._parts is not None and self._parts.driver.is_leader

    def leader_info(self) -> dict[str, Any]:
        return {} if self._parts is None else dict(self._parts.committer.state.leader)

    def current_transaction(self) -> CurrentTransaction:
        parts = self._parts
        if parts is None:
            return current_transaction(leading=False, phase=CoordinatorPhase.STANDBY, txn=None,
                                       epoch=0, leader={}, now=self._clock())
        driver, committer = parts.driver, parts.committer
        return current_transaction(
            leading=driver.is_leader, phase=driver.phase.state, txn=driver.current,
            epoch=committer.epoch if driver.is_leader else committer.state.epoch,
            leader=self.leader_info(), now=self._clock())

    def inflight_view(self) -> TransactionView | None:
        state = None if self._parts is None else self._parts.driver.current
        return None if state is None else inflight_view(state, self._clock())

    def schema_view(self) -> dict[str, Any]:
        """The table's schema as its latest commit holds it (blocking: a table read)."""
        metadata = self._table.latest_commit_metadata()
        extra = (metadata or {}).get("extraMetadata") or {}
        schemas = self._parts.driver.schemas if self._parts is not None else None
        config = self.config.table
        ddl = extra.get(DDL_KEY) or (schemas.ddl if schemas is not None else config.schema_ddl)
        avro = extra.get("schema") or config.table_schema(ddl).avro_schema_json()
        return {"source": config.schema_source, "ddl": ddl, "avro": json.loads(avro),
                "commit_time": next(reversed(self._table.completed_commits()), None),
                "pending_changes": list(schemas.pending) if schemas is not None else []}

    def transaction_views(self, limit: int) -> list[TransactionView]:
        """The newest transactions (blocking table reads: call from a worker thread)."""
        topics = list(self.config.kafka.topics)
        if self._parts is None:
            return TransactionHistory().newest(limit, table=self._table, aborted={}, topics=topics)
        decisions = dict(self._parts.committer.state.decisions)  # snapshot; a worker may append
        aborted = {instant: getattr(entry, "reason", "") or "aborted"
                   for instant, entry in decisions.items() if entry.kind is EntryKind.ABORT}
        return self._parts.driver.history.newest(limit, table=self._table, aborted=aborted,
                                                 topics=topics)

    def request_commit(self) -> str | None:
        return None if self._parts is None else self._parts.driver.request_commit()

    def request_abort(self) -> str | None:
        return None if self._parts is None else self._parts.driver.request_abort()

    def maintenance_view(self) -> dict[str, Any]:
        if self._parts is None:
            return {"role": "standby", "last": {}, "last_error": None}
        m = self._parts.maintenance
        return {"role": "leader" if self.is_leader else "standby", **m.stats,
                "last": m.last, "last_error": m.last_error}

    def clustering_refused(self) -> str | None:
        if self.config.table.write_mode == "upsert":  # the config refuses clustering.enabled
            return ("clustering is refused with table.write_mode: upsert (a replacecommit "
                    "would race the owners' new slices of the groups it rewrites; write-time "
                    "file sizing, table.small_file_bytes, keeps files few)")
        if self.config.maintenance.clustering.enabled:
            return None
        return ("clustering is off (opt-in: readers that follow only .commit actions read a "
                "clustered table's rows twice); set maintenance.clustering.enabled: true to run it")

    def request_clustering(self) -> None:
        self.parts.maintenance.request_clustering()

    # --- REST (rest.OffsetControl) ----------------------------------------------------------
    def offsets_view(self) -> OffsetsView:
        """The latest commit's offsets (any coordinator: read from the table; blocking, call
        from a worker thread) and this coordinator's latest offset request."""
        completed = self._table.completed_commits()
        offsets: dict[PartitionKey, int] = {}
        if completed:
            extra = self._table.read_commit_metadata(completed[-1]).get("extraMetadata") or {}
            offsets = offsets_from_metadata(extra, list(self.config.kafka.topics))
        last = None if self._parts is None else self._parts.driver.offsets.last
        return OffsetsView(commit_time=completed[-1] if completed else None,
                           offsets=offsets_by_text(offsets), last_request=last)

    def offsets_refused(self) -> str | None:
        """Why ``POST /offsets`` is refused whatever the caller sends: without admin.token.
        Setting offsets skips or repeats records on purpose, so unlike the other commands
        it is never open, not even with admin.allow_unauthenticated."""
        if self.config.admin.token:
            return None
        return ("POST /offsets needs admin.token (HUDI_SINK__ADMIN__TOKEN) and a bearer "
                "token: setting offsets skips or repeats records, so it is never open to "
                "unauthenticated callers (admin.allow_unauthenticated does not apply)")

    async def request_offsets(self, raw: dict[str, Any], reason: str) -> OffsetsAccepted:
        """Check and queue an offset change for the next instant boundary, and end the open
        instant now so that boundary comes at once. ConfigError naming a bad entry;
        HudiSinkError while another change is pending."""
        topics = list(self.config.kafka.topics)
        counts = await self.clients.admin.partition_counts(topics)
        change = OffsetChange(offsets=parse_requested(raw, topics, counts),
                              reason=check_reason(reason), set_by="rest",
                              request_id=new_request_id())
        driver = self.parts.driver  # the await above may have spanned a loss of leadership:
        driver.offsets.submit(change, leading=driver.is_leader)
        instant = driver.open_instant()
        if instant is not None:  # end it now: the boundary comes at once
            driver.request_commit()
        detail = (f"applied at the next instant boundary: the open instant {instant} ends now"
                  if instant is not None else "applied before the next instant starts")
        return OffsetsAccepted(accepted=True, request_id=change.request_id,
                               offsets=offsets_by_text(change.offsets), detail=detail)
