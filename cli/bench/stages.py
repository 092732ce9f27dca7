"""``hudi-sink bench --stages``: one number per stage of the hot path, each measured alone,
so a regression shows in the stage it happens in.

- decode: record values → decoded rows (the participant's decoder);
- arrow build: a flush's rows → the Arrow columns with the meta columns (once per flush);
- name files: fresh file ids and the ``_hoodie_file_name`` column (once per attempt);
- spark flush: that table → staged Parquet files through the process's SparkSession
  (warm; the median of several flushes of ``flush_records`` rows);
- commit: a coordinator's commit of one instant listing 32 staged files (4 Kafka partitions
  × 8 table partitions: fence entry, placement, fsyncs, ``<T>.commit``).

No broker and no other process: pure CPU and local disk.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from hudi_sink.cli.bench.data import BENCH_SCHEMA, RecordMaker
from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.disposal import DirectDisposal
from hudi_sink.services.participant.decoded import Row
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.flush_plan import FlushInput, name_flush, plan_flush, prepare_flush
from hudi_sink.services.participant.spark_writer import SparkWriter
from hudi_sink.shared.config.settings import SparkConfig, TableConfig
from hudi_sink.shared.hudi.naming import base_file_name, new_file_id, next_instant_time, partition_path
from hudi_sink.shared.hudi.offsets import offsets_metadata
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.write_stats import WriteStat, build_commit_metadata
from hudi_sink.shared.storage.fs import LocalFileSystem

__all__ = ["run_stages"]

FLUSH_ROWS = 100_000


def _best(runs: int, action: Callable[[], Any]) -> tuple[float, Any]:
    """Median seconds of ``runs`` calls, and the last result."""
    times, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def _table_config(base: str) -> TableConfig:
    return TableConfig.model_validate({"base_path": base, "name": "bench", "record_key_field": "id",
                                       "partition_field": "country", "schema": BENCH_SCHEMA})


def _spec(staging: str, flush_no: int) -> FlushInput:
    return FlushInput(topic="bench", partition=0, source_index=0, instant="20260101000000000",
                      flush_no=flush_no, writer_nonce=1, staging_dir=staging, hive_style=False)


def _commit_once(committer: TableCommitter, table: HudiTable, schema_json: str) -> float:
    fs = LocalFileSystem()
    instant = next_instant_time(table.latest_instant_time(), datetime.now(UTC))
    committer.start(instant)
    stats, moves = [], []
    for kafka_partition in range(4):
        for country in ("us", "de", "fr", "jp", "br", "in", "gb", "ca"):
            path = partition_path(country, "country", False)
            name = base_file_name(new_file_id(), f"{kafka_partition}-0-1", instant)
            staged = f"{table.staging_path(instant, path, name)}"
            fs.makedirs(os.path.dirname(staged))
            Path(staged).write_bytes(b"x" * 4096)
            final = f"{path}/{name}"
            stats.append(WriteStat(file_id=name.split("_")[0], path=final, partition_path=path,
                                   num_writes=1, num_inserts=1, file_size_bytes=4096,
                                   total_write_bytes=4096))
            moves.append((os.path.relpath(staged, table.base_path), final))
    extra = {"schema": schema_json,
             **offsets_metadata({("bench", p): 1000 for p in range(4)}, ["bench"])}
    metadata = build_commit_metadata(stats, extra)
    started = time.perf_counter()
    committer.commit(instant, metadata, moves)
    return time.perf_counter() - started


def run_stages(records: int, record_bytes: int, out: Path | None = None) -> int:
    records = max(1000, min(records, 400_000))
    table_cfg = _table_config("unused")
    schema = table_cfg.table_schema()
    maker = RecordMaker(record_bytes, seed="stages")
    values = [maker.value(n) for n in range(records)]
    decoder = RecordDecoder(schema, 10 * 1024 * 1024)
    results: dict[str, dict[str, float]] = {}

    def note(stage: str, count: int, seconds: float) -> None:
        results[stage] = {"records": count, "seconds": round(seconds, 4),
                          "records_per_s": round(count / seconds) if seconds else 0}
        print(f"{stage:<12} {count:>9,} records {seconds:>8.3f} s {count / seconds:>12,.0f} rec/s",
              flush=True)

    seconds, rows = _best(3, lambda: [decoder.decode(v) for v in values])
    note("decode", records, seconds)
    rows = [r for r in rows if type(r) is Row]
    flush_rows = rows[:FLUSH_ROWS]
    offsets = list(range(len(flush_rows)))
    with tempfile.TemporaryDirectory(prefix="hudi-sink-stages-") as scratch:
        staging = f"{scratch}/staging"
        seconds, prepared = _best(3, lambda: prepare_flush(flush_rows, offsets, schema,
                                                          _spec(staging, 0)))
        note("arrow build", len(flush_rows), seconds)
        seconds, _named = _best(3, lambda: name_flush(prepared, _spec(staging, 0)))
        note("name files", len(flush_rows), seconds)

        fs = LocalFileSystem()
        writer = SparkWriter(SparkConfig(master="local[2]"), fs)
        writer.start(f"{scratch}/warm")
        try:
            times = []
            for n in range(4):
                table, plans = plan_flush(flush_rows, offsets, schema, _spec(staging, n + 1))
                started = time.perf_counter()
                writer.write(table, plans, staging)
                if n:  # the first one still pays JIT warm-up
                    times.append(time.perf_counter() - started)
            note("spark flush", len(flush_rows), statistics.median(times))
        finally:
            writer.stop()

        base = f"{scratch}/table"
        hudi = HudiTable(fs, base)
        hudi.initialize(_table_config(base), schema)
        committer = TableCommitter(fs, hudi, DirectDisposal(fs))
        committer.claim_epoch({"host": "bench"})
        latencies = [_commit_once(committer, hudi, schema.avro_schema_json()) for _ in range(10)]
        seconds = statistics.median(latencies)
        results["commit"] = {"files": 32, "seconds": round(seconds, 4)}
        print(f"{'commit':<12} {32:>9,} files   {seconds:>8.3f} s (median of 10)", flush=True)
    if out is not None:
        out.write_bytes(orjson.dumps({"record_bytes": record_bytes, "stages": results},
                                     option=orjson.OPT_INDENT_2) + b"\n")
    return 0
