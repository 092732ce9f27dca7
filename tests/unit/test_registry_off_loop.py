"""Registry lookups never run on the participant's event loop.

Records are decoded on the loop (the intake's ``accept``). A writer schema not cached yet was
fetched right there, with blocking ``urllib``: a registry dropping connections cost the
timeout per deferred partition on every retry, a reply that trickles cost as long as it
trickled, and meanwhile the loop sent no heartbeat (the group evicts such a consumer). Now
the fetch runs in a worker thread (``BackgroundSchemas``): the record is ``Deferred`` while it
runs, and its partition resumes as soon as the fetch settles. Real registries on sockets (one
trickling, one held until the test lets it answer); "the loop was blocked" is asyncio's own
measure: in debug mode it logs every step of the loop that took longer than
``slow_callback_duration``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import TopicPartition as KafkaTopicPartition
from eventually import eventually, eventually_async
from kafka_records import Rec
from manual_clock import ManualClock
from registry_app import LocalRegistry, RawServer, Step, confluent_avro

from hudi_sink.services.participant.assignment import PartitionRegistry
from hudi_sink.services.participant.avro_format import AvroValues
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.dlq_sender import DeadLetterSender
from hudi_sink.services.participant.intake import Intake
from hudi_sink.services.participant.runtime import BackgroundTasks, ParticipantClients, Runtime
from hudi_sink.services.participant.schema_fetches import MAX_FETCHES, BackgroundSchemas, SchemaPending
from hudi_sink.services.participant.service import ParticipantService
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.shared.config.sections import AvroConfig
from hudi_sink.shared.config.settings import TableConfig, config_from_mapping
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.schema.registry import RegistrySchemas, RegistryUnavailable, UnknownSchemaId

SCHEMA: dict[str, Any] = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
KTP = KafkaTopicPartition("t", 0)
RECORDS = [Rec(i, confluent_avro(1, SCHEMA, {"id": f"o-{i}"})) for i in range(3)]
SLOW_S = 0.5
"""A step of the event loop longer than this counts as blocking it."""


def _answer(schema: dict[str, Any]) -> bytes:
    body = json.dumps({"schema": json.dumps(schema)}).encode()
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def _trickled(reply: bytes, pieces: int, pause_s: float) -> list[Step]:
    """``reply`` in ``pieces`` parts, the registry pausing ``pause_s`` before each."""
    size = -(-len(reply) // pieces)
    steps: list[Step] = []
    for start in range(0, len(reply), size):
        steps += [pause_s, reply[start:start + size]]
    return steps


@contextlib.asynccontextmanager
async def _slow_steps(caplog: pytest.LogCaptureFixture) -> AsyncIterator[list[str]]:
    """The loop's steps that took longer than ``SLOW_S`` inside the block (asyncio's debug
    mode measures and logs each), listed when it ends."""
    loop = asyncio.get_running_loop()
    debug, threshold = loop.get_debug(), loop.slow_callback_duration
    caplog.set_level(logging.WARNING, logger="asyncio")
    loop.set_debug(True)
    loop.slow_callback_duration = SLOW_S
    slow: list[str] = []
    await asyncio.sleep(0)  # the loop decides whether to measure a step as the step starts
    try:
        yield slow
    finally:
        await asyncio.sleep(0)  # ends the current step while it is still measured
        loop.set_debug(debug)
        loop.slow_callback_duration = threshold
        slow += [r.getMessage() for r in caplog.records
                 if r.name == "asyncio" and r.getMessage().startswith("Executing")]


def _service(tmp_path: Path, registry_url: str) -> ParticipantService:
    return ParticipantService(config_from_mapping({
        "name": "off-loop",
        "kafka": {"bootstrap_servers": "127.0.0.1:9", "topics": ["t"], "value_format": "avro"},
        "table": {"base_path": str(tmp_path / "t"), "schema": "id STRING NOT NULL",
                  "record_key_field": "id"},
        "avro": {"registry_url": registry_url, "registry_timeout_s": 10}}))


async def test_a_trickling_registry_never_stalls_the_event_loop(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The participant's own decoding wiring, its partition accepting on the loop as the
    intake does. The old code spent the whole 1.8 s trickle inside one step of the loop."""
    with RawServer(_trickled(_answer(SCHEMA), 6, 0.3)) as registry:
        partition = _service(tmp_path, registry.url)._new_partition("t", 0)
        partition.begin("20250101000000001", 1, 0)

        def accepted() -> bool:  # what the intake does: read again from where it stopped
            partition.deferred = None
            partition.accept(RECORDS)
            return partition.next_offset == 3

        async with _slow_steps(caplog) as slow:
            first = accepted()
            await eventually_async(accepted, 10, "the records decoded once the schema arrived")
    assert slow == [] and not first  # the old code: one step of 1.8 s, decoded in it
    assert [row.values["id"] for row in partition.rows] == ["o-0", "o-1", "o-2"]
    assert partition.dead_letters == [] and registry.requests == 1


