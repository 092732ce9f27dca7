"""The participant service: one consumer group over the data topics, one
TransactionParticipant per assigned partition, flushes through the process's SparkSession.

This module is the shell's part only: what the participant builds (table, SparkSession,
flusher, partition registry), how it starts and stops, and which routines run. The work is
in the parts the routines belong to, each one concern:

- :mod:`.intake`: fetch → decode → flush → report a drained partition (the data routine);
- :mod:`.control`: what START/END/ACK from the coordinator do to our partitions;
- :mod:`.reports`: PARTICIPANT_READY and WRITE_STATUS, and healing lost ones;
- the dead-letter pump (:mod:`.dlq_sender`).

All run on one event loop and share one :class:`~.runtime.Runtime`; every state change is a
synchronous block, so they never interleave inside one. Spark and file I/O run in worker
threads (at most two flushes at a time).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import posixpath
import secrets
import socket
import time
import uuid
from collections.abc import Coroutine
from typing import Any

from aiokafka import AIOKafkaConsumer
from fastapi import APIRouter

from hudi_sink.services.participant.assignment import PartitionRegistry
from hudi_sink.services.participant.avro_format import AvroValues
from hudi_sink.services.participant.control import ControlHandler
from hudi_sink.services.participant.dead_letters import ConnectContext
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.dlq_sender import DeadLetterSender
from hudi_sink.services.participant.flusher import Flusher
from hudi_sink.services.participant.intake import Intake, RebalanceSignal
from hudi_sink.services.participant.keyed.changes import KeyedDecoder
from hudi_sink.services.participant.keyed.envelope import KeyedSpec
from hudi_sink.services.participant.reports import Reporter
from hudi_sink.services.participant.rest import build_router
from hudi_sink.services.participant.runtime import BackgroundTasks, Clock, ParticipantClients, Runtime
from hudi_sink.services.participant.schema_fetches import BackgroundSchemas
from hudi_sink.services.participant.staging_upload import writer_for
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.services.participant.views import PartitionView
from hudi_sink.services.participant.writer_schemas import (
    SchemaCheck,
    UnknownFieldLog,
    avro_parser,
    envelope_check,
)
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.kafka.clients import KafkaClientFactory
from hudi_sink.shared.kafka.protocol import Role, Sender
from hudi_sink.shared.kafka.signing import control_keys
from hudi_sink.shared.runtime.faults import Faults
from hudi_sink.shared.runtime.lifecycle import ServiceShell, kafka_prelude
from hudi_sink.shared.runtime.threads import in_daemon_thread
from hudi_sink.shared.schema.registry import writer_schemas
from hudi_sink.shared.schema.table_schema import TableSchema
from hudi_sink.shared.storage.backend import filesystem_for

__all__ = ["ParticipantService"]

PARTITION_COUNT_REREAD_S = 1.0
"""How stale the partition count upsert mode checks keys against may be (see ``partitions``)."""

log = logging.getLogger("hudi_sink.participant")


class ParticipantService(ServiceShell[ParticipantClients]):
    name = "participant"

    def __init__(self, config: SinkConfig, *, faults: Faults | None = None,
                 clients: KafkaClientFactory | None = None, clock: Clock = time.monotonic) -> None:
        """``faults`` is the process's fault plan (the CLI passes
        ``Faults.from_environment()``; none by default); ``clock`` is monotonic seconds for
        every timing decision (drains, re-announcements, flush durations)."""
        super().__init__(config)
        self._faults = faults if faults is not None else Faults()
        self._factory = clients if clients is not None else KafkaClientFactory(config)
        self._clock = clock
        self.schema = config.table.table_schema()
        self.sender = Sender(role=Role.PARTICIPANT, id=uuid.uuid4().hex, host=socket.gethostname())
        self._fs = filesystem_for(config.table.base_path, config.table.storage_options)
        if config.spark.job_timeout_ms >= config.transaction.write_status_timeout_ms:
            log.warning("spark.job_timeout_ms (%d) >= transaction.write_status_timeout_ms (%d): "
                        "a hung Spark driver is noticed only after the coordinator gave up on "
                        "the instant", config.spark.job_timeout_ms,
                        config.transaction.write_status_timeout_ms)
        self._table = HudiTable(self._fs, config.table.base_path)
        self._writer = writer_for(config, self._fs, codec=config.table.parquet_codec)  # uploads to s3
        self._flusher = Flusher(config, self.schema, self._table, self._writer, self.metrics,
                                self._faults, writer_nonce=secrets.randbelow(2**31), clock=clock)
        self._registry = PartitionRegistry(self._new_partition)
        self._tasks = BackgroundTasks("participant")
        self._spark_starting = False
        """Whether SparkSession start-up (in a daemon thread) began and has not finished."""
        self._fetches: BackgroundSchemas | None = None
        """Registry lookups, made in worker threads (never on the event loop)."""
        self._consumer: AIOKafkaConsumer | None = None
        """The data consumer once started (upsert mode asks it for partition counts)."""
        self._unknown_log = UnknownFieldLog()
        self._avro: AvroValues | None = None  # one schema cache per process
        if config.kafka.value_format == "avro":
            schemas = writer_schemas(config.avro)
            if config.avro.registry_url is not None:
                schemas = self._fetches = BackgroundSchemas(
                    schemas, deadline_s=config.avro.registry_timeout_s,
                    retry_s=config.service.retry_backoff_ms / 1000)
            self._avro = AvroValues(schemas)

    def _keyed_decoder(self, topic: str) -> KeyedDecoder | None:
        """Upsert mode: what a record means for its key (envelopes, tombstones, the
        partitioner check against the topic's partition count as the consumer knows it)."""
        cfg = self.config
        if cfg.table.write_mode != "upsert":
            return None
        avro_keys = cfg.upsert.kafka_key_format == "avro"
        spec = KeyedSpec(key_fields=cfg.table.record_key_fields, envelope=cfg.kafka.envelope,
                         kafka_key_format="json" if avro_keys else cfg.upsert.kafka_key_format,
                         delete_field=cfg.upsert.delete_field, delete_marker=cfg.upsert.delete_marker)

        read_at, count = -PARTITION_COUNT_REREAD_S, None

        def partitions() -> int | None:
            """The topic's partition count as the consumer's metadata has it, read again at
            most every PARTITION_COUNT_REREAD_S (asked once per record: the set aiokafka
            builds each time cost about 2 µs a record; its metadata lags anyway)."""
            nonlocal read_at, count
            now = time.monotonic()
            if count is None or now - read_at >= PARTITION_COUNT_REREAD_S:  # None: ask again
                consumer = self._consumer
                found = consumer.partitions_for_topic(topic) if consumer is not None else None
                read_at, count = now, (len(found) if found else None)
            return count

        return KeyedDecoder(spec, partitioner=cfg.upsert.key_partitioner,
                            precombine_field=cfg.table.precombine_field,
                            partitions_of_topic=partitions,
                            key_parser=self._avro.parse if avro_keys and self._avro else None)

    def _new_partition(self, topic: str, partition: int) -> TransactionParticipant:
        keyed = self._keyed_decoder(topic)

        def decoder_for(ddl: str | None, follow: bool | None) -> RecordDecoder:
            schema = self.schema if ddl is None else self.config.table.table_schema(ddl)
            return self._decoder(schema, keyed, follow)

        return TransactionParticipant(
            topic=topic,
            partition=partition,
            decoder=decoder_for(None, None),
            decoder_for=decoder_for,
            keyed=keyed,
            flush_records=self.config.transaction.flush_records,
            buffer_bytes=self.config.transaction.buffer_bytes,
            fail_on_error=self.config.errors.tolerance == "fail",
            clock=self._clock,
        )

    def _decoder(self, schema: TableSchema, keyed: KeyedDecoder | None,
                 follow: bool | None) -> RecordDecoder:
        """A decoder for one table schema (an instant's: schema evolution changes it), its
        writer schemas checked against it (``.writer_schemas``); ``follow`` None: whether the
        config's ``table.schema_source`` is ``registry``. Under a change-event envelope
        (Debezium) the writer schema is the event's, not the row's: it is not checked."""
        cfg = self.config
        if follow is None:
            follow = cfg.table.schema_source == "registry"
        check = SchemaCheck(schema, unknown_log=self._unknown_log, follow=follow)
        connect = cfg.kafka.value_format == "connect_json"
        checked = cfg.kafka.envelope == "none"
        parser = None if self._avro is None else (
            avro_parser(self._avro, check) if checked else self._avro.parse)
        return RecordDecoder(schema, cfg.errors.max_record_bytes,
                             hive_style=cfg.table.hive_style_partitioning,
                             connect_envelope=connect, value_parser=parser,
                             unwrap=keyed.unwrap if keyed else None,
                             envelope_check=envelope_check(check) if connect and checked and follow
                             else None,
                             unknown_log=None if self._avro else self._note_unknown_json)

    def _note_unknown_json(self, names: list[str]) -> None:
        self._unknown_log.note("JSON values", tuple(names), names)

    # --- lifecycle ----------------------------------------------------------------------
    def running_readiness(self) -> list[str]:
        if not self._registry.joined:
            return [f"not yet joined consumer group {self.config.participants_group}"]
        if not self._writer.warmed:
            return ["SparkSession not warmed yet"]
        return []

    def routers(self) -> list[APIRouter]:
        return [build_router(self)]

    def routines(self, running: ParticipantClients) -> dict[str, Coroutine[Any, Any, Any]]:
        log.info("participant %s started (topics %s)", self.sender.id, self.config.kafka.topics)
        runtime = Runtime(clients=running, registry=self._registry, metrics=self.metrics,
                          tasks=self._tasks, clock=self._clock)
        reporter = Reporter(runtime, self.config.transaction)
        intake = Intake(runtime, self._flusher, reporter,
                        defer_s=self.config.service.retry_backoff_ms / 1000, fetches=self._fetches)
        control = ControlHandler(runtime, intake, reporter)
        return {
            "participant-data": intake.run(),
            "participant-control": control.run(),
            "participant-heal": reporter.heal_routine(),
            "participant-dead-letters": running.dlq.run(),
            "participant-spark-watch": self._flusher.watch_spark(),
        }

    async def start(self) -> ParticipantClients:
        cfg = self.config
        control_keys(cfg.kafka)  # an unreadable key file fails now, not after Spark's start
        await kafka_prelude(cfg, self.set_not_ready, data_topics=True)
        await asyncio.to_thread(self._table.initialize, cfg.table, self.schema)
        self.set_not_ready("starting SparkSession")
        warm_dir = posixpath.join(cfg.table.base_path, layout.warmup_dir(self.sender.id))
        self._spark_starting = True  # stays True if SIGTERM cuts the start short (see close)
        await in_daemon_thread(self._writer.start, warm_dir)
        self._spark_starting = False
        await asyncio.to_thread(self._fs.delete_tree, warm_dir)
        producer = await self._factory.producer("hudi-sink-participant")
        channel = await self._factory.channel(self.sender, producer, self._faults, self.metrics)
        consumer = await self._factory.consumer(cfg.participants_group, self.sender.id)
        self._consumer = consumer
        running = ParticipantClients(
            producer=producer, channel=channel, consumer=consumer,
            dlq=DeadLetterSender(producer, cfg.dlq_topic, connect=ConnectContext(
                cfg.name, self.sender.id) if cfg.errors.connect_headers else None,
                log_letters=cfg.errors.letter_logging),
        )
        consumer.subscribe(topics=list(cfg.kafka.topics),
                           listener=RebalanceSignal(self._registry, consumer))
        # Buffered rows live until a flush: the default GC thresholds make the collector
        # rescan them constantly (a quarter of decode time, measured in bench/).
        gc.freeze()
        gc.set_threshold(100_000, 20, 100)
        return running

    async def close(self, running: ParticipantClients | None) -> None:
        """Intake has stopped: let reports in progress finish briefly, leave the group,
        stop Spark."""
        ending = self._tasks.named("end")
        if ending:
            log.info("participant stopping: waiting for %d report(s)", len(ending))
            await asyncio.wait(ending, timeout=10)
        self._tasks.cancel_all()
        if running is not None:
            log.info("participant stopping: leaving group")
            await self._factory.close(running.consumer, running.channel, running.producer)
        if self._spark_starting:
            # Stopping would wait for the session being built (tens of seconds on a busy
            # machine), and the warm-up would build it again. The start's daemon thread is
            # abandoned instead: Spark's JVM ends with this process (EOF on its stdin).
            log.info("participant stopping: SparkSession was still starting, left to the exit")
            return
        log.info("participant stopping: SparkSession")
        await in_daemon_thread(self._writer.stop)  # Spark calls: never joined at exit

    # --- queries (REST) ----------------------------------------------------------------
    def partition_views(self) -> list[PartitionView]:
        return [PartitionView.of(state)
                for state in sorted(self._registry.active.values(), key=lambda s: s.key)]
