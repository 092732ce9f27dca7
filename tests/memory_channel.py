"""An in-memory control topic for tests: the protocol without a broker.

``MemoryControlBus`` is one ordered log of envelopes (like the 1-partition control topic);
each ``endpoint`` reads it from where it joined, as ``ControlChannel`` reads from the end.
Services take an endpoint wherever they take a ``ControlChannel``, so their protocol
handling (partial commits, timeouts, healing) can be driven in milliseconds; the
subprocess tests stay for what only processes can prove.
"""

from __future__ import annotations

import asyncio
import contextlib

from hudi_sink.shared.kafka.protocol import AnyPayload, Envelope, Sender
from hudi_sink.shared.runtime.faults import Faults

__all__ = ["MemoryControlBus", "MemoryChannel"]


class MemoryControlBus:
    def __init__(self, sink: str) -> None:
        self.sink = sink
        self.log: list[Envelope] = []
        self._grew = asyncio.Condition()

    def endpoint(self, sender: Sender, faults: Faults | None = None) -> MemoryChannel:
        return MemoryChannel(self, sender, faults if faults is not None else Faults(""))

    async def append(self, envelope: Envelope) -> None:
        async with self._grew:
            self.log.append(envelope)
            self._grew.notify_all()

    async def wait_beyond(self, position: int, timeout_s: float) -> None:
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
        # arrives just as the condition comes true, and the waiting task then never stops.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s), self._grew:
                await self._grew.wait_for(lambda: len(self.log) > position)


class MemoryChannel:
    """Same calls as ``ControlChannel``: ``start``, ``send``, ``receive``, ``close``."""

    def __init__(self, bus: MemoryControlBus, sender: Sender, faults: Faults) -> None:
        self._bus = bus
        self._sender = sender
        self._faults = faults
        self._position = len(bus.log)

    @property
    def sender(self) -> Sender:
        return self._sender

    async def start(self) -> None:
        self._position = len(self._bus.log)

    async def close(self) -> None:
        return None

    async def send(self, payload: AnyPayload, *, commit_time: str | None, epoch: int) -> None:
        if self._faults.should_drop(payload.type.value):
            return
        await self._bus.append(Envelope.wrap(payload, sink=self._bus.sink, sender=self._sender,
                                             commit_time=commit_time, epoch=epoch))

    async def receive(self, timeout_ms: int = 100) -> list[Envelope]:
        await self._bus.wait_beyond(self._position, timeout_ms / 1000)
        fresh = self._bus.log[self._position:]
        self._position = len(self._bus.log)
        return fresh