class LogConsumer:
    """One partition's log as the intake's consumer: ``getmany`` returns what lies past the
    position unless the partition is paused, ``seek`` moves the position."""

    def __init__(self, records: list[Rec]) -> None:
        self.records = records
        self.position = 0
        self.paused: set[KafkaTopicPartition] = set()

    def assignment(self) -> set[KafkaTopicPartition]:
        return {KTP}

    def pause(self, *tps: KafkaTopicPartition) -> None:
        self.paused.update(tps)

    def resume(self, *tps: KafkaTopicPartition) -> None:
        self.paused.difference_update(tps)

    def seek(self, tp: KafkaTopicPartition, offset: int) -> None:
        self.position = offset

    def highwater(self, tp: KafkaTopicPartition) -> int:
        return len(self.records)

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[Any, list[Rec]]:
        if KTP in self.paused or self.position >= len(self.records):
            await asyncio.sleep(timeout_ms / 1000)  # a fetch that finds nothing waits so long
            return {}
        batch, self.position = self.records[self.position:], len(self.records)
        return {KTP: batch}


async def test_the_intake_resumes_a_partition_when_its_schema_arrives(
        caplog: pytest.LogCaptureFixture) -> None:
    """The partition waits paused while the registry holds its answer (the loop free), and
    reads again as soon as the fetch settles, not after its pause (an hour here)."""
    answer = threading.Event()
    with RawServer([answer, _answer(SCHEMA)]) as server:
        fetches = BackgroundSchemas(RegistrySchemas(AvroConfig(registry_url=server.url)),
                                    deadline_s=30, retry_s=2)
        consumer = LogConsumer(RECORDS)
        registry = PartitionRegistry(lambda topic, partition: TransactionParticipant(
            topic=topic, partition=partition, flush_records=100, fail_on_error=False,
            decoder=_decoder(fetches)))
        registry.assigned([KTP])
        registry.apply()
        state = registry.active[("t", 0)]
        state.begin("20250101000000001", 1, 0)
        clients = ParticipantClients(producer=None, channel=None,  # type: ignore[arg-type]
                                     consumer=consumer,  # type: ignore[arg-type]
                                     dlq=DeadLetterSender(None, "t-dlq"))  # type: ignore[arg-type]
        runtime = Runtime(clients=clients, registry=registry, metrics=Metrics("participant"),
                          tasks=BackgroundTasks("participant"), clock=ManualClock())
        intake = Intake(runtime, None, None, defer_s=3600, fetches=fetches)  # type: ignore[arg-type]
        async with _slow_steps(caplog) as slow:
            task = asyncio.create_task(intake.run())
            try:
                await eventually_async(lambda: KTP in consumer.paused and server.requests == 1,
                                       10, "the partition paused while its schema is fetched")
                assert state.next_offset == 0 and fetches.fetching == 1
                answer.set()
                await eventually_async(lambda: state.next_offset == 3, 10, "the records decoded")
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    assert [row.values["id"] for row in state.rows] == ["o-0", "o-1", "o-2"]
    assert state.dead_letters == [] and slow == []


