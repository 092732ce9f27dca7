"""``hudi-sink bench --records N --out FILE.json``: one run, every number from the same
machine in the same conditions.

1. An embedded broker; N records (~``record_bytes`` of JSON, demo schema) produced into 4
   partitions before any timing starts.
2. Consume only (aiokafka), then consume + decode + pyarrow Parquet (no Spark).
3. The sink end to end for each participant count (fresh table, sink name and groups; the
   same topic), see :mod:`.sink_run`.
4. With ``--anchors``: everything above on Apache Kafka instead (:mod:`.brokers`), then
   Apache Iceberg's and Apache Hudi's Kafka Connect sinks on the same records (:mod:`.anchors`).
5. FILE.json (``consume_only_rps``, ``arrow_baseline_rps``, ``sink_rps_<P>``, commit latency
   p50/p99, ``participant_peak_rss_mb``, machine facts, targets, ``anchors``) and a markdown
   table.

``--mode upsert`` measures keyed writes instead (:mod:`.upsert`); ``insert`` is the above.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from hudi_sink.cli.bench.anchors import ANCHORS, AnchorSetup, run_anchors
from hudi_sink.cli.bench.baselines import arrow_baseline, consume_only
from hudi_sink.cli.bench.brokers import bench_broker
from hudi_sink.cli.bench.data import BENCH_SCHEMA, produce
from hudi_sink.cli.bench.report import (
    machine_facts,
    markdown_table,
    percentile,
    targets,
    tree_cpu_seconds,
    upsert_table,
)
from hudi_sink.cli.bench.sink_run import SinkResult, SinkRun
from hudi_sink.cli.bench.steady import SteadyLoad
from hudi_sink.cli.bench.upsert import RunSettings, UpsertBench, measure_upsert
from hudi_sink.shared.config.settings import TransactionConfig
from hudi_sink.shared.schema.table_schema import TableSchema

__all__ = ["BenchOptions", "run_bench"]

log = logging.getLogger("hudi_sink.bench")

DEFAULT_FLUSH_RECORDS: int = TransactionConfig.model_fields["flush_records"].default
"""The Arrow baseline's file size when ``--flush-records`` is not given: the sink's own
default, taken from the config model so the two cannot drift apart."""


@dataclass(frozen=True)
class BenchOptions:
    records: int
    out: Path
    record_bytes: int = 1024
    participants: tuple[int, ...] = (1, 2)
    interval_ms: int = 2000
    flush_records: int | None = None
    """None: the sink's default."""
    spark_conf: tuple[tuple[str, str], ...] = ()
    work_dir: Path | None = None
    keep: bool = False
    timeout_s: float = 1200
    steady_rps: int = 5000
    steady_seconds: float = 30
    """The steady-rate phase after the first sink run's backlog (0 seconds: none)."""
    anchors: bool = False
    small_file_bytes: int | None = None
    """``table.small_file_bytes`` of the insert runs (None: the sink's default; 0: no
    write-time file sizing, the A/B of what sizing costs a backlog)."""
    """Run on Apache Kafka and measure Iceberg's and Hudi's Kafka Connect sinks beside ours."""
    mode: str = "insert"
    """``upsert``: the keyed bench of :mod:`.upsert` (``upsert`` holds its sizes; ``records``,
    ``participants``, the steady phase and ``anchors`` are insert mode's)."""
    upsert: UpsertBench = UpsertBench()

    @property
    def steady(self) -> SteadyLoad | None:
        if self.steady_seconds <= 0 or self.steady_rps <= 0:
            return None
        return SteadyLoad(self.steady_rps, self.steady_seconds)


def _say(text: str) -> None:
    print(text, flush=True)


