"""Opens and closes the Kafka clients of a service — injectable, so tests can swap them.

The services ask this factory for clients instead of constructing aiokafka objects inside
their start-up code (the Iceberg sink's ``KafkaClientFactory`` idea): a unit test passes a
factory whose channel is in memory, and the service code does not change.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.kafka.channel import ControlChannel
from hudi_sink.shared.kafka.connection import TopicAdmin, consumer_options, producer_options
from hudi_sink.shared.kafka.protocol import Sender
from hudi_sink.shared.runtime.faults import Faults
from hudi_sink.shared.runtime.metrics import Metrics

__all__ = ["KafkaClientFactory"]

log = logging.getLogger("hudi_sink.clients")


class KafkaClientFactory:
    """Started clients for one sink configuration."""

    def __init__(self, config: SinkConfig) -> None:
        self.config = config

    async def producer(self, client_id: str) -> AIOKafkaProducer:
        producer = AIOKafkaProducer(**producer_options(self.config.kafka, client_id))
        await producer.start()
        return producer

    async def consumer(self, group: str | None, client_id: str | None = None) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(**consumer_options(self.config.kafka, group, client_id))
        await consumer.start()
        return consumer

    async def channel(self, sender: Sender, producer: AIOKafkaProducer, faults: Faults,
                      metrics: Metrics, *, read: bool = True) -> ControlChannel:
        channel = ControlChannel(self.config, sender, producer, read=read, faults=faults,
                                 metrics=metrics)
        await channel.start()
        return channel

    async def admin(self, client_id: str) -> TopicAdmin:
        admin = TopicAdmin(self.config.kafka, client_id=client_id)
        await admin.__aenter__()
        return admin

    async def close(self, *clients: Any) -> None:
        """Close clients in the order given (consumers first: leaving the group hands their
        partitions over at once); a failure to close one never keeps the others open."""
        for client in clients:
            if client is None:
                continue
            with contextlib.suppress(Exception):
                if isinstance(client, TopicAdmin):
                    await client.__aexit__(None, None, None)
                elif isinstance(client, ControlChannel):
                    await client.close()
                else:
                    await client.stop()
