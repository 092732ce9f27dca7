"""``hudi-sink bench --anchors`` without a JVM: the option's wiring and usage error, the report
of measured and failed anchors, Maven's failure turned into a reason line, when each record
became visible (real Parquet files), the Hudi timeline's files, the fall-back to the embedded
broker when Kafka cannot start, and an anchor that cannot run never stopping the bench.
The anchors themselves (Kafka Connect, Iceberg) run in tests/integration/test_bench_anchors.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_sink.cli import main as cli
from hudi_sink.cli.bench import anchors, brokers, command
from hudi_sink.cli.bench.connect import _maven_reason, pom_properties
from hudi_sink.cli.bench.lakes import HudiCommits, TableCommit, Visibility
from hudi_sink.cli.bench.report import markdown_table


def test_the_option_reaches_the_bench_and_is_off_by_default(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    seen: list[command.BenchOptions] = []
    monkeypatch.setattr(command, "run_bench", lambda opts: seen.append(opts) or 0)
    out = str(tmp_path / "r.json")
    assert cli.main(["bench", "--records", "10", "--out", out, "--anchors"]) == 0
    assert cli.main(["bench", "--records", "10", "--out", out]) == 0
    assert [opts.anchors for opts in seen] == [True, False]


def test_anchors_with_stages_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["bench", "--stages", "--anchors", "--records", "10"])
    assert exited.value.code == 2
    assert "--anchors" in capsys.readouterr().err


MAVEN_OUTPUT = (
    "\x1b[0m\x1b[0m[ERROR] Failed to execute goal on project hudi-connect: Could not resolve "
    "dependencies for project io.hudi-sink.bench:hudi-connect:pom:1: "
    "org.apache.hudi:hudi-kafka-connect-bundle:jar:1.0.2 was not found in "
    "https://repo.maven.apache.org/maven2 during a previous attempt. This failure was cached in "
    "the local repository and resolution is not reattempted until the update interval of "
    "central has elapsed or updates are forced -> [Help 1]\n[ERROR] \n[ERROR] To see the full "
    "stack trace of the errors, re-run Maven with the -e switch.\n"
)


def test_a_maven_failure_becomes_one_line_naming_the_missing_artifact() -> None:
    assert _maven_reason(MAVEN_OUTPUT) == (
        "org.apache.hudi:hudi-kafka-connect-bundle:jar:1.0.2 was not found in "
        "https://repo.maven.apache.org/maven2 (a failure Maven cached from an earlier attempt)")
    assert _maven_reason("something else went wrong\n\n") == "something else went wrong"


def test_the_versions_reported_are_the_ones_the_poms_pin() -> None:
    assert pom_properties("connect-runtime")["kafka.version"] == "4.3.1"
    for anchor in anchors.ANCHORS:
        assert pom_properties(anchor.directory)[anchor.version_property]


def _result(anchor_results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "records": 1000, "settings": {"record_bytes": 1024, "interval_ms": 2000, "flush_records": None,
                                      "participants": [1], "broker": "Apache Kafka 4.3.1 (KRaft, 1 node)"},
        "machine": {"cpu_count": 2, "memory_total_mb": 1000, "usable_cpus": 2.0,
                    "load_average_start": [0, 0, 0], "versions": {"hudi-sink": "0.1.0", "pyspark": "4.3.0"}},
        "sink_rps_1": 900, "visible_latency_p50_s": 4.0, "visible_latency_p99_s": 6.0,
        "sink_1": {"commits": 3, "all_cpu_us_per_record": 90.0, "participant_cpu_us_per_record": 80.0,
                   "coordinator_cpu_us_per_record": 2.0, "broker_cpu_us_per_record": 8.0,
                   "cpu_bound_rps": 20000},
        "targets": {}, "anchors": anchor_results,
    }


def test_the_report_puts_each_anchor_beside_the_sink_or_says_why_it_did_not_run() -> None:
    table = markdown_table(_result({
        "iceberg": {"title": "Apache Iceberg Kafka Connect sink", "error": None,
                    "versions": {"kafka_connect": "4.3.1", "iceberg": "1.12.0"}, "rps": 700,
                    "commits": 4, "visible_latency_p50_s": 1.5, "visible_latency_p99_s": 3.2,
                    "cpu_us_per_record": 300.0},
        "hudi": {"title": "Apache Hudi Kafka Connect sink", "versions": {"hudi": "1.0.2"},
                 "error": "Maven could not resolve bench/java/hudi-connect/pom.xml: not found\nline 2"},
    }))
    lines = table.splitlines()
    assert "Anchors on Apache Kafka 4.3.1 (KRaft, 1 node), the same 1,000 records:" in lines
    assert ("| hudi-sink, 1 participant(s) | hudi-sink 0.1.0, pyspark 4.3.0 | 900 | 3 | 4 s / 6 s "
            "| 82 |") in lines
    assert ("| Apache Iceberg Kafka Connect sink (1 task) | kafka connect 4.3.1, iceberg 1.12.0 | 700 | 4 "
            "| 1.5 s / 3.2 s | 300 (Connect worker) |") in lines
    assert ("| Apache Hudi Kafka Connect sink | hudi 1.0.2 | could not run: Maven could not resolve "
            "bench/java/hudi-connect/pom.xml: not found | | | |") in lines
    assert lines[-1] == ("- Apache Hudi Kafka Connect sink could not run: Maven could not resolve "
                         "bench/java/hudi-connect/pom.xml: not found / line 2")
    without = {key: value for key, value in _result({}).items() if key != "anchors"}
    assert "Anchors on" not in markdown_table(without)


def _ids_file(path: Path, ids: list[str]) -> Path:
    pq.write_table(pa.table({"id": ids, "country": ["us"] * len(ids)}), path)
    return path


def test_each_record_is_visible_from_the_first_commit_holding_its_id(tmp_path: Path) -> None:
    seen = Visibility(backlog="run1", records=4)
    seen.add(TableCommit(10.0, (_ids_file(tmp_path / "a.parquet", ["run1-0000000000", "run1-0000000001"]),)))
    assert seen.backlog_done_at is None and seen.seen("run1") == 2
    # a rewritten file group carries 0 and 1 again: they stay visible from 10.0
    seen.add(TableCommit(12.0, (_ids_file(tmp_path / "b.parquet", ["run1-0000000000", "run1-0000000001",
                                                                   "run1-0000000002"]),)))
    seen.add(TableCommit(13.0, (_ids_file(tmp_path / "c.parquet", ["run1-0000000003", "s-0000000001",
                                                                   "s-0000000002"]),)))
    seen.add(TableCommit(15.0, (_ids_file(tmp_path / "d.parquet", ["run1-0000000003", "s-0000000000"]),)))
    assert seen.backlog_done_at == 13.0 and seen.commits_to_backlog == 3
    assert seen.first_seen["run1"] == {0: 10.0, 1: 10.0, 2: 12.0, 3: 13.0}
    # steady run "s" over 2 partitions: n -> partition n % 2, its (n // 2)-th record
    stamps = {0: [11.0, 12.5], 1: [12.0, 14.0]}  # n = 0, 2 | 1, 3
    assert sorted(seen.latencies("s", stamps, partitions=2)) == [0.5, 1.0, 4.0]  # n=3 never seen


def _hudi_commit(timeline: Path, instant: str, files: list[str]) -> None:
    stats = {"country=us": [{"path": f, "numWrites": 1} for f in files]}
    (timeline / f"{instant}.commit").write_bytes(orjson.dumps({"partitionToWriteStats": stats,
                                                               "extraMetadata": {}}))


def test_hudi_commits_list_the_files_each_commit_wrote_and_refuse_a_version_8_timeline(
        tmp_path: Path) -> None:
    timeline = tmp_path / "table" / ".hoodie"
    timeline.mkdir(parents=True)
    _hudi_commit(timeline, "20260101000000000", ["country=us/a.parquet"])
    commits = HudiCommits(tmp_path / "table", "orders")
    first = commits.poll()
    assert [c.files for c in first] == [(tmp_path / "table" / "country=us/a.parquet",)]
    _hudi_commit(timeline, "20260101000001000", ["country=us/b.parquet"])
    assert [c.files for c in commits.poll()] == [(tmp_path / "table" / "country=us/b.parquet",)]
    assert commits.poll() == []
    (timeline / "timeline").mkdir()
    with pytest.raises(RuntimeError, match="table version 8"):
        commits.poll()


async def test_kafka_that_cannot_start_leaves_the_bench_on_the_embedded_broker(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def refuse(directory: Path) -> Any:
        raise RuntimeError("no Java here")

    monkeypatch.setattr(brokers, "_start_kafka", refuse)
    async with brokers.bench_broker(True, tmp_path) as broker:
        assert broker.name == brokers.EMBEDDED and broker.pid is not None
        assert broker.unavailable == "Apache Kafka did not start: RuntimeError: no Java here"
        opts = command.BenchOptions(records=10, out=tmp_path / "r.json", anchors=True)
        result = await command._anchors(opts, tmp_path, broker.bootstrap, "seed", broker.unavailable)
    assert set(result) == {a.key for a in anchors.ANCHORS}
    assert all(r["error"] == broker.unavailable for r in result.values())


async def test_an_anchor_that_cannot_run_gets_a_reason_and_the_next_one_still_runs(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ran: list[str] = []

    def resolve(directory: str) -> list[str]:
        if directory == "hudi-connect":
            from hudi_sink.cli.bench.connect import AnchorUnavailable
            raise AnchorUnavailable("Maven could not resolve bench/java/hudi-connect/pom.xml: gone")
        return [directory]

    async def measure(anchor: anchors.Anchor, setup: anchors.AnchorSetup, runtime: list[str],
                      plugin: list[str]) -> dict[str, Any]:
        ran.append(anchor.key)
        raise OSError("disk full")

    monkeypatch.setattr(anchors.connect, "resolve_classpath", resolve)
    monkeypatch.setattr(anchors, "_measure", measure)
    setup = anchors.AnchorSetup(bootstrap="127.0.0.1:1", work=tmp_path, records=10, record_bytes=100,
                                seed="s", interval_ms=1000, steady=None, timeout_s=5)
    result = await anchors.run_anchors(setup)
    assert ran == ["iceberg"]
    assert result["iceberg"]["error"] == "OSError: disk full"
    assert result["hudi"]["error"] == "Maven could not resolve bench/java/hudi-connect/pom.xml: gone"
    assert result["hudi"]["versions"] == {"kafka_connect": "4.3.1", "hudi": "1.0.2"}


async def test_a_bench_without_anchors_runs_on_the_embedded_broker(tmp_path: Path) -> None:
    async with brokers.bench_broker(False, tmp_path) as broker:
        assert (broker.name, broker.unavailable) == (brokers.EMBEDDED, None)
        assert broker.pid is not None