async def _measure(opts: BenchOptions, work: Path) -> dict[str, Any]:
    result: dict[str, Any] = {
        "records": opts.records,
        "settings": {"record_bytes": opts.record_bytes, "participants": list(opts.participants),
                     "interval_ms": opts.interval_ms, "flush_records": opts.flush_records,
                     "spark_conf": dict(opts.spark_conf), "partitions": 4,
                     "small_file_bytes": opts.small_file_bytes,
                     "steady_rps": opts.steady_rps if opts.steady else None,
                     "steady_seconds": opts.steady_seconds if opts.steady else None},
        "machine": machine_facts(),
    }
    async with bench_broker(opts.anchors, work) as broker:
        result["settings"]["broker"] = broker.name
        topic = "bench-orders"
        produced = await produce(broker.bootstrap, topic, opts.records, opts.record_bytes)
        result["produced"] = {"seconds": round(produced.seconds, 2),
                              "avg_record_bytes": round(produced.bytes / max(1, opts.records), 1),
                              "end_offsets": {str(k): v for k, v in sorted(produced.end_offsets.items())}}
        _say(f"produced {opts.records:,} records ({produced.bytes / 2**20:,.0f} MiB) "
             f"in {produced.seconds:.1f} s")

        broker_before = tree_cpu_seconds(broker.pid)
        rate = await consume_only(broker.bootstrap, topic, opts.records)
        broker_cpu = tree_cpu_seconds(broker.pid) - broker_before
        result["consume_only_rps"] = round(rate.rps)
        result["consume_only_cpu_us_per_record"] = round(rate.cpu_seconds * 1e6 / rate.records, 1)
        result["consume_only_broker_cpu_us_per_record"] = round(broker_cpu * 1e6 / rate.records, 1)
        _say(f"consume only: {rate.rps:,.0f} records/s")

        schema = TableSchema.parse(BENCH_SCHEMA, table_name="bench", record_key_field="id",
                                   partition_field="country", precombine_field="ts")
        rate = await arrow_baseline(broker.bootstrap, topic, opts.records, schema,
                                    opts.flush_records or DEFAULT_FLUSH_RECORDS, work)
        result["arrow_baseline_rps"] = round(rate.rps)
        result["arrow_baseline_cpu_us_per_record"] = round(rate.cpu_seconds * 1e6 / rate.records, 1)
        _say(f"consume + decode + pyarrow Parquet: {rate.rps:,.0f} records/s")

        runs: list[SinkResult] = []
        for n, count in enumerate(opts.participants):
            run = SinkRun(work, broker.bootstrap, topic, produced, count,
                          interval_ms=opts.interval_ms, flush_records=opts.flush_records,
                          spark_conf=dict(opts.spark_conf), timeout_s=opts.timeout_s,
                          small_file_bytes=opts.small_file_bytes,
                          steady=opts.steady if n == 0 else None, record_bytes=opts.record_bytes,
                          broker_pid=broker.pid)
            outcome = await run.run()
            runs.append(outcome)
            result[f"sink_rps_{count}"] = round(outcome.rps)
            result[f"sink_{count}"] = outcome.details()
            if outcome.committed_records != opts.records:
                log.warning("%d participant(s): %d records committed, %d produced", count,
                            outcome.committed_records, opts.records)
            _say(f"sink, {count} participant(s): {outcome.rps:,.0f} records/s "
                 f"({outcome.commits} commits, peak RSS {max(outcome.peak_rss_mb):,.0f} MB)")
            if outcome.steady is not None:
                result["steady"] = {"participants": count, **asdict(outcome.steady)}
                _say(f"steady {outcome.steady.sent_rps:,.0f} records/s: produce -> visible p99 "
                     f"{outcome.steady.visible_p99_s} s")
        if opts.anchors:
            result["anchors"] = await _anchors(opts, work, broker.bootstrap, produced.seed,
                                               broker.unavailable)
    for key in ("sink_rps_1", "sink_rps_2"):
        result.setdefault(key, None)
    _latencies(result, runs)
    peaks = [x for run in runs for x in run.peak_rss_mb]
    result["participant_peak_rss_mb"] = max(peaks) if peaks else None
    result["committed_records_ok"] = all(r.committed_records == opts.records for r in runs)
    result["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    result["targets"] = targets(result)
    return result


async def _anchors(opts: BenchOptions, work: Path, bootstrap: str, seed: str,
                   unavailable: str | None) -> dict[str, dict[str, Any]]:
    if unavailable is not None:  # Connect needs the real Kafka, not the embedded broker
        return {a.key: {"title": a.title, "connector": a.connector_class, "error": unavailable}
                for a in ANCHORS}
    anchors = await run_anchors(AnchorSetup(
        bootstrap=bootstrap, work=work, records=opts.records, record_bytes=opts.record_bytes,
        seed=seed, interval_ms=opts.interval_ms, steady=opts.steady, timeout_s=opts.timeout_s))
    for key, anchor in anchors.items():
        _say(f"anchor {key}: " + (f"could not run: {anchor['error']}" if anchor["error"] else
                                  f"{anchor['rps'] or 0:,} records/s ({anchor['commits']} commits)"))
    return anchors


def _latencies(result: dict[str, Any], runs: list[SinkResult]) -> None:
    """Commit latency under the steady rate when measured (what a caught-up sink's users
    see), else over the backlog runs; the backlog's own numbers are always kept beside it
    (there, latency mostly measures how much was buffered at each END_COMMIT)."""
    backlog = [x for run in runs for x in run.commit_latencies_s]
    result["backlog_commit_latency_p50_s"] = percentile(backlog, 50)
    result["backlog_commit_latency_p99_s"] = percentile(backlog, 99)
    steady = next((run.steady for run in runs if run.steady is not None), None)
    measured = steady.commit_latencies_s if steady is not None else backlog
    result["commit_latency_source"] = "steady" if steady is not None else "backlog"
    result["commit_latency_p50_s"] = percentile(measured, 50)
    result["commit_latency_p99_s"] = percentile(measured, 99)
    result["visible_latency_p50_s"] = steady.visible_p50_s if steady is not None else None
    result["visible_latency_p99_s"] = steady.visible_p99_s if steady is not None else None


def _run(opts: BenchOptions, work: Path) -> dict[str, Any]:
    if opts.mode == "upsert":
        settings = RunSettings(record_bytes=opts.record_bytes, interval_ms=opts.interval_ms,
                               flush_records=opts.flush_records, spark_conf=dict(opts.spark_conf),
                               timeout_s=opts.timeout_s)
        return asyncio.run(measure_upsert(opts.upsert, settings, work, _say))
    return asyncio.run(_measure(opts, work))


def run_bench(opts: BenchOptions) -> int:
    if opts.mode not in ("insert", "upsert"):
        raise ValueError(f"--mode must be insert or upsert, got {opts.mode!r}")
    if opts.mode == "upsert" and opts.upsert.rows < 1:
        raise ValueError("--upsert-rows must be at least 1")
    if opts.mode == "insert" and (opts.records < len(opts.participants) or opts.records < 4):
        raise ValueError("--records must be at least 4")
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="hudi-sink-bench-", dir=opts.work_dir))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per readiness poll
    try:
        result = _run(opts, work)
        result["wall_seconds"] = round(time.monotonic() - started, 1)
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
                             + b"\n")
        _say("")
        _say(upsert_table(result) if opts.mode == "upsert" else markdown_table(result))
        _say(f"\nwritten {opts.out} ({result['wall_seconds']} s)")
    finally:
        if opts.keep:
            _say(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0
