"""The bench's load generator: records at a fixed rate, sent by librdkafka (confluent-kafka).

Why not aiokafka, the client the sink itself uses: the load generator shares the machine with
the sink it measures, and aiokafka's producer does Python work per record. Sending 10,000
records/s of 1 KB to the embedded broker for 15 s, the sending process used 0.49 of this
machine's two cores with aiokafka and 0.13 with librdkafka (the records' JSON encoding
included in both). That third of a core went from the sink under test to the harness; in a
deployment the producers run elsewhere. The sink's own clients are not affected.

A message with a key and no partition goes where Kafka's Java client puts it: librdkafka's
``murmur2_random`` partitioner (murmur2 of the key, random only for a null key), not its
default ``consistent_random`` (CRC32). Upsert mode refuses a key outside its murmur2 partition.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["BENCH_EXTRA", "Delivered", "Message", "send_paced"]

Message = tuple[bytes | None, bytes, int | None]
"""A record to send: (message key, value, partition; None: the default partitioner's choice)."""

BENCH_EXTRA = "pip install 'hudi-sink[bench]' (the dev extra includes it)"

TICK_S = 0.05
"""Records go out in small bursts this often, so the rate is even at the scale of an interval."""
UNASSIGNED = -1
"""librdkafka's RD_KAFKA_PARTITION_UA: the partitioner chooses."""
FLUSH_TIMEOUT_S = 120.0
"""How long the last records may take to be acknowledged."""


@dataclass(frozen=True)
class Delivered:
    """What the broker acknowledged, in acknowledgement order, and how long sending took."""

    records: list[tuple[int, int, float]]
    """(partition, offset, Kafka timestamp in seconds) of every record sent."""
    seconds: float
    """From the first burst to the last (the final acknowledgements not included)."""


def send_paced(bootstrap: str, topic: str, rps: int, seconds: float,
               message: Callable[[int], Message], client_id: str,
               flush_timeout_s: float = FLUSH_TIMEOUT_S) -> Delivered:
    """Send ``message(n)`` for n = 0, 1, … at ``rps`` a second for ``seconds`` (blocking: run
    it in a worker thread). Bursts are paced against the clock: a late burst sends what it
    owes, never more. Each record carries its own send time as its Kafka timestamp.

    Raises RuntimeError when a record was not acknowledged: a latency measured over records
    that never arrived would be wrong, not merely incomplete."""
    try:
        from confluent_kafka import Producer
    except ImportError as exc:
        raise RuntimeError(f"the bench's load generator needs confluent-kafka: {BENCH_EXTRA}") from exc

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "all",
                         "enable.idempotence": False, "linger.ms": 5,
                         "partitioner": "murmur2_random"})
    delivered: list[tuple[int, int, float]] = []
    failures: list[str] = []

    def report(error: Any, record: Any) -> None:
        if error is not None:
            failures.append(str(error))
        else:
            delivered.append((record.partition(), record.offset(), record.timestamp()[1] / 1000))

    sent = 0
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        for _ in range(max(0, int(elapsed * rps) - sent)):
            key, value, partition = message(sent)
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=report,
                                     partition=UNASSIGNED if partition is None else partition,
                                     timestamp=int(time.time() * 1000))
                    break
                except BufferError:  # librdkafka's local queue is full: let it drain
                    producer.poll(TICK_S)
            sent += 1
        producer.poll(0)  # serve delivery reports
        time.sleep(TICK_S)  # pacing a load generator, not waiting for a state
    sending = time.monotonic() - started
    left = producer.flush(flush_timeout_s)
    if left or failures:
        why = failures[0] if failures else f"not acknowledged within {flush_timeout_s:g} s"
        raise RuntimeError(f"load generator: {left + len(failures)} of {sent} records to {topic} "
                           f"not delivered ({why})")
    return Delivered(delivered, sending)
