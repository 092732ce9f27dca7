"""One service shell for every service: start-up, supervision, readiness, shutdown.

A service supplies only what is its own — how to open its clients (``start``, returning a
frozen object its routines take as an argument), its routines, how to close, and its REST
routers. The shell owns the rest, once:

- a run-once guard and a lifecycle that goes through ``ServicePhase``'s transition table;
- ``shutdown()`` that is idempotent and safe before ``run``;
- start-up that SIGTERM can interrupt (an unreachable broker or a cold SparkSession may take
  minutes, a Kubernetes grace period does not);
- ``supervise``: routines run until stop is asked or one of them crashes; a crash is
  re-raised (exit code 1), never swallowed;
- readiness reasons (``/ready`` answers 503 with them) and the admin app's wiring.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, ClassVar, Generic, TypeVar

from fastapi import APIRouter, FastAPI

from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.kafka.connection import TopicAdmin, wait_for_kafka
from hudi_sink.shared.kafka.sink_topics import ensure_sink_topics
from hudi_sink.shared.runtime.admin import create_admin_app
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.runtime.retry import retrying
from hudi_sink.shared.runtime.states import SERVICE_TRANSITIONS, ServicePhase, StateMachine
from hudi_sink.shared.storage.backend import check_exclusive_create, filesystem_for, is_object_store

__all__ = [
    "ServiceShell", "supervise", "run_unless_stopped", "unless_stopped", "kafka_prelude", "periodically",
]

log = logging.getLogger("hudi_sink.lifecycle")

T = TypeVar("T")
R = TypeVar("R")
"""What ``start`` returns: the service's opened clients, handed to its routines."""

CANCEL_GRACE_S = 1.0
"""How long a shutdown step cancelled at the end of the budget may take to unwind."""


async def run_unless_stopped(stop: asyncio.Event, work: Awaitable[T]) -> T | None:
    """``work``'s result, or None when ``stop`` was set first (``work`` is then cancelled)."""
    _, result = await _race_stop(stop, work)
    return result


async def unless_stopped(stop: asyncio.Event, work: Awaitable[Any]) -> bool:
    """Whether ``work`` completed before ``stop`` was set (it is cancelled otherwise)."""
    completed, _ = await _race_stop(stop, work)
    return completed


async def _race_stop(stop: asyncio.Event, work: Awaitable[T]) -> tuple[bool, T | None]:
    """Start-up may wait a long time (an unreachable broker, a cold SparkSession): SIGTERM
    must still stop the service within a Kubernetes grace period."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait([task, stopper], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return False, None
    return True, task.result()


async def periodically(stop: asyncio.Event, step: Callable[[], Awaitable[float]]) -> None:
    """A periodic routine: run ``step`` until ``stop`` is set, waiting the seconds it returns
    before the next run; a stop ends the wait at once. A step's exception ends the routine."""
    while not stop.is_set():
        wait = await step()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), wait)


async def supervise(
    stop: asyncio.Event,
    routines: Mapping[str, Coroutine[Any, Any, Any]],
    *,
    on_stop: Callable[[list[asyncio.Task[Any]]], Awaitable[None]] | None = None,
) -> None:
    """Run ``routines`` until ``stop`` is set or one of them ends; re-raise a crash.

    ``on_stop`` may let routines finish the work in hand (e.g. a deleter's batch) before
    the rest is cancelled."""
    tasks = [asyncio.create_task(coro, name=name) for name, coro in routines.items()]
    stopper = asyncio.create_task(stop.wait(), name="stop")
    try:
        done, _ = await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task in done and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        if stopper in done and on_stop is not None:
            await on_stop(tasks)
    finally:
        stopper.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def kafka_prelude(
    config: SinkConfig, set_not_ready: Callable[[str], None], *, data_topics: bool
) -> None:
    """What every service does first: reach Kafka (retried for ``startup_timeout_s``, with
    readiness reasons), create the sink's own topics, and (``data_topics``) wait for the
    data topics to exist."""
    set_not_ready(f"connecting to Kafka at {config.kafka.bootstrap_servers}")
    await wait_for_kafka(config.kafka, on_attempt=set_not_ready)
    set_not_ready("creating topics")
    async for attempt in retrying(config.service, "creating the sink's topics"):  # a broker
        with attempt:  # may refuse while its controller moves: retried, not fatal at start
            await ensure_sink_topics(config)
    if data_topics:
        async with TopicAdmin(config.kafka) as admin:
            await admin.wait_for_topics(config.kafka.topics, config.kafka.startup_timeout_s,
                                        set_not_ready)


