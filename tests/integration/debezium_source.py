"""The simulated Debezium source (``tests/debezium_changes.py``) sent to a real broker, the way
Kafka Connect's producer sends it: each record keyed by its serialized key, placed by murmur2
(Kafka's default partitioner: librdkafka's ``murmur2_random`` is the same for non-null keys),
in stream order within each partition.

Typical use in the Debezium acceptance test::

    stream = change_stream(2000, seed=42)
    schemas, subjects = registry_contents(pipeline.topic)
    with LocalRegistry(schemas, subjects=subjects) as registry:
        pipeline = Pipeline(..., overrides=sink_overrides(AVRO_JSON_KEYS, registry.url))
        produce_stream(broker.bootstrap, pipeline.topic, stream, AVRO_JSON_KEYS, partitions=4)
        ... wait for the commit of end_offsets(...) ...
        assert_snapshot_equals(pipeline.read(), stream.expected())
"""

from __future__ import annotations

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from debezium_changes import ChangeStream, Flavour, serialize

__all__ = ["create_topic", "produce_stream"]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` with ``partitions`` partitions (an error if it exists)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def produce_stream(bootstrap: str, topic: str, stream: ChangeStream, flavour: Flavour,
                   partitions: int | None = None) -> int:
    """Send ``stream`` serialized as ``flavour`` to ``topic`` (created first with
    ``partitions`` when given); returns the number of records sent. One request in flight, so
    a retried batch cannot overtake the next: each partition holds its keys' events in stream
    order, which is what makes the table equal the source's final state."""
    if partitions is not None:
        create_topic(bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                         "acks": "all", "enable.idempotence": False,
                         "max.in.flight.requests.per.connection": 1, "linger.ms": 5})
    failures: list[str] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(f"{message.key()!r}: {error}")

    messages = serialize(stream, flavour)
    for key, value in messages:
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(1)
        producer.poll(0)
    left = producer.flush(120)
    assert left == 0 and not failures, f"{left} records not delivered; failures: {failures[:5]}"
    return len(messages)
