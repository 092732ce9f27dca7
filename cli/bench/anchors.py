"""``hudi-sink bench --anchors``: other Kafka → table sinks, measured beside ours.

On the broker the sink's runs used, each anchor gets its own topic filled with byte for byte
the records the sink got (the same :class:`.data.RecordMaker` seed, 4 partitions), runs in a
Kafka Connect standalone worker (:mod:`.connect`) with one task, and writes a local table:

- Apache Iceberg's sink (``org.apache.iceberg.connect.IcebergSinkConnector``): a Hadoop
  catalog on a local warehouse, the table created by the connector from the JSON, partitioned
  by ``country``;
- Apache Hudi's sink (``org.apache.hudi.connect.HoodieSinkConnector``, its connect bundle): a
  Copy-on-Write table of version 6, keyed by ``id``, partitioned by ``country``, records read
  as JSON strings with an Avro schema file.

Measured as the sink is, from the tables' own files (:mod:`.lakes`): records/s is N ÷ (when
the commit that made the last backlog record visible appeared − when the connector's consumer
group first held every partition, as the sink's clock starts at its first START_COMMIT with
its participants' consumers assigned); ``start_up_s`` is the time from submitting the connector
to a warm worker until then. Then, when the bench has a steady phase, the same rate of new
records for the same time, and produce → visible for each of them. An anchor that cannot run
(its jars do not resolve, its task fails, its records never all appear) gets a reason instead
of figures; the other anchor and the sink's figures are unaffected.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from hudi_sink.cli.bench import connect
from hudi_sink.cli.bench.connect import AnchorUnavailable, ConnectWorker
from hudi_sink.cli.bench.data import PARTITIONS, produce
from hudi_sink.cli.bench.lakes import HudiCommits, IcebergCommits, TableCommit, Visibility
from hudi_sink.cli.bench.report import percentile, tree_cpu_seconds, vm_hwm_mb
from hudi_sink.cli.bench.steady import SteadyLoad, produce_steady
from hudi_sink.shared.config.settings import KafkaConfig
from hudi_sink.shared.kafka.connection import TopicAdmin

__all__ = ["ANCHORS", "AnchorSetup", "run_anchors"]

log = logging.getLogger("hudi_sink.bench.anchors")

FAILURE_CHECK_S = 2.0
"""How often the connector's status is asked for a FAILED task while waiting on its table."""
WORKER = {"offset.flush.interval.ms": "1000"}
"""Connect's sink loop blocks in poll() up to this long when the topic is idle, and both
connectors answer their coordinator only from put(): at the 60 s default an idle moment
stalls a commit for up to a minute (seen with Iceberg's: a 30 s commit timeout, then an empty
commit). The sink's own consumer has no such wait, so the anchors get 1 s."""
_STRING = "org.apache.kafka.connect.storage.StringConverter"
_AVRO_SCHEMA = {"type": "record", "name": "bench", "fields": [
    {"name": "id", "type": "string"}, {"name": "ts", "type": "string"},
    {"name": "country", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "payload", "type": "string"}]}


@dataclass(frozen=True)
class AnchorSetup:
    bootstrap: str
    work: Path
    records: int
    record_bytes: int
    seed: str
    """The sink's records' seed: the anchors get the same records."""
    interval_ms: int
    steady: SteadyLoad | None
    timeout_s: float


class _Table(Protocol):
    def poll(self) -> list[TableCommit]: ...


@dataclass(frozen=True)
class Anchor:
    key: str
    title: str
    directory: str
    """bench/java/<directory>: the plugin's pom."""
    version_property: str
    connector_class: str
    configure: Callable[[AnchorSetup, str, str, Path], dict[str, str]]
    """(setup, topic, control topic, anchor directory) → the connector's config."""
    table: Callable[[Path, str], _Table]
    """(anchor directory, topic) → the reader of its table."""
    rows: Callable[[_Table, Path], int]
    """The table's row count by the format's own means."""


def _iceberg_config(setup: AnchorSetup, topic: str, control: str, directory: Path) -> dict[str, str]:
    return {
        "connector.class": ICEBERG_CLASS, "tasks.max": "1", "topics": topic,
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "iceberg.tables": "bench.orders",
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.default-partition-by": "country",
        "iceberg.catalog.type": "hadoop",
        "iceberg.catalog.warehouse": (directory / "warehouse").as_uri(),
        "iceberg.control.topic": control,
        "iceberg.control.commit.interval-ms": str(setup.interval_ms),
        "iceberg.kafka.bootstrap.servers": setup.bootstrap,
    }