def _decoder(schemas: BackgroundSchemas) -> RecordDecoder:
    table = TableConfig(schema="id STRING NOT NULL", record_key_field="id").table_schema()
    return RecordDecoder(table, 1 << 20, value_parser=AvroValues(schemas).parse)


@pytest.fixture
def held() -> Iterator[tuple[RawServer, threading.Event]]:
    """A registry that answers only once the test sets the event."""
    answer = threading.Event()
    with RawServer([answer, _answer(SCHEMA)]) as server:
        yield server, answer


def test_a_fetch_past_its_deadline_answers_unavailable_and_is_not_repeated(
        held: tuple[RawServer, threading.Event]) -> None:
    server, answer = held
    clock = ManualClock()
    fetches = BackgroundSchemas(RegistrySchemas(AvroConfig(registry_url=server.url)),
                                deadline_s=5, retry_s=2, clock=clock)
    with pytest.raises(SchemaPending):
        fetches.get(1)
    eventually(lambda: server.requests == 1, 10, "the registry asked")
    clock.advance(6)
    with pytest.raises(RegistryUnavailable, match="no answer from the registry within 5 s") as late:
        fetches.get(1)
    assert not isinstance(late.value, SchemaPending) and server.requests == 1
    answer.set()
    eventually(lambda: fetches.settled == 1, 10, "the fetch ended")
    assert fetches.get(1) == SCHEMA and fetches.fetching == 0 and server.requests == 1


def test_at_most_a_few_fetches_run_at_once(held: tuple[RawServer, threading.Event]) -> None:
    server, answer = held
    fetches = BackgroundSchemas(RegistrySchemas(AvroConfig(registry_url=server.url)),
                                deadline_s=30, retry_s=2)
    for schema_id in range(1, MAX_FETCHES + 2):
        with pytest.raises(SchemaPending):
            fetches.get(schema_id)
    eventually(lambda: server.requests == MAX_FETCHES, 10, "every fetch started")
    assert fetches.fetching == MAX_FETCHES
    answer.set()
    eventually(lambda: fetches.settled == MAX_FETCHES, 10, "the fetches ended")
    with pytest.raises(SchemaPending):
        fetches.get(MAX_FETCHES + 1)  # its turn now
    eventually(lambda: fetches.settled == MAX_FETCHES + 1, 10, "the last fetch ended")
    assert fetches.get(MAX_FETCHES + 1) == SCHEMA


def test_a_failed_answer_stands_for_retry_s() -> None:
    """A registry answering 503 (or 404) at once is asked once per ``retry_s``, not on every
    turn of the intake's loop; a bad id's records are rejected without a request each."""
    clock = ManualClock()
    with LocalRegistry({1: SCHEMA}) as registry:
        fetches = BackgroundSchemas(RegistrySchemas(AvroConfig(registry_url=registry.url)),
                                    deadline_s=5, retry_s=2, clock=clock)
        registry.down = True  # 503
        _settle(fetches, 1)
        registry.down = False  # back, but the 503 stands for retry_s
        _settle(fetches, 9)  # 404
        for schema_id, error in ((1, RegistryUnavailable), (9, UnknownSchemaId)):
            for _ in range(3):
                with pytest.raises(error) as answered:
                    fetches.get(schema_id)
                assert not isinstance(answered.value, SchemaPending)
        assert registry.requests == ["/schemas/ids/1", "/schemas/ids/9"]
        clock.advance(2)
        _settle(fetches, 1)  # asked again
        assert fetches.get(1) == SCHEMA and registry.requests[-1] == "/schemas/ids/1"


def _settle(fetches: BackgroundSchemas, schema_id: int) -> None:
    """Start a fetch of ``schema_id`` and wait for it to end."""
    settled = fetches.settled
    with pytest.raises(SchemaPending):
        fetches.get(schema_id)
    eventually(lambda: fetches.settled > settled, 10, f"the fetch of id {schema_id} ended")