class ServiceShell(abc.ABC, Generic[R]):
    """Base of the three services (see the module docstring)."""

    name: ClassVar[str]

    def __init__(self, config: SinkConfig) -> None:
        self.config = config
        self.metrics = Metrics(self.name)
        self.lifecycle: StateMachine[ServicePhase] = StateMachine(
            self.name, ServicePhase.CREATED, SERVICE_TRANSITIONS)
        self._stop = asyncio.Event()
        self._not_ready: list[str] = ["starting"]
        self._shutdown_deadline: float | None = None

    # --- what each service supplies ---------------------------------------------------------
    @abc.abstractmethod
    async def start(self) -> R:
        """Open clients (after ``kafka_prelude``); return them for the routines."""

    @abc.abstractmethod
    def routines(self, running: R) -> dict[str, Coroutine[Any, Any, Any]]:
        """The long-running coroutines, by name."""

    @abc.abstractmethod
    async def close(self, running: R | None) -> None:
        """Leave groups, close clients (``running`` is None when start-up was cut short)."""

    @abc.abstractmethod
    def routers(self) -> list[APIRouter]:
        """The service's own REST routes."""

    async def on_stop(self, routines: list[asyncio.Task[Any]]) -> None:
        """Called when stop is asked, before routines are cancelled (default: nothing)."""

    def running_readiness(self) -> list[str]:
        """Reasons not to be ready once started (default: none)."""
        return []

    # --- the shell ------------------------------------------------------------------------------
    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def shutdown(self) -> None:
        """Ask the service to stop; idempotent and safe before ``run``."""
        self._stop.set()

    def set_not_ready(self, reason: str) -> None:
        self._not_ready = [reason]

    def readiness(self) -> list[str]:
        if self._not_ready:
            return list(self._not_ready)
        return self.running_readiness()

    async def run(self) -> None:
        """Start, run the routines until stop or crash, close. Once per instance."""
        self.lifecycle.transition_to(ServicePhase.STARTING, "run")
        running: R | None = None
        try:
            running = await run_unless_stopped(self._stop, self._checked_start())
            if running is None:
                return
            self._not_ready = []
            self.lifecycle.transition_to(ServicePhase.RUNNING, "started")
            await supervise(self._stop, self.routines(running), on_stop=self._bounded_on_stop)
        finally:
            self.lifecycle.transition_to(ServicePhase.STOPPING, "stop")
            self._not_ready = ["stopping"]
            await self._within_shutdown_timeout("closing clients", self.close(running))
            self.lifecycle.transition_to(ServicePhase.STOPPED, "closed")

    async def _checked_start(self) -> R:
        """The table's store must fence (an object store's create-only PUT) before anything
        else: a service on a store that ignores ``If-None-Match`` exits 2 at once."""
        table = self.config.table
        if is_object_store(table.base_path):
            self.set_not_ready("probing the table's object store for conditional writes")
            fs = filesystem_for(table.base_path, table.storage_options)
            await asyncio.to_thread(check_exclusive_create, fs, table.base_path)
        return await self.start()

    async def _bounded_on_stop(self, routines: list[asyncio.Task[Any]]) -> None:
        await self._within_shutdown_timeout("finishing work in hand", self.on_stop(routines))

    async def _within_shutdown_timeout(self, step: str, work: Awaitable[None]) -> None:
        """Graceful shutdown, all steps together, takes at most ``service.shutdown_timeout_ms``
        from the first step on; a step still running then is cancelled (logged), so the process
        exits inside its grace period instead of being killed mid-way."""
        loop = asyncio.get_running_loop()
        if self._shutdown_deadline is None:
            self._shutdown_deadline = loop.time() + self.config.service.shutdown_timeout_ms / 1000
        task = asyncio.ensure_future(work)
        try:
            await asyncio.wait([task], timeout=max(0.0, self._shutdown_deadline - loop.time()))
        finally:
            task.cancel()  # a no-op once done; cancels the step when the budget is spent
        if task.done():
            task.result()
            return
        log.warning("%s: %s did not finish within service.shutdown_timeout_ms (%d ms); "
                    "cancelled", self.name, step, self.config.service.shutdown_timeout_ms)
        # Not ``wait_for``: it waits for the cancelled step without a bound, and a step may
        # swallow its cancellation (aiokafka's ``Fetcher.close`` suppresses CancelledError
        # around its own task, so a consumer's ``stop`` goes on closing). Such a step gets a
        # moment to unwind, then is left behind; the exit watchdog bounds the rest.
        await asyncio.wait([task], timeout=CANCEL_GRACE_S)
        if not task.done():
            log.warning("%s: %s ignored its cancellation; left behind", self.name, step)
        elif not task.cancelled() and task.exception() is not None:
            log.warning("%s: %s failed once cancelled: %r", self.name, step, task.exception())

    def admin_app(self) -> FastAPI:
        return create_admin_app(
            self.name,
            readiness=self.readiness,
            metrics=self.metrics,
            token=self.config.admin.token,
            allow_unauthenticated=self.config.admin.allow_unauthenticated,
            bind_host=self.config.admin.host,
            routers=self.routers(),
        )
