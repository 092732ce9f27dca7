"""The deleter's scheduled work: the staging sweep and the orphan scan, on one pod at a time.

Intents only cover what someone announced. Two passes catch the rest (issue 9, "no file left
behind"):

- the **staging sweep** (``staging.StagingSweeper``) every ``sweep_interval_s``: files left in
  the staging of finished instants, through the normal decision rules;
- the **reconcile** (orphan scan) every ``deletion.reconcile_interval_s`` (0: never): not a dry
  run, it enqueues ORPHAN intents that are decided like any other, honouring
  ``orphan_min_age_s``.

Who does it: the member of ``<name>-deleter`` that is assigned partition 0 of the deletion
topic. The group already guarantees exactly one owner per partition, so no extra election,
lease or lock is needed, and the role moves with the partition when a pod dies. During a
rebalance two pods may briefly both believe they hold it; that is harmless, because both
passes are idempotent and every delete is decided from the table.

The sweep's timings come from existing settings rather than new keys:
``sweep_interval_s`` is ``reconsume_later_s`` (how long anything not yet deletable waits for
another look) clamped to [1 s, 5 min], and a file must be ``send_delay_s`` old and have been
seen by the sweep that long before — a swept file is treated as if an intent had been sent
for it when the sweep first saw it, so the intents sent when the instant finished go first.
The reconcile's last run is kept in the table (``.hoodie/.sink/deleter/schedule.json``), so
restarting pods neither postpones it forever nor runs it on every start.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson
from aiokafka.errors import KafkaError

from hudi_sink.services.deleter.context import DeleterContext
from hudi_sink.services.deleter.errors import ServiceUnavailable
from hudi_sink.shared.config.settings import DeletionConfig
from hudi_sink.shared.errors import HudiSinkError
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.runtime.lifecycle import periodically
from hudi_sink.shared.storage.fs import FileSystem

__all__ = ["Schedule", "ScheduledWork"]

log = logging.getLogger("hudi_sink.deleter.schedule")

SWEEP_MIN_INTERVAL_S = 1.0
SWEEP_MAX_INTERVAL_S = 300.0
ROLE_CHECK_S = 5.0
"""How soon a pod that is not the scheduler notices it became one (a local check)."""
_WORK_ERRORS = (HudiSinkError, OSError, ValueError, TimeoutError, KafkaError, ServiceUnavailable)
"""What a pass may fail with (storage, table metadata, Kafka); the next tick tries again.
Anything else is a bug and ends the service."""


@dataclass(frozen=True)
class Schedule:
    sweep_interval_s: float
    """Also the tick: how often the pod holding the role looks whether work is due."""
    sweep_min_age_s: float
    reconcile_interval_s: float
    """0: no scheduled reconcile."""
    sweep: bool = True
    """False only in tests about intents, where a sweep would race the intent path."""

    @classmethod
    def from_config(cls, cfg: DeletionConfig) -> Schedule:
        return cls(
            sweep_interval_s=min(SWEEP_MAX_INTERVAL_S, max(SWEEP_MIN_INTERVAL_S, cfg.reconsume_later_s)),
            sweep_min_age_s=cfg.send_delay_s,
            reconcile_interval_s=cfg.reconcile_interval_s,
        )


class _LastReconcile:
    """When the scheduled reconcile last ran, kept in the table (blocking I/O)."""

    def __init__(self, fs: FileSystem, table_path: str) -> None:
        self._fs = fs
        self._path = posixpath.join(table_path, layout.DELETER_SCHEDULE_FILE)

    def load(self) -> float | None:
        try:
            raw = orjson.loads(self._fs.read_bytes(self._path))
        except FileNotFoundError:
            return None
        except orjson.JSONDecodeError:
            log.warning("%s is corrupt; treating the reconcile as never run", self._path)
            return None
        value = raw.get("reconcile_at") if isinstance(raw, dict) else None
        return float(value) if isinstance(value, int | float) else None

    def save(self, at: float) -> None:
        self._fs.write_atomic(self._path, orjson.dumps({"reconcile_at": at}))


class ScheduledWork:
    """Runs the sweep every tick and the reconcile when due, while ``is_scheduler()``."""

    def __init__(
        self,
        schedule: Schedule,
        context: DeleterContext,
        *,
        is_scheduler: Callable[[], bool],
        sweep: Callable[[], Awaitable[object]],
        reconcile: Callable[[], Awaitable[object]],
    ) -> None:
        self.schedule = schedule
        self._is_scheduler = is_scheduler
        self._sweep = sweep
        self._reconcile = reconcile
        self._clock = context.clock
        self._metrics = context.metrics
        self._last = _LastReconcile(context.fs, context.table_path)
        self.active = False
        """Whether this pod held the role at the last tick."""
        self.sweeps = 0
        self.reconciles = 0
        """Passes that completed (failed ones are only logged and counted in metrics)."""

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until ``stop`` is set; a failing pass is logged and retried next tick."""
        try:
            await periodically(stop, self._pass)
        finally:
            if self.active:
                self._set_active(False)

    async def _pass(self) -> float:
        """Check the role, work if it is ours; the seconds until the next look."""
        active = self._is_scheduler()
        if active != self.active:
            self._set_active(active)
        if active:
            await self.tick()
            return self.schedule.sweep_interval_s
        return min(self.schedule.sweep_interval_s, ROLE_CHECK_S)

    def _set_active(self, active: bool) -> None:
        self.active = active
        self._metrics.deleter_scheduler(active)
        log.info("scheduled work (staging sweep, reconcile): %s",
                 "this pod" if active else "not this pod")

    async def tick(self) -> None:
        if self.schedule.sweep and await self._attempt("sweep", self._sweep_once):
            self.sweeps += 1
        if await self._attempt("reconcile", self._reconcile_if_due):
            self.reconciles += 1

    async def _sweep_once(self) -> bool:
        result = await self._sweep()
        log.debug("staging sweep: %s", result)
        return True

    async def _reconcile_if_due(self) -> bool:
        interval = self.schedule.reconcile_interval_s
        if interval <= 0:
            return False
        last = await asyncio.to_thread(self._last.load)
        if last is not None and self._clock() - last < interval:
            return False
        await self._reconcile()
        await asyncio.to_thread(self._last.save, self._clock())
        return True

    async def _attempt(self, task: str, work: Callable[[], Awaitable[bool]]) -> bool:
        """Run one pass; True when it ran and succeeded, False when not due or failed."""
        try:
            ran = await work()
        except _WORK_ERRORS as exc:
            self._metrics.deletion_scheduled_run(task, ok=False)
            log.warning("scheduled %s failed (next try in %g s): %s: %s", task,
                        self.schedule.sweep_interval_s, type(exc).__name__, exc)
            return False
        if ran:
            self._metrics.deletion_scheduled_run(task, ok=True)
        return ran
