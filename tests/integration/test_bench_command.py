"""``hudi-sink bench`` end to end on a tiny backlog: every documented key of FILE.json is
there with a sane value, the sink committed exactly the records produced, and a usage error
exits 2; the same for ``--mode upsert`` (keyed backlog in both modes, then updates), whose
table afterwards holds one row per key. The numbers themselves are not judged here (a loaded
CI machine), only their shape."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow.compute as pc
import pytest
from hudi_java import rust_read
from pipeline import HUDI_SINK

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

RECORDS = 5000
UPSERT_ROWS = 400


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


@pytest.mark.long  # two sink runs and an update phase: scripts/long-tests.sh
@pytest.mark.timeout(300)  # 92 s on a quiet machine; a merge's cost grows with the groups it touches
def test_bench_upsert_mode_writes_its_keys_with_sane_values(tmp_path: Path) -> None:
    out = tmp_path / "upsert.json"
    done = subprocess.run(
        [HUDI_SINK, "bench", "--mode", "upsert", "--upsert-rows", str(UPSERT_ROWS),
         "--update-rps", "10", "--update-seconds", "2", "--out", str(out),
         "--work-dir", str(tmp_path), "--keep"],
        capture_output=True, text=True, timeout=280,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())

    assert result["mode"] == "upsert" and result["settings"]["partitions"] == 8
    assert result["produced"]["keyed"] is True
    assert isinstance(result["upsert_rps_1"], int) and result["upsert_rps_1"] > 0
    assert isinstance(result["sink_rps_1"], int) and result["sink_rps_1"] > 0
    assert result["upsert_vs_insert"] == pytest.approx(  # the same records: a ratio of durations
        result["sink_1"]["seconds"] / result["upsert_1"]["seconds"], rel=0.01)
    assert result["upsert_1"]["committed_records"] == result["sink_1"]["committed_records"] == UPSERT_ROWS
    assert result["committed_records_ok"] is True
    updates = result["updates"]
    assert updates["records"] == pytest.approx(10 * 2, abs=2) and updates["uncovered"] == 0
    assert updates["inserts"] == 0  # every update named a committed key: none became a new row
    assert 0 < updates["update_writes"] <= updates["records"] <= updates["rows_written"]
    assert updates["commits"] >= 1 and updates["commit_latencies_s"]
    assert result["write_amplification"] == pytest.approx(updates["rows_written"] / updates["records"],
                                                          abs=0.01)
    assert result["write_amplification"] >= 1
    assert 0 < updates["rewritten_bytes"] <= updates["bytes_written"]
    assert result["merge_mb_per_s"] > 0
    assert 0 < result["update_latency_p50_s"] <= result["update_latency_p99_s"] < 150
    assert 0 < result["update_commit_latency_p50_s"] <= result["update_commit_latency_p99_s"]
    assert set(result["targets"]) and all("met" in t for t in result["targets"].values())
    assert "| write amplification (rows written ÷ updates) |" in done.stdout

    # the table the updates went into: still one row per key, some of them a later version
    (work,) = tmp_path.glob("hudi-sink-bench-*")
    table = rust_read(str(work / "table-upsert1p"))
    assert table.num_rows == UPSERT_ROWS
    assert len(pc.unique(table["id"])) == UPSERT_ROWS
    updated = pc.sum(pc.greater_equal(pc.year(table["ts"]), 2027)).as_py()
    assert 0 < updated <= updates["update_writes"]


def test_bench_usage_errors_exit_2(tmp_path: Path) -> None:
    for args, named in ((["--records", "10", "--participants", "0"], "--participants"),
                        (["--records", "10", "--participants", "x"], "--participants"),
                        (["--records", "10", "--steady-rps", "-1"], "--steady-rps"),
                        (["--mode", "upsert", "--records", "10"], "--upsert-rows"),
                        (["--mode", "upsert", "--participants", "2"], "--participants"),
                        (["--mode", "upsert", "--anchors"], "--anchors"),
                        (["--mode", "upsert", "--upsert-rows", "0"], "--upsert-rows"),
                        (["--mode", "upsert", "--update-rps", "-5"], "--update-rps")):
        done = subprocess.run([HUDI_SINK, "bench", "--out", str(tmp_path / "r.json"), *args],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, (args, done.stderr)
        assert named in done.stderr
    done = subprocess.run([HUDI_SINK, "bench", "--records", "10"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "--out" in done.stderr