def _hudi_config(setup: AnchorSetup, topic: str, control: str, directory: Path) -> dict[str, str]:
    schema = directory / "bench.avsc"
    schema.write_bytes(orjson.dumps(_AVRO_SCHEMA))
    return {
        "connector.class": HUDI_CLASS, "tasks.max": "1", "topics": topic,
        "key.converter": _STRING, "value.converter": _STRING,
        "value.converter.schemas.enable": "false",
        "hoodie.table.name": "bench_hudi_connect", "hoodie.table.type": "COPY_ON_WRITE",
        "hoodie.base.path": (directory / "table").as_uri(),
        "hoodie.write.table.version": "6",
        "hoodie.metadata.enable": "false",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "country",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.schemaprovider.class": "org.apache.hudi.schema.FilebasedSchemaProvider",
        "hoodie.streamer.schemaprovider.source.schema.file": str(schema),
        "hoodie.deltastreamer.schemaprovider.source.schema.file": str(schema),
        "hoodie.kafka.control.topic": control,
        "hoodie.kafka.commit.interval.secs": str(max(1, round(setup.interval_ms / 1000))),
    }


def _hudi_rows(table: _Table, directory: Path) -> int:
    from hudi_sink.cli.table_cmd import read_rows  # hudi-rs, as every table of ours is read

    return int(read_rows(str(directory / "table")).num_rows)


def _iceberg_rows(table: _Table, directory: Path) -> int:
    assert isinstance(table, IcebergCommits)
    return table.total_records


ICEBERG_CLASS = "org.apache.iceberg.connect.IcebergSinkConnector"
HUDI_CLASS = "org.apache.hudi.connect.HoodieSinkConnector"
ANCHORS = (
    Anchor("iceberg", "Apache Iceberg Kafka Connect sink", "iceberg-connect", "iceberg.version",
           ICEBERG_CLASS, _iceberg_config,
           lambda directory, topic: IcebergCommits(directory / "warehouse" / "bench" / "orders"),
           _iceberg_rows),
    Anchor("hudi", "Apache Hudi Kafka Connect sink", "hudi-connect", "hudi.version", HUDI_CLASS,
           _hudi_config, lambda directory, topic: HudiCommits(directory / "table", topic), _hudi_rows),
)


async def run_anchors(setup: AnchorSetup) -> dict[str, dict[str, Any]]:
    """Every anchor in turn (one at a time: they share the machine with nothing else)."""
    results: dict[str, dict[str, Any]] = {}
    try:
        runtime: list[str] | None = await asyncio.to_thread(connect.resolve_classpath, "connect-runtime")
        runtime_error = None
    except AnchorUnavailable as exc:
        runtime, runtime_error = None, str(exc)
    for anchor in ANCHORS:
        results[anchor.key] = await _run_one(anchor, setup, runtime, runtime_error)
    return results


def _versions(anchor: Anchor) -> dict[str, str | None]:
    return {"kafka_connect": connect.pom_properties("connect-runtime").get("kafka.version"),
            anchor.key: connect.pom_properties(anchor.directory).get(anchor.version_property)}


