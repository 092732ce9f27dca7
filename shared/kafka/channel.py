"""Control channel: transport of protocol envelopes over the 1-partition control topic.

Transport only — no protocol decisions. Sends are awaited (acks=all) so a caller knows a
message is durable before it changes state. No Kafka transactions: the Hudi commit is the
source of truth, and the development broker lacks reliable transactions.

With signing keys (``shared.kafka.signing``) every envelope sent is signed and every record
of this sink read is verified: what fails is never handed to the protocol, only counted
(``Metrics.control_rejected``) and logged, rate-limited.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.errors import KafkaError

from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.errors import HudiSinkBug, ProtocolDecodeError
from hudi_sink.shared.kafka.connection import consumer_options
from hudi_sink.shared.kafka.protocol import AnyPayload, Envelope, Sender, decode, encode
from hudi_sink.shared.kafka.signing import ControlKeys, Rejection, RejectionLog, control_keys
from hudi_sink.shared.kafka.sink_topics import not_enough_replicas_hint
from hudi_sink.shared.runtime.faults import Faults
from hudi_sink.shared.runtime.metrics import Metrics

__all__ = ["ControlChannel", "ControlEndpoint", "decode_control_records"]

log = logging.getLogger("hudi_sink.channel")


class ControlEndpoint(Protocol):
    """What services use of a control channel: the Kafka one, or the in-memory one of the
    unit tests (``memory_channel``)."""

    @property
    def sender(self) -> Sender: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def send(self, payload: AnyPayload, *, commit_time: str | None, epoch: int) -> None: ...

    async def receive(self, timeout_ms: int = 100) -> list[Envelope]: ...


def decode_control_records(records: Iterable[ConsumerRecord[Any, Any]], sink: str,
                           keys: ControlKeys | None, rejections: RejectionLog) -> list[Envelope]:
    """Decode the control records of this sink. With ``keys``, one without a valid signature
    by one of them is rejected. Records claiming another sink (sinks may share a control
    topic, each with its own key) are skipped unchecked: nothing here acts on them. Rejected
    and undecodable records are counted and logged (``rejections``), never returned."""
    envelopes: list[Envelope] = []
    for record in records:
        if record.value is None:
            continue
        try:
            envelope = decode(record.value)
        except ProtocolDecodeError as exc:
            rejections.rejected(Rejection.UNDECODABLE, record.offset, str(exc))
            continue
        if envelope.sink != sink:
            continue
        if keys is not None:
            rejection = keys.verify(record.value, record.headers)
            if rejection is not None:
                rejections.rejected(rejection, record.offset, f"{envelope.type} claiming "
                                    f"{envelope.sender.role} epoch {envelope.coordinator_epoch}")
                continue
        envelopes.append(envelope)
    return envelopes


class ControlChannel:
    """Sends envelopes and (optionally) reads the control topic from its current end.

    Readers start at the end: the protocol heals itself (participants re-announce, the
    coordinator re-sends), so history is never needed and never replayed.
    """

    def __init__(
        self,
        config: SinkConfig,
        sender: Sender,
        producer: AIOKafkaProducer,
        *,
        read: bool = True,
        faults: Faults | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """Keys come from ``config`` (a ConfigError names the key at fault); ``metrics``
        counts rejected records."""
        self._config = config
        self._sender = sender
        self._producer = producer
        self._read = read
        self._consumer: AIOKafkaConsumer | None = None
        self._tp = KafkaTopicPartition(config.control_topic, 0)
        self._faults = faults if faults is not None else Faults()
        self._keys = control_keys(config.kafka)
        self._rejections = RejectionLog(
            log, metrics.control_rejected if metrics is not None else None)
        if metrics is not None:
            metrics.control_rejections_exported(reason.value for reason in Rejection)

    @property
    def sender(self) -> Sender:
        return self._sender

    async def start(self) -> None:
        if not self._read:
            return
        self._consumer = AIOKafkaConsumer(**consumer_options(self._config.kafka, None))
        await self._consumer.start()
        self._consumer.assign([self._tp])
        await self._consumer.seek_to_end(self._tp)

    async def close(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None

    async def send(self, payload: AnyPayload, *, commit_time: str | None, epoch: int) -> None:
        if self._faults.should_drop(payload.type.value):
            return
        envelope = Envelope.wrap(
            payload,
            sink=self._config.name,
            sender=self._sender,
            commit_time=commit_time,
            epoch=epoch,
        )
        value = encode(envelope)
        try:
            await self._producer.send_and_wait(
                self._config.control_topic,
                value=value,
                key=self._sender.id.encode(),
                partition=0,
                headers=[self._keys.sign(value)] if self._keys is not None else None,
            )
        except KafkaError as exc:
            hint = not_enough_replicas_hint(exc, self._config.control_topic)
            if hint is not None:  # the caller retries or gives up; the reason is said here
                log.error("%s", hint)
            raise

    async def receive(self, timeout_ms: int = 100) -> list[Envelope]:
        """Envelopes that arrived since the last call (empty after ``timeout_ms``)."""
        if self._consumer is None:
            raise HudiSinkBug("control channel was not started for reading")
        batches = await self._consumer.getmany(self._tp, timeout_ms=timeout_ms, max_records=1000)
        return decode_control_records(batches.get(self._tp, []), self._config.name,
                                      self._keys, self._rejections)
