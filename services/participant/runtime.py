"""What the parts of a running participant share: its clients, its partitions, its metrics,
its background tasks and its clock.

Why one object: the intake loop (:mod:`.intake`), the control handling (:mod:`.control`)
and the reporting (:mod:`.reports`) act on the same partitions through the same clients.
The service builds one frozen :class:`Runtime` once start-up has opened the clients and
hands it to each part, so no part reaches back into the service, none holds a client that
may not exist yet, and tests can drive a part with fakes and a clock of their own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from hudi_sink.services.participant.assignment import PartitionRegistry
from hudi_sink.services.participant.dlq_sender import DeadLetterSender
from hudi_sink.shared.kafka.channel import ControlEndpoint
from hudi_sink.shared.runtime.metrics import Metrics

__all__ = ["ParticipantClients", "BackgroundTasks", "Runtime", "Clock"]

log = logging.getLogger("hudi_sink.participant")

Clock = Callable[[], float]
"""Monotonic seconds (``time.monotonic`` in production)."""


@dataclass(frozen=True)
class ParticipantClients:
    """What start-up opens; the routines take it as an argument."""

    producer: AIOKafkaProducer
    channel: ControlEndpoint
    consumer: AIOKafkaConsumer
    dlq: DeadLetterSender


class BackgroundTasks:
    """Tasks no routine awaits (flushes, reports, announcements, re-sends, offset commits).

    Every one is observed: an exception is logged, never lost silently. The service cancels
    what is left when it stops."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=f"{self._prefix}-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed: %r", task.get_name(), task.exception(),
                      exc_info=task.exception())

    def named(self, name: str) -> list[asyncio.Task[Any]]:
        """The running tasks whose name (as given to ``spawn``) starts with ``name``."""
        return [t for t in list(self._tasks) if t.get_name().startswith(f"{self._prefix}-{name}")]

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()


@dataclass(frozen=True)
class Runtime:
    """Handed to every part of the running participant (see the module docstring)."""

    clients: ParticipantClients
    registry: PartitionRegistry
    """The partitions this member owns (and the ones parked across a rebalance)."""
    metrics: Metrics
    tasks: BackgroundTasks
    clock: Clock
