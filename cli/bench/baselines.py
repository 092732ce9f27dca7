"""What Kafka and Arrow alone do on this machine: the bounds the sink is measured against.

- :func:`consume_only`: aiokafka reads the topic and counts records (the participant's
  consumer settings, no group, no decoding): nothing downstream can be faster.
- :func:`arrow_baseline`: the same consumer, every value through the participant's own
  decoder, each partition's rows into Arrow every ``flush_records`` and written with
  pyarrow's Parquet writer: the ceiling of this design without Spark and without the
  protocol.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaTopicPartition

from hudi_sink.cli.bench.data import PARTITIONS
from hudi_sink.services.participant.decoded import Row, rows_to_arrow
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.shared.config.settings import KafkaConfig
from hudi_sink.shared.kafka.connection import consumer_options
from hudi_sink.shared.schema.table_schema import TableSchema

__all__ = ["Rate", "consume_only", "arrow_baseline"]


@dataclass(frozen=True)
class Rate:
    records: int
    seconds: float
    cpu_seconds: float = 0.0
    """CPU of this process meanwhile (the broker's is not counted)."""

    @property
    def rps(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


async def _read_all(bootstrap: str, topic: str, records: int,
                    handle: Callable[[int, list[Any]], None],
                    finish: Callable[[], None] = lambda: None) -> Rate:
    """Read ``records`` from every partition's start; the time runs from the first fetch
    to the end of ``finish`` (what is left to do once the last record is handled)."""
    kafka = KafkaConfig(bootstrap_servers=bootstrap, topics=[topic])
    consumer = AIOKafkaConsumer(**consumer_options(kafka, None, "hudi-sink-bench"))
    await consumer.start()
    try:
        partitions = [KafkaTopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        seen = 0
        started, cpu_started = time.perf_counter(), time.process_time()
        while seen < records:
            batches = await consumer.getmany(timeout_ms=200, max_records=20000)
            for ktp, batch in batches.items():
                seen += len(batch)
                handle(ktp.partition, batch)
        finish()
        return Rate(seen, time.perf_counter() - started, time.process_time() - cpu_started)
    finally:
        await consumer.stop()


async def consume_only(bootstrap: str, topic: str, records: int) -> Rate:
    return await _read_all(bootstrap, topic, records, lambda _p, _batch: None)


async def arrow_baseline(bootstrap: str, topic: str, records: int, schema: TableSchema,
                         flush_records: int, out_dir: Path | None = None) -> Rate:
    """Consume, decode, build Arrow and write Parquet (snappy) inline, one file per
    ``flush_records`` rows of a partition; the files go to a temporary directory."""
    decoder = RecordDecoder(schema, 10 * 1024 * 1024)
    buffers: dict[int, list[Row]] = {p: [] for p in range(PARTITIONS)}
    written = [0]

    with tempfile.TemporaryDirectory(prefix="hudi-sink-bench-arrow-", dir=out_dir) as scratch:

        def write(rows: list[Row]) -> None:
            table: pa.Table = rows_to_arrow(rows, schema)
            pq.write_table(table, f"{scratch}/{written[0]}.parquet", compression="snappy")
            written[0] += 1

        def handle(partition: int, batch: list[Any]) -> None:
            rows = buffers[partition]
            for record in batch:
                decoded = decoder.decode(record.value)
                if type(decoded) is Row:
                    rows.append(decoded)
            if len(rows) >= flush_records:
                write(rows)
                buffers[partition] = []

        def finish() -> None:
            for rows in buffers.values():
                if rows:
                    write(rows)

        return await _read_all(bootstrap, topic, records, handle, finish)

