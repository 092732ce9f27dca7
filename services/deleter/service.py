"""The deleter service: phase 2 of two-phase deletion, on the common service shell.

What is its own: the clients it opens (a producer for re-enqueues, a member of
``<name>-deleter``), two routines and a router.

- ``intents``: the intent loop (consume → decide → delete / keep / re-enqueue → commit);
- ``schedule``: the work done by the member holding partition 0 of the deletion topic — the
  staging sweep (``staging``) and the orphan scan (``reconcile``);
- ``settle``: deciding and acting on one intent, for both of them;
- ``dlq``: listing and replaying the deletion DLQ; ``rest``: the routes, answering with
  the models of ``views``.

On stop, the routines finish the batch and the pass in hand (at most ``DRAIN_TIMEOUT_S``)
before the member leaves the group, so uncommitted intents go to another member.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from aiokafka.structs import TopicPartition
from fastapi import APIRouter

from hudi_sink.services.deleter.context import Counted, DeleterClients, DeleterContext, Tally
from hudi_sink.services.deleter.dlq import DeletionDlq
from hudi_sink.services.deleter.errors import ServiceUnavailable
from hudi_sink.services.deleter.intents import IntentLoop
from hudi_sink.services.deleter.reconcile import Reconciler
from hudi_sink.services.deleter.rest import build_router
from hudi_sink.services.deleter.schedule import Schedule, ScheduledWork
from hudi_sink.services.deleter.settle import Effect, Settler
from hudi_sink.services.deleter.staging import StagingSweeper
from hudi_sink.services.deleter.table_state import TableStateCache
from hudi_sink.services.deleter.views import DeletionStats, DlqEntry, ReconcileResult, ReplayResult
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.deletion.sender import IntentSender
from hudi_sink.shared.kafka.clients import KafkaClientFactory
from hudi_sink.shared.runtime.lifecycle import ServiceShell, kafka_prelude
from hudi_sink.shared.runtime.states import ServicePhase
from hudi_sink.shared.storage.backend import filesystem_for
from hudi_sink.shared.storage.fs import FileSystem

__all__ = ["DeleterService"]

log = logging.getLogger("hudi_sink.deleter")

DRAIN_TIMEOUT_S = 10.0


class DeleterService(ServiceShell[DeleterClients]):
    """Consumes deletion intents and deletes files the table's state says are dead.

    ``fs``, ``clock``, ``schedule`` and ``clients`` are seams for tests (a failing storage, a
    controlled clock, scheduled work kept out of a test about intents, Kafka clients that
    halt); by default storage comes from ``table.base_path``, time is the wall clock (intents
    carry epoch seconds written by other processes), the schedule derives from ``deletion``
    (``Schedule.from_config``) and clients are aiokafka's.
    """

    name = "deleter"

    def __init__(
        self,
        config: SinkConfig,
        *,
        fs: FileSystem | None = None,
        clock: Callable[[], float] = time.time,
        schedule: Schedule | None = None,
        clients: KafkaClientFactory | None = None,
    ) -> None:
        super().__init__(config)
        self._factory = clients if clients is not None else KafkaClientFactory(config)
        table = config.table
        storage = fs if fs is not None else filesystem_for(table.base_path, table.storage_options)
        self.tally = Tally(self.metrics)
        context = DeleterContext(
            fs=storage, table_path=config.table.base_path.rstrip("/") or "/",
            cache=TableStateCache(storage, config.deletion.cache_expiry_s), clock=clock,
            metrics=self.metrics, tally=self.tally,
        )
        self._running: DeleterClients | None = None
        self._settler = Settler(context, orphan_min_age_s=config.deletion.orphan_min_age_s)
        self.intents = IntentLoop(config, self._settler, self._stop)
        self._dlq = DeletionDlq(config, context, self._factory)
        self._reconciler = Reconciler(config.deletion, context)
        schedule = schedule if schedule is not None else Schedule.from_config(config.deletion)
        self._sweeper = StagingSweeper(context, self._settler.sweep_one,
                                       min_age_s=schedule.sweep_min_age_s)
        self.scheduled = ScheduledWork(schedule, context, is_scheduler=self._is_scheduler,
                                       sweep=self._sweeper.sweep, reconcile=self._scheduled_reconcile)

    # --- the shell's hooks ----------------------------------------------------------------
    async def start(self) -> DeleterClients:
        cfg = self.config
        await kafka_prelude(cfg, self.set_not_ready, data_topics=False)
        producer = await self._factory.producer("hudi-sink-deleter")
        try:
            consumer = await self._factory.consumer(cfg.deleter_group)
        except BaseException:
            await self._factory.close(producer)
            raise
        self.intents.subscribe(consumer)
        self._running = DeleterClients(
            producer=producer, consumer=consumer,
            sender=IntentSender(producer, cfg.deletion_topic, metrics=self.metrics),
        )
        log.info("deleter started on %s and %s (group %s)", cfg.deletion_topic,
                 cfg.deletion_retry_topic, cfg.deleter_group)
        return self._running

    def routines(self, running: DeleterClients) -> dict[str, Coroutine[Any, Any, Any]]:
        return {
            "deleter-consume": self.intents.run(running),
            "deleter-scheduled": self.scheduled.run(self._stop),
        }

    async def on_stop(self, routines: list[asyncio.Task[Any]]) -> None:
        """Intake stops by itself (the routines see the stop); let them finish the batch and
        the pass in hand, and re-raise a crash that happens meanwhile."""
        log.info("deleter stopping: stop intake, finish the batch and pass in hand")
        done, pending = await asyncio.wait(routines, timeout=DRAIN_TIMEOUT_S)
        if pending:
            log.warning("deleter stopping: work not finished in %g s, cancelling", DRAIN_TIMEOUT_S)
        for routine in done:
            routine.result()

    async def close(self, running: DeleterClients | None) -> None:
        """Leave the group (uncommitted intents go to another member), then the producer."""
        self._running = None
        if running is not None:
            log.info("deleter stopping: leaving group %s", self.config.deleter_group)
            await self._factory.close(running.consumer, running.producer)
        log.info("deleter stopped")

    def running_readiness(self) -> list[str]:
        if not self.intents.joined:
            return [f"not yet joined consumer group {self.config.deleter_group}"]
        return []

    def routers(self) -> list[APIRouter]:
        return [build_router(self)]

    # --- scheduled work -------------------------------------------------------------------
    def assignment(self) -> set[TopicPartition]:
        """The partitions this member holds (none before start-up or after stop)."""
        running = self._running
        if running is None or self.lifecycle.state is not ServicePhase.RUNNING:
            return set()
        return set(running.consumer.assignment())

    def _is_scheduler(self) -> bool:
        """Whether this member does the scheduled work: it holds deletion partition 0."""
        return TopicPartition(self.config.deletion_topic, 0) in self.assignment()

    async def _scheduled_reconcile(self) -> ReconcileResult:
        return await self.reconcile(dry_run=False)

    # --- what the routes ask (rest.DeletionControl) ---------------------------------------
    def stats(self) -> DeletionStats:
        t = self.tally
        return DeletionStats(
            pending=self.intents.pending, deleted=t[Effect.DELETED], kept_in_use=t[Effect.KEPT_IN_USE],
            retried=t[Effect.RETRIED], dlq=t[Effect.DLQ], reconcile_orphans=t[Counted.ORPHAN_FOUND],
            missing_already=t[Effect.MISSING_ALREADY], failed=t[Counted.FAILED],
            replayed=t[Counted.REPLAYED], undecodable=t[Counted.UNDECODABLE], swept=t[Counted.SWEPT],
            staging_dirs_removed=t[Counted.STAGING_DIR_REMOVED], scheduler=self.scheduled.active,
            sweeps=self.scheduled.sweeps, reconciles=self.scheduled.reconciles,
        )

    async def list_dlq(self, limit: int) -> list[DlqEntry]:
        return await self._dlq.entries(limit)

    async def replay_dlq(self) -> ReplayResult:
        running = self._running
        if running is None:
            raise ServiceUnavailable("the deleter is not running (no producer)")
        return await self._dlq.replay(running.sender)

    async def reconcile(self, *, dry_run: bool = True) -> ReconcileResult:
        running = self._running
        return await self._reconciler.reconcile(running.sender if running else None, dry_run=dry_run)
