"""End-to-end throughput: N records already in Kafka → committed in the Hudi table.

Starts the embedded broker, produces N records over 4 partitions, then starts a coordinator
and P participant processes and measures the time from "all services ready" to "the latest
commit covers every offset". Prints records/s and the participants' peak memory (VmHWM of
the Python process and its Spark JVM). Usage:

    .venv/bin/python bench/bench_pipeline.py [--records 200000] [--participants 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson
import yaml

from hudi_sink.cli.broker import EmbeddedBroker, free_port
from hudi_sink.cli.produce import produce_records
from hudi_sink.shared.config.settings import load_config
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.offsets import parse_offsets

HUDI_SINK = str(Path(sys.executable).with_name("hudi-sink"))


def _peak_rss_mb(pid: int) -> float:
    """VmHWM of a process and its children (the Spark JVM), in MB."""
    total = 0.0
    pids = [pid]
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        pids += [int(p) for p in children.read_text().split()]
    for one in pids:
        status = Path(f"/proc/{one}/status")
        if status.exists():
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) / 1024
    return total


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--participants", type=int, default=1)
    parser.add_argument("--flush-records", type=int, default=100_000)
    parser.add_argument("--interval-ms", type=int, default=2000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hudi-sink-bench-"))
    with EmbeddedBroker(log_path=work / "broker.log") as broker:
        config_path = work / "bench.yaml"
        config_path.write_text(yaml.safe_dump({
            "name": "bench",
            "kafka": {"bootstrap_servers": broker.bootstrap, "topics": ["bench-orders"],
                      "session_timeout_ms": 6000},
            "table": {"base_path": str(work / "table"), "name": "bench", "record_key_field": "id",
                      "partition_field": "country",
                      "schema": "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE, payload STRING"},
            "transaction": {"interval_ms": args.interval_ms, "write_status_timeout_ms": 300000,
                            "flush_records": args.flush_records},
            "admin": {"host": "127.0.0.1", "port": 0},
            "spark": {"master": "local[2]", "conf": {"spark.driver.memory": "2g"}},
        }))
        config = load_config(config_path)
        started = time.monotonic()
        asyncio.run(produce_records(config, args.records, 4))
        print(f"produced {args.records} records in {time.monotonic() - started:.1f} s")
        procs = []
        for role in ["coordinator"] + ["participant"] * args.participants:
            port = free_port()
            log = (work / f"{role}-{len(procs)}.log").open("wb")
            procs.append((role, port, subprocess.Popen(
                [HUDI_SINK, role, "--config", str(config_path), "--admin-port", str(port)],
                stdout=log, stderr=subprocess.STDOUT)))
        try:
            for _, port, _ in procs:
                while True:
                    try:
                        if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=2).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    time.sleep(0.2)
            ready = time.monotonic()
            want = args.records // 4
            timeline = work / "table" / layout.METAFOLDER
            while True:
                commits = sorted(timeline.glob(layout.timeline_file("*", layout.COMMIT_SUFFIX)))
                if commits:
                    extra = orjson.loads(commits[-1].read_bytes())["extraMetadata"]
                    offsets = parse_offsets(extra.get("kafka.commit.offsets", ""), ["bench-orders"])
                    if offsets and all(o >= want for o in offsets.values()):
                        break
                time.sleep(0.2)
            elapsed = time.monotonic() - ready
            rss = [_peak_rss_mb(p.pid) for role, _, p in procs if role == "participant"]
            print(f"committed {args.records} records in {elapsed:.1f} s after ready: "
                  f"{args.records / elapsed:,.0f} records/s "
                  f"({args.participants} participant(s), flush_records {args.flush_records})")
            print(f"participant peak memory (Python + Spark JVM): "
                  f"{', '.join(f'{r:.0f} MB' for r in rss)}")
        finally:
            for _, _, process in procs:
                process.terminate()
            for _, _, process in procs:
                process.wait(timeout=60)
    print(f"work dir: {work}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    sys.exit(main())