async def _run_one(anchor: Anchor, setup: AnchorSetup, runtime: list[str] | None,
                   runtime_error: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {"title": anchor.title, "connector": anchor.connector_class, "error": None}
    try:
        result["versions"] = _versions(anchor)
        if runtime is None:
            raise AnchorUnavailable(runtime_error or "no Connect runtime")
        plugin = await asyncio.to_thread(connect.resolve_classpath, anchor.directory)
        result.update(await _measure(anchor, setup, runtime, plugin))
    except Exception as exc:  # noqa: BLE001 - whatever stops an anchor is its reason line, not the bench's end
        unexpected = not isinstance(exc, AnchorUnavailable)
        result["error"] = f"{type(exc).__name__}: {exc}" if unexpected else str(exc)
        log.warning("anchor %s could not run: %s", anchor.key, result["error"])
    return result


async def _measure(anchor: Anchor, setup: AnchorSetup, runtime: list[str],
                   plugin: list[str]) -> dict[str, Any]:
    name = f"bench-{anchor.key}"
    topic, control = f"bench-anchor-{anchor.key}", f"bench-anchor-{anchor.key}-control"
    directory = setup.work / f"anchor-{anchor.key}"
    directory.mkdir()
    produced = await produce(setup.bootstrap, topic, setup.records, setup.record_bytes, setup.seed)
    async with TopicAdmin(KafkaConfig(bootstrap_servers=setup.bootstrap, topics=[topic])) as admin:
        await admin.ensure_topic(control, 1, exact_partitions=True, config_key="anchor control topic")
    config = anchor.configure(setup, topic, control, directory)
    worker = ConnectWorker(directory, setup.bootstrap, runtime, plugin, worker=WORKER)
    table = anchor.table(directory, topic)
    seen = Visibility(produced.seed, setup.records)
    try:
        await worker.start()
        cpu_before = tree_cpu_seconds(worker.pid)
        submitted = time.time()
        await worker.submit(name, config)
        assigned = asyncio.create_task(connect.wait_assigned(setup.bootstrap, f"connect-{name}", PARTITIONS,
                                                     setup.timeout_s))
        try:
            await _watch(worker, name, table, seen, lambda: seen.backlog_done_at is not None,
                         setup.timeout_s)
            started = await assigned
        finally:
            assigned.cancel()
        cpu = tree_cpu_seconds(worker.pid) - cpu_before
        assert seen.backlog_done_at is not None
        seconds = seen.backlog_done_at - started
        steady = await _steady(worker, name, topic, table, seen, setup) if setup.steady else None
        rows = await asyncio.to_thread(anchor.rows, table, directory)
        hwm = vm_hwm_mb(worker.pid) if worker.pid is not None else 0.0
    finally:
        await worker.stop()
    expected_rows = setup.records + (steady["records"] if steady else 0)
    return {
        "rps": round(setup.records / seconds) if seconds > 0 else None,
        "seconds": round(seconds, 2), "commits": seen.commits_to_backlog,
        "start_up_s": round(started - submitted, 2),
        "committed_records": seen.seen(produced.seed), "rows": rows, "rows_expected": expected_rows,
        "cpu_us_per_record": round(cpu * 1e6 / setup.records, 1),
        "worker_hwm_rss_mb": round(hwm, 1),
        "visible_latency_p50_s": steady["visible_p50_s"] if steady else None,
        "visible_latency_p99_s": steady["visible_p99_s"] if steady else None,
        "steady": steady,
        "settings": {"connector": config, "worker_heap_mb": worker.heap_mb,
                     "worker": {k: v for k, v in worker.settings.items() if k != "bootstrap.servers"}},
    }


async def _steady(worker: ConnectWorker, name: str, topic: str, table: _Table, seen: Visibility,
                  setup: AnchorSetup) -> dict[str, Any]:
    """The sink's steady load into the anchor's topic, once its backlog is visible."""
    assert setup.steady is not None
    sent = await produce_steady(setup.bootstrap, topic, setup.steady, setup.record_bytes)
    await _watch(worker, name, table, seen, lambda: seen.seen(sent.run_id) >= sent.records,
                 setup.timeout_s)
    visible = seen.latencies(sent.run_id, sent.timestamps, PARTITIONS)
    return {"target_rps": setup.steady.rps, "records": sent.records,
            "sent_rps": round(sent.records / sent.seconds, 1) if sent.seconds > 0 else 0.0,
            "visible_p50_s": _round(percentile(visible, 50)),
            "visible_p99_s": _round(percentile(visible, 99)),
            "visible_max_s": _round(max(visible, default=None)),
            "uncovered": sent.records - len(visible)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


async def _watch(worker: ConnectWorker, name: str, table: _Table, seen: Visibility,
                 done: Callable[[], bool], timeout_s: float) -> None:
    """Read the table's new commits until ``done``; fail on a dead worker, a FAILED task or
    the deadline, saying how far the records got."""
    deadline = time.monotonic() + timeout_s
    next_check = time.monotonic() + FAILURE_CHECK_S
    while not done():
        worker.check_alive()
        for commit in await asyncio.to_thread(table.poll):
            await asyncio.to_thread(seen.add, commit)
        if done():
            return
        if time.monotonic() >= next_check:
            trace = await worker.failure(name)
            if trace is not None:
                raise AnchorUnavailable(f"the connector's task failed: {_first_lines(trace)}")
            next_check = time.monotonic() + FAILURE_CHECK_S
        if time.monotonic() >= deadline:
            raise AnchorUnavailable(
                f"not every record visible within {timeout_s:g} s ({seen.seen(seen.backlog):,} of "
                f"{seen.records:,} backlog records in {len(seen.commits)} commits); worker log:\n"
                f"{worker.log_tail()[-1500:]}")
        await asyncio.sleep(0.1)


def _first_lines(trace: str) -> str:
    """A Java stack trace's message and its causes (``Caused by:``), without the frames."""
    lines = [line.strip() for line in trace.strip().splitlines()]
    return " | ".join(lines[:1] + [line for line in lines[1:] if line.startswith("Caused by:")])
