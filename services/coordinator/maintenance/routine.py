"""The maintenance routine: clustering, cleaning and archival beside ingestion.

One pass every ``maintenance.clustering.interval_s`` while this coordinator leads (or at once
on ``POST /maintenance/clustering``): roll back replacecommits no leader decided, then
cluster, clean and archive, each in a worker thread. A replacecommit is decided only once no
older ingestion instant is unfinished — in flight, or pending on the timeline (one a failed
step left decided, until the next leadership rolls it forward) — so there is no timeline hole
for incremental readers; the pass waits, ingestion does not. Ingestion never waits for
maintenance: clustering never takes a group its owner may still pack into (``may_take_slices``),
so a replacecommit never conflicts with a commit (with one ``table.small_file_bytes`` for
every process), and the two share only the committer's lock around sink log appends (milliseconds).
A failed pass is logged and retried next interval; a fenced one waits for the next
leadership.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter, Gauge

from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.instants import reserve_instant, wait_for_older_ingestion
from hudi_sink.services.coordinator.maintenance.archival import Archiver
from hudi_sink.services.coordinator.maintenance.cleaning import Cleaner
from hudi_sink.services.coordinator.maintenance.clustering import Clusterer
from hudi_sink.services.coordinator.maintenance.plan import plan_clustering
from hudi_sink.services.coordinator.maintenance.view import TableView, load_view
from hudi_sink.services.coordinator.transaction import TransactionDriver
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.errors import FencedError, HudiSinkError
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.hudi.slices import may_take_slices
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.runtime.metrics import Metrics

__all__ = ["MaintenanceRoutine"]

log = logging.getLogger("hudi_sink.maintenance")

WAKE_CHECK_S = 1.0
INGESTION_WAIT_S = 300.0
"""How long a replacecommit waits for older ingestion instants to finish (then rolled back)."""


class _MaintenanceMetrics:
    def __init__(self, metrics: Metrics) -> None:
        r = metrics.registry
        self.files = Gauge("hudi_sink_table_files",
                           "Live file groups (their latest slices) per table partition",
                           ["partition"], registry=r)
        self.small = Gauge("hudi_sink_table_small_files",
                           "Live base files below maintenance.clustering.small_file_bytes", registry=r)
        self.active = Gauge("hudi_sink_timeline_active_instants",
                            "Completed instants on the active timeline", registry=r)
        self.runs = Counter("hudi_sink_maintenance_runs", "Maintenance actions completed",
                            ["action"], registry=r)
        self.duration = Gauge("hudi_sink_maintenance_last_duration_seconds",
                              "Duration of the last completed action", ["action"], registry=r)
        self.last = Gauge("hudi_sink_maintenance_last_unixtime",
                          "When the last action of a kind completed", ["action"], registry=r)


class MaintenanceRoutine:
    def __init__(self, config: SinkConfig, table: HudiTable, committer: TableCommitter,
                 driver: TransactionDriver, metrics: Metrics) -> None:
        cfg = config.maintenance
        self._cfg = cfg
        self._packing_below = config.table.small_file_bytes
        """Groups the participants may still pack into (``may_take_slices``): never clustered."""
        self._driver = driver
        self._committer = committer
        self._timeline = ReplaceTimeline(table)
        self._clusterer = Clusterer(committer, self._timeline, config.table.parquet_codec)
        self._cleaner = Cleaner(committer, self._timeline, cfg.cleaner.commits_retained)
        self._archiver = Archiver(
            committer, self._timeline, max_instants=cfg.archival.max_instants,
            min_instants=cfg.archival.min_instants,
            commits_retained=cfg.cleaner.commits_retained if cfg.cleaner.enabled else None)
        self._clusterer.before_decision = self._wait_for_older_ingestion
        self._metrics = _MaintenanceMetrics(metrics)
        self._wake = asyncio.Event()
        self.last: dict[str, dict[str, Any]] = {}
        self.last_error: str | None = None
        self.stats: dict[str, Any] = {}

    def request_clustering(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """A pass every ``interval_s``, when asked, or as soon as the active timeline holds
        ``archival.max_instants`` completed instants (checked every second from a listing of
        ``.hoodie`` alone, so the bound holds between passes too)."""
        last_pass = time.monotonic()
        last_count = 0
        while True:
            with contextlib.suppress(TimeoutError):  # not wait_for: see wait_for_kafka
                async with asyncio.timeout(WAKE_CHECK_S):
                    await self._wake.wait()
            forced = self._wake.is_set()
            self._wake.clear()
            if not self._driver.is_leader or self._committer.epoch == 0:
                continue
            count = await asyncio.to_thread(self._active_count)
            due = time.monotonic() - last_pass >= self._cfg.clustering.interval_s
            over = self._cfg.archival.enabled and count >= self._cfg.archival.max_instants
            if not (forced or due or (over and count > last_count)):
                continue
            last_pass, last_count = time.monotonic(), count
            try:
                await self.run_once()
                self.last_error = None
            except FencedError as exc:
                log.warning("maintenance fenced (a newer leader owns the table): %s", exc)
                self.last_error = str(exc)
            except (HudiSinkError, OSError, ValueError) as exc:
                log.exception("maintenance pass failed (retried next interval): %s", exc)
                self.last_error = str(exc)

    def _wait_for_older_ingestion(self, instant: str) -> None:
        epoch = self._committer.epoch
        wait_for_older_ingestion(self._driver, instant, timeout_s=INGESTION_WAIT_S, leading=lambda: (
            self._driver.is_leader and self._committer.epoch == epoch),
            pending=self._timeline.table.pending_instants)

    def _active_count(self) -> int:
        return len(self._timeline.completed())

    def _next_instant(self) -> str:
        """A new instant time above every instant this leader made (event loop only, so
        ingestion and maintenance never pick the same or a decreasing time)."""
        return reserve_instant(self._driver)

    async def run_once(self) -> None:
        epoch = self._committer.epoch  # every decision of this pass is refused once it ends
        await asyncio.to_thread(self._clusterer.recover)
        view = await asyncio.to_thread(load_view, self._timeline)
        self._observe(view)
        clustering = self._cfg.clustering
        if clustering.enabled:
            closed = [f for f in view.live
                      if not may_take_slices(f.path, f.size, self._packing_below)]
            groups = plan_clustering(closed, min_files=clustering.min_files,
                                     small_file_bytes=clustering.small_file_bytes,
                                     target_file_bytes=clustering.target_file_bytes)
            if groups:
                instant = self._next_instant()
                await self._timed("clustering", instant, self._clusterer.run, instant, groups,
                                  self._driver.schemas.current.avro_schema_json(), epoch)
                view = await asyncio.to_thread(load_view, self._timeline)
        if self._cfg.cleaner.enabled:
            record = await asyncio.to_thread(self._cleaner.plan, view, self._next_instant())
            if record is not None:
                await self._timed("clean", record.instant, self._cleaner.run, record, epoch)
                view = await asyncio.to_thread(load_view, self._timeline)
        if self._cfg.archival.enabled:
            targets = await asyncio.to_thread(self._archiver.plan, view)
            if targets:
                instant = self._next_instant()
                await self._timed("archive", instant, self._archiver.run, instant, targets, epoch)
                view = await asyncio.to_thread(load_view, self._timeline)
        self._observe(view)

    async def _timed(self, action: str, instant: str, fn: Any, *args: Any) -> None:
        started = time.monotonic()
        await asyncio.to_thread(fn, *args)
        seconds = time.monotonic() - started
        self.last[action] = {"instant": instant, "duration_s": round(seconds, 3),
                             "finished_at": datetime.now(UTC).isoformat()}
        self._metrics.runs.labels(action).inc()
        self._metrics.duration.labels(action).set(seconds)
        self._metrics.last.labels(action).set(time.time())

    def _observe(self, view: TableView) -> None:
        per_partition = view.files_per_partition()
        for partition, count in per_partition.items():
            self._metrics.files.labels(partition).set(count)
        small = sum(1 for f in view.live if f.size < self._cfg.clustering.small_file_bytes)
        self._metrics.small.set(small)
        self._metrics.active.set(len(view.completed))
        self.stats = {"files_per_partition": per_partition, "small_files": small,
                      "replaced_files_on_disk": len(view.replaced_files),
                      "superseded_files_on_disk": len(view.superseded),
                      "active_completed_instants": len(view.completed),
                      "pending_instants": sorted(view.pending)}
