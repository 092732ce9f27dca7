"""DeadLetterSender: letters registered synchronously, bounded bytes, one send per offset per
process, failed sends re-sent and blocking the report, oversized values cut. The producer is a
stand-in whose acks the test controls (pure sending logic)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka.errors import MessageSizeTooLargeError

from hudi_sink.services.participant.dead_letters import DeadLetter
from hudi_sink.services.participant.dlq_sender import DeadLetterSender, DeadLetterSendError
from hudi_sink.shared.kafka.dlq_headers import HEADER_VALUE_TRUNCATED

KEY = ("orders", 0)


def letter(offset: int, size: int = 100) -> DeadLetter:
    return DeadLetter(topic="orders", partition=0, offset=offset, timestamp_ms=0, key=b"k",
                      value=b"x" * size, error_class="DecodeError", message="bad")


class AckingProducer:
    """Hands out futures the test resolves (or fails) explicitly."""

    def __init__(self, refuse_over: int | None = None) -> None:
        self.sent: list[tuple[dict[str, bytes], int]] = []
        self.futures: list[asyncio.Future[object]] = []
        self.refuse_over = refuse_over

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   headers: Any = None) -> asyncio.Future[object]:
        if self.refuse_over is not None and len(value or b"") > self.refuse_over:
            raise MessageSizeTooLargeError()
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self.sent.append((dict(headers or []), len(value or b"")))
        self.futures.append(future)
        return future

    def ack_all(self) -> None:
        for future in self.futures:
            if not future.done():
                future.set_result(object())

    def offsets(self) -> list[int]:
        return [int(h["hudi.sink.source.offset"]) for h, _ in self.sent]


async def settle(producer: AckingProducer, sender: DeadLetterSender) -> None:
    for _ in range(20):
        await asyncio.sleep(0)
        producer.ack_all()
    await asyncio.wait_for(sender.wait_acked(KEY), 5)


@pytest.fixture
async def pumped() -> AsyncIterator[tuple[AckingProducer, DeadLetterSender]]:
    producer = AckingProducer(refuse_over=1000)
    sender = DeadLetterSender(producer, "dlq", budget_bytes=4_000, max_value_bytes=900)  # type: ignore[arg-type]
    pump = asyncio.create_task(sender.run())
    try:
        yield producer, sender
    finally:
        pump.cancel()


async def test_letters_are_sent_once_per_offset_by_one_process(pumped: Any) -> None:
    producer, sender = pumped
    assert sender.enqueue(KEY, [letter(1), letter(5)]) == 2
    await settle(producer, sender)
    assert sender.already_sent(KEY, 5) and not sender.already_sent(KEY, 6)
    sender.begin_instant(KEY, 0)  # replayed (carried or aborted): same offsets decoded again
    assert sender.enqueue(KEY, [letter(1), letter(5), letter(9)]) == 1
    await settle(producer, sender)
    assert producer.offsets() == [1, 5, 9]


async def test_a_report_waits_for_letters_registered_before_it(pumped: Any) -> None:
    producer, sender = pumped
    sender.enqueue(KEY, [letter(3)])  # not yet handed to the producer
    waiter = asyncio.create_task(sender.wait_acked(KEY))
    for _ in range(10):
        await asyncio.sleep(0)
    assert not waiter.done()
    producer.ack_all()
    await asyncio.wait_for(waiter, 5)


async def test_a_failed_send_blocks_the_report_and_is_sent_again(pumped: Any) -> None:
    producer, sender = pumped
    sender.enqueue(KEY, [letter(10), letter(20)])
    for _ in range(10):
        await asyncio.sleep(0)
    producer.futures[0].set_exception(OSError("broker gone"))
    sender.enqueue(KEY, [letter(30)])  # still in flight when the instant ends
    for _ in range(10):
        await asyncio.sleep(0)
    waiter = asyncio.create_task(sender.wait_acked(KEY))
    producer.futures[1].set_result(object())
    for _ in range(10):
        await asyncio.sleep(0)
    assert not waiter.done()  # 30 is still in flight
    producer.futures[2].set_result(object())
    with pytest.raises(DeadLetterSendError, match="offset 10"):
        await asyncio.wait_for(waiter, 5)
    sender.begin_instant(KEY, 0)
    # The replay must send 10 again even though a later offset (30) is acknowledged.
    assert sender.enqueue(KEY, [letter(10), letter(20), letter(30)]) == 1
    await settle(producer, sender)
    assert sorted(producer.offsets()) == [10, 10, 20, 30]


async def test_intake_waits_while_the_budget_is_used_up(pumped: Any) -> None:
    producer, sender = pumped
    sender.enqueue(KEY, [letter(i, size=800) for i in range(10)])
    space = asyncio.create_task(sender.wait_for_space())
    for _ in range(10):
        await asyncio.sleep(0)
    assert not space.done()
    await settle(producer, sender)
    await asyncio.wait_for(space, 5)
    assert sender.inflight_bytes == 0


async def test_an_oversized_value_is_cut_and_marked(pumped: Any) -> None:
    producer, sender = pumped
    sender.enqueue(KEY, [letter(1, size=5_000)])
    await settle(producer, sender)
    headers, length = producer.sent[0]
    assert length == 900 and headers[HEADER_VALUE_TRUNCATED] == b"5000"


async def test_a_send_the_producer_refuses_fails_the_report_instead_of_the_process() -> None:
    producer = AckingProducer(refuse_over=10)
    sender = DeadLetterSender(producer, "dlq")  # type: ignore[arg-type]
    pump = asyncio.create_task(sender.run())
    try:
        sender.enqueue(KEY, [letter(1, size=100)])
        with pytest.raises(DeadLetterSendError, match="offset 1"):
            await asyncio.wait_for(sender.wait_acked(KEY), 5)
        assert not pump.done()
    finally:
        pump.cancel()
