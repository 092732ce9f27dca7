"""Kafka topics of the Avro tests, through the real broker: values sent to chosen partitions
(the topic created first), and every record of a topic read back (the dead-letter topic)."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

__all__ = ["produce_by_partition", "read_topic"]


def produce_by_partition(bootstrap: str, topic: str, values: dict[int, list[bytes]],
                         create: bool) -> list[int]:
    """Send ``values`` by partition (creating the topic first); their broker timestamps."""
    async def send() -> list[int]:
        if create:
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await admin.start()
            try:
                await admin.create_topics([NewTopic(topic, len(values), 1)])
            finally:
                await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            sent = [await producer.send(topic, value, key=f"k{n}".encode(), partition=partition)
                    for partition, batch in values.items() for n, value in enumerate(batch)]
            return [(await future).timestamp for future in sent]
        finally:
            await producer.stop()

    return asyncio.run(send())


def read_topic(bootstrap: str, topic: str) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record of ``topic`` (read until it stays idle for 3 s)."""
    async def read() -> list[ConsumerRecord[bytes, bytes]]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False)  # no group: every partition
        await consumer.start()
        try:
            found: list[ConsumerRecord[bytes, bytes]] = []
            idle = 0
            while idle < 3:
                batches = await consumer.getmany(timeout_ms=1000)
                got = [record for records in batches.values() for record in records]
                found += got
                idle = 0 if got else idle + 1
            return found
        finally:
            await consumer.stop()

    return asyncio.run(read())
