"""``hudi-sink bench`` end to end on a tiny backlog: every documented key of FILE.json is
there with a sane value, the sink committed exactly the records produced, and a usage error
exits 2. The numbers themselves are not judged here (a loaded CI machine), only their shape."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pipeline import HUDI_SINK

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

RECORDS = 5000


@pytest.mark.long  # a whole bench run (Spark, two sink runs): scripts/long-tests.sh
def test_bench_writes_every_key_with_sane_values(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [HUDI_SINK, "bench", "--records", str(RECORDS), "--participants", "1", "--out", str(out),
         "--work-dir", str(tmp_path), "--steady-rps", "400", "--steady-seconds", "6"],
        capture_output=True, text=True, timeout=170,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())

    for key in ("consume_only_rps", "arrow_baseline_rps", "sink_rps_1"):
        assert isinstance(result[key], int) and result[key] > 0, (key, result[key])
    assert result["sink_rps_2"] is None  # not asked for: present, and says so
    assert result["sink_rps_1"] <= result["consume_only_rps"]
    p50, p99 = result["commit_latency_p50_s"], result["commit_latency_p99_s"]
    assert 0 < p50 <= p99 < 120
    assert result["commit_latency_source"] == "steady"
    steady = result["steady"]
    assert steady["participants"] == 1 and steady["uncovered"] == 0
    assert steady["records"] == pytest.approx(400 * 6, rel=0.1)
    assert steady["commit_latencies_s"] and result["commit_latency_p99_s"] == max(
        steady["commit_latencies_s"])
    assert 0 < result["visible_latency_p50_s"] <= result["visible_latency_p99_s"] < 120
    assert 0 < result["backlog_commit_latency_p99_s"] < 120
    assert 100 < result["participant_peak_rss_mb"] < 16_000  # Python + a JVM, in MB
    assert result["sink_1"]["committed_records"] == RECORDS
    assert result["sink_1"]["commits"] == len(result["sink_1"]["commit_latencies_s"]) >= 1
    assert result["committed_records_ok"] is True
    machine = result["machine"]
    assert machine["cpu_count"] >= 1 and machine["memory_total_mb"] > 0
    assert machine["versions"]["pyspark"] and machine["versions"]["aiokafka"]
    assert len(machine["load_average_start"]) == 3
    assert set(result["targets"]) and all("met" in t for t in result["targets"].values())
    assert result["produced"]["avg_record_bytes"] == pytest.approx(1024, rel=0.05)
    assert "| consume only (aiokafka) |" in done.stdout  # the markdown table
    assert not list(tmp_path.glob("hudi-sink-bench-*")), "scratch directory left behind"


def test_bench_usage_errors_exit_2(tmp_path: Path) -> None:
    for args, named in ((["--participants", "0"], "--participants"),
                        (["--participants", "x"], "--participants"),
                        (["--steady-rps", "-1"], "--steady-rps")):
        done = subprocess.run([HUDI_SINK, "bench", "--records", "10", "--out",
                               str(tmp_path / "r.json"), *args],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, (args, done.stderr)
        assert named in done.stderr
    done = subprocess.run([HUDI_SINK, "bench", "--records", "10"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "--out" in done.stderr
