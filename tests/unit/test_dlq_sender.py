"""DeadLetterSender: bounded in-flight bytes, one send per offset per process, failures block
the report. The producer is a stand-in whose acks the test controls (pure sending logic)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.participant.dead_letters import DeadLetter
from services.participant.dlq_sender import DeadLetterSender, DeadLetterSendError

KEY = ("orders", 0)


def letter(offset: int, size: int = 100) -> DeadLetter:
    return DeadLetter(topic="orders", partition=0, offset=offset, timestamp_ms=0, key=b"k",
                      value=b"x" * size, error_class="DecodeError", message="bad")


class AckingProducer:
    """Hands out futures the test resolves (or fails) explicitly."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.futures: list[asyncio.Future[object]] = []

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   headers: Any = None) -> asyncio.Future[object]:
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self.sent.append((topic, dict(headers or [])))
        self.futures.append(future)
        return future

    def ack_all(self) -> None:
        for future in self.futures:
            if not future.done():
                future.set_result(object())


def offsets_sent(producer: AckingProducer) -> list[int]:
    return [int(h["hudi.sink.source.offset"]) for _, h in producer.sent]




async def test_letters_are_sent_once_per_offset_by_one_process() -> None:
    producer = AckingProducer()
    sender = DeadLetterSender(producer, "dlq")  # type: ignore[arg-type]
    assert await sender.send(KEY, [letter(1), letter(5)]) == 2
    producer.ack_all()
    await sender.wait_acked(KEY)
    assert sender.already_sent(KEY, 5) and not sender.already_sent(KEY, 6)
    # The instant is replayed (carried or aborted): the same offsets are decoded again.
    sender.begin_instant(KEY)
    assert await sender.send(KEY, [letter(1), letter(5), letter(9)]) == 1
    producer.ack_all()
    await sender.wait_acked(KEY)
    assert offsets_sent(producer) == [1, 5, 9]


async def test_letters_still_in_flight_are_not_sent_again() -> None:
    producer = AckingProducer()
    sender = DeadLetterSender(producer, "dlq")  # type: ignore[arg-type]
    await sender.send(KEY, [letter(1), letter(2)])
    assert await sender.send(KEY, [letter(1), letter(2)]) == 0
    producer.ack_all()
    await sender.wait_acked(KEY)
    assert offsets_sent(producer) == [1, 2]


async def test_a_failed_send_blocks_the_report_and_is_sent_again_next_instant() -> None:
    producer = AckingProducer()
    sender = DeadLetterSender(producer, "dlq")  # type: ignore[arg-type]
    await sender.send(KEY, [letter(1), letter(2)])
    producer.futures[0].set_exception(OSError("broker gone"))
    producer.futures[1].set_result(object())
    with pytest.raises(DeadLetterSendError, match="offset 1"):
        await sender.wait_acked(KEY)
    assert not sender.already_sent(KEY, 1)
    sender.begin_instant(KEY)
    await sender.send(KEY, [letter(1), letter(2)])
    producer.ack_all()
    await sender.wait_acked(KEY)
    assert sender.already_sent(KEY, 2)
    assert offsets_sent(producer) == [1, 2, 1, 2]


async def test_intake_waits_while_the_in_flight_budget_is_used_up() -> None:
    producer = AckingProducer()
    sender = DeadLetterSender(producer, "dlq", budget_bytes=2_000)  # type: ignore[arg-type]
    task = asyncio.create_task(sender.send(KEY, [letter(i, size=900) for i in range(10)]))
    for _ in range(50):
        await asyncio.sleep(0)
    assert not task.done()
    assert len(producer.sent) <= 2  # at most the budget's worth is unacknowledged
    assert sender.inflight_bytes <= 2_000 + 1_500
    while not task.done():
        producer.ack_all()
        await asyncio.sleep(0)
    assert await task == 10
    producer.ack_all()
    await sender.wait_acked(KEY)
    assert sender.inflight_bytes == 0
