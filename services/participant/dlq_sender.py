"""Sends dead letters as they arrive, with bounded memory, and never twice from one process.

Why not hold them until END (as the first version did): a flood of bad records of up to
``errors.max_record_bytes`` each would live in memory for a whole transaction interval and
run the participant out of memory; after the crash the replay would do it again.

Rules:
- ``enqueue`` registers a partition's letters *synchronously*, in the same step that decoded
  them, so a report that starts right after can never miss one; a pump (``run``) hands them
  to the producer. Intake waits (``wait_for_space``) while more than ``budget_bytes`` of
  letters are queued or unacknowledged;
- per source partition the sender remembers which offsets it had acknowledged (pruned below
  the offset a new instant starts at: those are committed). A replay of the same offsets
  (the instant was carried or aborted, or the partition moved away and back to this
  process) does not send them again; an offset whose send failed is sent again. Duplicates
  remain possible only across a crash or a partition move to another process (README);
- before a partition reports, every letter of it must be acknowledged (``wait_acked``); a
  failed send makes the report fail, so a committed offset never hides a lost dead letter;
- a value larger than ``max_value_bytes`` (bigger than a Kafka request may carry) is cut
  there and the letter says so in ``hudi.sink.value.truncated`` (its original size): a
  letter that can never be delivered would otherwise stop its partition for good.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from hudi_sink.services.participant.dead_letters import ConnectContext, DeadLetter
from hudi_sink.shared.errors import HudiSinkError
from hudi_sink.shared.kafka.dlq_headers import HEADER_VALUE_TRUNCATED, truncate_text
from hudi_sink.shared.kafka.partition_key import PartitionKey
from hudi_sink.shared.kafka.sink_topics import not_enough_replicas_hint

__all__ = ["DeadLetterSender", "DeadLetterSendError", "DEFAULT_BUDGET_BYTES", "MAX_VALUE_BYTES"]

log = logging.getLogger("hudi_sink.participant.dlq")

Key = PartitionKey
DEFAULT_BUDGET_BYTES = 64 * 1024 * 1024
MAX_VALUE_BYTES = 8 * 1024 * 1024
"""Below the producer's 16 MiB request limit, with room for key and headers."""
_OVERHEAD = 512


class DeadLetterSendError(HudiSinkError):
    """A dead letter was not acknowledged by the broker; the partition must not report."""


@dataclass
class _PartitionLetters:
    acked: set[int] = field(default_factory=set)
    outstanding: set[int] = field(default_factory=set)
    """Offsets queued or in flight."""
    failure: str | None = None
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while nothing is outstanding."""


class DeadLetterSender:
    def __init__(self, producer: AIOKafkaProducer, topic: str,
                 budget_bytes: int = DEFAULT_BUDGET_BYTES,
                 max_value_bytes: int = MAX_VALUE_BYTES,
                 connect: ConnectContext | None = None,
                 log_letters: Literal["off", "errors", "records"] = "off") -> None:
        self._producer = producer
        self._topic = topic
        self._connect = connect
        """Add Kafka Connect's context headers (``errors.deadletterqueue.context.headers.enable``)."""
        self._log_letters = log_letters
        """Log each new letter (``errors.log.enable``), with its key and value
        (``errors.log.include.messages``: ``records``)."""
        self._budget = budget_bytes
        self._max_value = max_value_bytes
        self._bytes = 0
        self._partitions: dict[Key, _PartitionLetters] = {}
        self._queue: deque[tuple[Key, DeadLetter]] = deque()
        self._queued = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()

    @property
    def inflight_bytes(self) -> int:
        return self._bytes

    def _entry(self, key: Key) -> _PartitionLetters:
        entry = self._partitions.get(key)
        if entry is None:
            entry = self._partitions[key] = _PartitionLetters()
            entry.settled.set()
        return entry

    def already_sent(self, key: Key, offset: int) -> bool:
        """Whether this process already has an acknowledged letter for ``offset``."""
        entry = self._partitions.get(key)
        return entry is not None and offset in entry.acked

    def begin_instant(self, key: Key, start_offset: int) -> None:
        """A new instant starts at ``start_offset``: offsets below it are committed (their
        marks can go), and an older send failure no longer blocks (the replay re-sends)."""
        entry = self._entry(key)
        entry.failure = None
        entry.acked = {offset for offset in entry.acked if offset >= start_offset}

    def enqueue(self, key: Key, letters: Sequence[DeadLetter]) -> int:
        """Register ``letters`` for sending (synchronous); returns how many were new."""
        entry = self._entry(key)
        new = 0
        for letter in letters:
            if letter.offset in entry.acked or letter.offset in entry.outstanding:
                continue
            entry.outstanding.add(letter.offset)
            entry.settled.clear()
            if self._log_letters != "off":
                self._log(letter)
            self._queue.append((key, letter))
            self._bytes += self._size(letter)
            new += 1
        if new:
            self._queued.set()
            if self._bytes >= self._budget:
                self._space.clear()
        return new

    async def wait_for_space(self) -> None:
        """Back-pressure: return once queued and unacknowledged letters fit the budget."""
        await self._space.wait()

    async def run(self) -> None:
        """The pump: hand queued letters to the producer, in order."""
        while True:
            await self._queued.wait()
            while self._queue:
                key, letter = self._queue.popleft()
                await self._send(key, letter)
            self._queued.clear()

    async def _send(self, key: Key, letter: DeadLetter) -> None:
        headers = letter.headers(self._connect)
        value = letter.value
        if value is not None and len(value) > self._max_value:
            headers.append((HEADER_VALUE_TRUNCATED, str(len(value)).encode()))
            value = value[: self._max_value]
        try:
            future = await self._producer.send(self._topic, value=value, key=letter.key,
                                               headers=headers)
        except (KafkaError, OSError, ValueError) as exc:
            self._done(key, letter, exc)
            return
        future.add_done_callback(lambda f: self._done(
            key, letter, None if not f.cancelled() and f.exception() is None
            else (f.exception() if not f.cancelled() else asyncio.CancelledError())))

    def _done(self, key: Key, letter: DeadLetter, error: BaseException | None) -> None:
        entry = self._entry(key)
        entry.outstanding.discard(letter.offset)
        self._bytes -= self._size(letter)
        if error is None:
            entry.acked.add(letter.offset)
        else:
            entry.failure = f"dead letter of offset {letter.offset} not sent: {error!r}"
            hint = not_enough_replicas_hint(error, self._topic)
            if hint is not None:
                entry.failure += f" ({hint})"
            log.error("%s-%d: %s", key[0], key[1], entry.failure)
        if not entry.outstanding:
            entry.settled.set()
        if self._bytes < self._budget:
            self._space.set()

    async def wait_acked(self, key: Key) -> None:
        """Return once every letter of ``key`` is acknowledged; raise if one failed."""
        entry = self._entry(key)
        await entry.settled.wait()
        if entry.failure is not None:
            raise DeadLetterSendError(entry.failure)

    def _log(self, letter: DeadLetter) -> None:
        record = ""
        if self._log_letters == "records":
            record = (f" key={truncate_text(repr(letter.key))}"
                      f" value={truncate_text(repr(letter.value))}")
        log.warning("%s-%d offset %d to %s: %s: %s%s", letter.topic, letter.partition,
                    letter.offset, self._topic, letter.error_class, letter.message, record)

    @staticmethod
    def _size(letter: DeadLetter) -> int:
        return (len(letter.value or b"") + len(letter.key or b"") + _OVERHEAD
                + sum(len(name) + len(value or b"") for name, value in letter.source_headers))


