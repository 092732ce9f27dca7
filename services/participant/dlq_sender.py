"""Sends dead letters as they arrive, with bounded memory, and never twice from one process.

Why not hold them until END (as the first version did): a flood of bad records of up to
``errors.max_record_bytes`` each would live in memory for a whole transaction interval and
run the participant out of memory; after the crash the replay would do it again.

Rules:
- a letter is handed to the producer as soon as the record is decoded; intake waits
  (back-pressure) while more than ``budget_bytes`` of letters are unacknowledged;
- per source partition the sender keeps the highest offset up to which every letter this
  process sent was acknowledged by the broker. A replay of the same offsets (the instant
  was carried or aborted, or the partition moved away and back to this process) sends
  nothing below that mark again. Duplicates therefore remain possible only across a crash
  or a partition move to another process, which the README states;
- before a partition reports its status, every letter of it must be acknowledged
  (``wait_acked``); a failed send makes the report fail, so a committed offset never hides
  a lost dead letter.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from aiokafka import AIOKafkaProducer

from services.participant.dead_letters import DeadLetter
from shared.errors import HudiSinkError

__all__ = ["DeadLetterSender", "DeadLetterSendError", "DEFAULT_BUDGET_BYTES"]

log = logging.getLogger("hudi_sink.participant.dlq")

Key = tuple[str, int]
DEFAULT_BUDGET_BYTES = 64 * 1024 * 1024


class DeadLetterSendError(HudiSinkError):
    """A dead letter was not acknowledged by the broker; the partition must not report."""


@dataclass
class _InFlight:
    offset: int
    size: int
    future: asyncio.Future[object]


@dataclass
class _PartitionLetters:
    acked_through: int = -1
    """Every letter of this process with an offset <= this was acknowledged."""
    pending: deque[_InFlight] = field(default_factory=deque)
    failure: str | None = None


class DeadLetterSender:
    def __init__(self, producer: AIOKafkaProducer, topic: str,
                 budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        self._producer = producer
        self._topic = topic
        self._budget = budget_bytes
        self._inflight_bytes = 0
        self._partitions: dict[Key, _PartitionLetters] = {}
        self._space = asyncio.Event()
        self._space.set()

    @property
    def inflight_bytes(self) -> int:
        return self._inflight_bytes

    def _entry(self, key: Key) -> _PartitionLetters:
        entry = self._partitions.get(key)
        if entry is None:
            entry = self._partitions[key] = _PartitionLetters()
        return entry

    def already_sent(self, key: Key, offset: int) -> bool:
        """Whether this process already has an acknowledged letter for ``offset``."""
        entry = self._partitions.get(key)
        return entry is not None and offset <= entry.acked_through

    def begin_instant(self, key: Key) -> None:
        """A new instant starts for ``key``: an older send failure no longer blocks it
        (its letters were not acknowledged, so the replay sends them again)."""
        entry = self._entry(key)
        entry.failure = None

    async def send(self, key: Key, letters: Sequence[DeadLetter]) -> int:
        """Hand ``letters`` (in offset order) to the producer; returns how many were new.

        Waits while the in-flight budget is used up, so memory stays bounded."""
        entry = self._entry(key)
        sent = 0
        for letter in letters:
            if letter.offset <= entry.acked_through or (
                entry.pending and letter.offset <= entry.pending[-1].offset
            ):
                continue  # sent by this process already (acknowledged or on its way)
            while self._inflight_bytes >= self._budget:
                self._space.clear()
                await self._space.wait()
            size = len(letter.value or b"") + len(letter.key or b"") + 512
            future = await self._producer.send(
                self._topic, value=letter.value, key=letter.key, headers=letter.headers()
            )
            flight = _InFlight(letter.offset, size, future)
            entry.pending.append(flight)
            self._inflight_bytes += size
            future.add_done_callback(lambda _f, k=key: self._settle(k))
            sent += 1
        return sent

    def _settle(self, key: Key) -> None:
        """Advance the acknowledged mark over finished sends, in offset order."""
        entry = self._partitions[key]
        while entry.pending and entry.pending[0].future.done():
            flight = entry.pending.popleft()
            self._inflight_bytes -= flight.size
            exc = flight.future.exception() if not flight.future.cancelled() else None
            if flight.future.cancelled() or exc is not None:
                entry.failure = f"dead letter of offset {flight.offset} not sent: {exc!r}"
                log.error("%s-%d: %s", key[0], key[1], entry.failure)
                # Everything after it is unconfirmed for the mark: drop the rest's claim.
                for rest in entry.pending:
                    self._inflight_bytes -= rest.size
                entry.pending.clear()
                break
            if entry.failure is None:
                entry.acked_through = max(entry.acked_through, flight.offset)
        if self._inflight_bytes < self._budget:
            self._space.set()

    async def wait_acked(self, key: Key) -> None:
        """Return once every letter of ``key`` is acknowledged; raise if one failed."""
        entry = self._entry(key)
        if entry.pending:
            await asyncio.gather(*(f.future for f in list(entry.pending)), return_exceptions=True)
            self._settle(key)
        if entry.failure is not None:
            raise DeadLetterSendError(entry.failure)
