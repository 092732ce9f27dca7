"""``hudi-sink bench --mode upsert``: what keyed writes cost, beside insert mode on the same
records, machine and run.

1. An embedded broker; ``rows`` records with unique ids produced **keyed** into
   :data:`UPSERT_PARTITIONS` partitions (message key = record id, no partition given: the
   default partitioner, murmur2 — upsert mode's precondition) before any timing starts.
2. Unless ``compare_insert`` is off: the sink in insert mode, 1 participant, on that topic
   (``sink_rps_1``, measured exactly as the insert bench measures it).
3. The sink in upsert mode, 1 participant, a fresh table, the same topic: the insert-only
   workload (every key new) → ``upsert_rps_1``, the same definition as ``sink_rps_1``
   (records ÷ seconds from the first START_COMMIT to the commit covering every offset), and
   ``upsert_vs_insert`` = ``upsert_rps_1 ÷ sink_rps_1``.
4. With the upsert processes still running, the update phase (:mod:`.updates`): updates of
   keys drawn uniformly from ``[0, rows)`` at ``update_rps`` for ``update_seconds`` →
   produce → visible p50/p99, ``merge_mb_per_s``, ``write_amplification``.

Why the insert run reads the keyed topic too: both modes then read the same records from the
same partitions, so the ratio compares the write paths and nothing else.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hudi_sink.cli.bench.brokers import bench_broker
from hudi_sink.cli.bench.data import produce
from hudi_sink.cli.bench.report import machine_facts, percentile
from hudi_sink.cli.bench.sink_run import SinkResult, SinkRun
from hudi_sink.cli.bench.updates import UpdateLoad, UpdateResult

__all__ = ["DRIVER_MEMORY", "UPSERT_PARTITIONS", "UpsertBench", "measure_upsert", "upsert_targets",
           "with_driver_memory"]

log = logging.getLogger("hudi_sink.bench")

UPSERT_PARTITIONS = 8
"""The keyed topic's partitions (the issue's update workload: 8 Kafka partitions)."""
DRIVER_MEMORY = ("spark.driver.memory", "4g")
"""The participants' Spark heap unless ``--spark-conf`` names one, both modes alike: a
participant whose merges rewrite a 1M-row table needs a heap sized like a deployment's (the
chart derives it from the pod's memory limit). Spark's 1 GB default ran out of heap here
(measured 2026-11-27: OutOfMemoryError in the keyed insert phase, when a flush's new rows still
reached Spark as a local relation of rows in the driver; a merge task also buffers every file
it writes until the task ends)."""
TOPIC = "bench-keyed"


@dataclass(frozen=True)
class UpsertBench:
    rows: int = 1_000_000
    """The key space: the insert-only workload's records, so the table's rows."""
    update_rps: int = 10_000
    update_seconds: float = 30
    """The update phase (0 seconds or 0 updates/s: none)."""
    compare_insert: bool = True
    """Run insert mode on the same keyed records first (``sink_rps_1``, ``upsert_vs_insert``)."""


@dataclass(frozen=True)
class RunSettings:
    """What every sink run of a bench shares (``BenchOptions``' knobs)."""

    record_bytes: int
    interval_ms: int
    flush_records: int | None
    spark_conf: dict[str, str]
    timeout_s: float


def with_driver_memory(spark_conf: dict[str, str]) -> dict[str, str]:
    """``spark_conf`` with :data:`DRIVER_MEMORY` unless it names a driver memory itself."""
    key, value = DRIVER_MEMORY
    return {key: value, **spark_conf}


async def measure_upsert(bench: UpsertBench, settings: RunSettings, work: Path,
                         say: Callable[[str], None]) -> dict[str, Any]:
    updating = bench.update_rps > 0 and bench.update_seconds > 0
    settings = replace(settings, spark_conf=with_driver_memory(settings.spark_conf))
    result: dict[str, Any] = {
        "mode": "upsert",
        "records": bench.rows,
        "settings": {"record_bytes": settings.record_bytes, "participants": [1],
                     "interval_ms": settings.interval_ms, "flush_records": settings.flush_records,
                     "spark_conf": settings.spark_conf, "partitions": UPSERT_PARTITIONS,
                     "upsert_rows": bench.rows, "compare_insert": bench.compare_insert,
                     "update_rps": bench.update_rps if updating else None,
                     "update_seconds": bench.update_seconds if updating else None},
        "machine": machine_facts(),
    }
    async with bench_broker(False, work) as broker:
        result["settings"]["broker"] = broker.name
        produced = await produce(broker.bootstrap, TOPIC, bench.rows, settings.record_bytes,
                                 partitions=UPSERT_PARTITIONS, keyed=True)
        result["produced"] = {"seconds": round(produced.seconds, 2), "keyed": True,
                              "avg_record_bytes": round(produced.bytes / max(1, bench.rows), 1),
                              "end_offsets": {str(k): v for k, v in sorted(produced.end_offsets.items())}}
        say(f"produced {bench.rows:,} keyed records ({produced.bytes / 2**20:,.0f} MiB) into "
            f"{UPSERT_PARTITIONS} partitions in {produced.seconds:.1f} s")

        def run(mode: str, updates: UpdateLoad | None) -> SinkRun:
            return SinkRun(work, broker.bootstrap, TOPIC, produced, 1,
                           interval_ms=settings.interval_ms, flush_records=settings.flush_records,
                           spark_conf=settings.spark_conf, timeout_s=settings.timeout_s,
                           record_bytes=settings.record_bytes, broker_pid=broker.pid,
                           write_mode=mode, label=mode, updates=updates)

        runs: list[SinkResult] = []
        insert: SinkResult | None = None
        if bench.compare_insert:
            insert = await run("insert", None).run()
            runs.append(insert)
            result["sink_1"] = insert.details()
            say(f"insert mode, 1 participant: {insert.rps:,.0f} records/s ({insert.commits} commits)")
        load = (UpdateLoad(bench.update_rps, bench.update_seconds, bench.rows, produced.seed)
                if updating else None)
        upsert = await run("upsert", load).run()
        runs.append(upsert)
        result["upsert_1"] = upsert.details()
        say(f"upsert mode, 1 participant, every key new: {upsert.rps:,.0f} records/s "
            f"({upsert.commits} commits)")
    result["sink_rps_1"] = round(insert.rps) if insert is not None else None
    result["upsert_rps_1"] = round(upsert.rps)
    result["upsert_vs_insert"] = (round(upsert.rps / insert.rps, 3)
                                  if insert is not None and insert.rps > 0 else None)
    if insert is not None:
        say(f"upsert_rps_1 / sink_rps_1 = {result['upsert_vs_insert']}")
    _update_keys(result, upsert.updates, say)
    peaks = [x for r in runs for x in r.peak_rss_mb]
    result["participant_peak_rss_mb"] = max(peaks) if peaks else None
    result["committed_records_ok"] = all(r.committed_records == bench.rows for r in runs)
    for r in runs:
        if r.committed_records != bench.rows:
            log.warning("%d records committed, %d produced", r.committed_records, bench.rows)
    result["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    result["targets"] = upsert_targets(result)
    return result


def _update_keys(result: dict[str, Any], updates: UpdateResult | None,
                 say: Callable[[str], None]) -> None:
    """The update phase's numbers at the top level of FILE.json (None: no phase)."""
    result["updates"] = asdict(updates) if updates is not None else None
    result["merge_mb_per_s"] = updates.merge_mb_per_s if updates is not None else None
    result["write_amplification"] = updates.write_amplification if updates is not None else None
    result["update_latency_p50_s"] = updates.visible_p50_s if updates is not None else None
    result["update_latency_p99_s"] = updates.visible_p99_s if updates is not None else None
    latencies = updates.commit_latencies_s if updates is not None else []
    result["update_commit_latency_p50_s"] = percentile(latencies, 50)
    result["update_commit_latency_p99_s"] = percentile(latencies, 99)
    if updates is not None:
        say(f"updates {updates.sent_rps:,.0f}/s (target {updates.target_rps:,}) for "
            f"{updates.records:,} updates: produce -> visible p50 {updates.visible_p50_s} s, "
            f"p99 {updates.visible_p99_s} s; {updates.commits} commits; merge "
            f"{updates.merge_mb_per_s} MB/s; write amplification {updates.write_amplification}")


def upsert_targets(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The issue's upsert targets on this run (``met`` is None when not measured). The
    update rate actually sent is judged too: a p99 under a lighter load proves nothing."""
    ratio = result.get("upsert_vs_insert")
    p99 = result.get("update_latency_p99_s")
    updates = result.get("updates") or {}
    sent, target = updates.get("sent_rps"), updates.get("target_rps")
    bound = result["settings"]["interval_ms"] / 1000 + 30
    return {
        "upsert_rps_1 >= 0.5 x sink_rps_1 (keyed insert-only)": {
            "value": ratio, "met": None if ratio is None else ratio >= 0.5},
        f"update produce -> visible p99 <= interval + 30 ({bound:g} s)": {
            "value": p99, "met": None if p99 is None else p99 <= bound},
        "updates sent >= 0.95 x --update-rps": {
            "value": sent, "met": None if sent is None or not target else sent >= 0.95 * target},
    }
