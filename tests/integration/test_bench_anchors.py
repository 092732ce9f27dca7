"""``hudi-sink bench --anchors`` for real: the whole bench on Apache Kafka 4.3.1, then Apache
Iceberg's Kafka Connect sink in a Connect 4.3.1 standalone worker on the same records, read
back from its table's own files; Apache Hudi's either measured the same way or reported with
the reason it could not run (here Maven Central does not serve its connect bundle). And a
connector whose task fails is reported as such, with the task's error, within seconds.
The numbers are not judged (a loaded machine), only that each is there and consistent."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest
from kafka_cluster import KafkaCluster
from pipeline import HUDI_SINK

from hudi_sink.cli.bench import anchors
from hudi_sink.cli.bench.connect import resolve_classpath
from hudi_sink.cli.bench.data import produce

pytestmark = [pytest.mark.spark, pytest.mark.long, pytest.mark.timeout(900)]

RECORDS = 3000


def test_bench_with_anchors_puts_iceberg_and_hudi_beside_the_sink(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [HUDI_SINK, "bench", "--anchors", "--records", str(RECORDS), "--participants", "1",
         "--out", str(out), "--work-dir", str(tmp_path), "--steady-rps", "300", "--steady-seconds", "5"],
        capture_output=True, text=True, timeout=850,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["settings"]["broker"] == "Apache Kafka 4.3.1 (KRaft, 1 node)"
    assert result["sink_1"]["committed_records"] == RECORDS and result["sink_rps_1"] > 0

    iceberg = result["anchors"]["iceberg"]
    assert iceberg["error"] is None, iceberg["error"]
    assert iceberg["versions"] == {"kafka_connect": "4.3.1", "iceberg": "1.12.0"}
    assert iceberg["committed_records"] == RECORDS  # every record, each id once at least
    assert iceberg["rows"] == iceberg["rows_expected"] == RECORDS + iceberg["steady"]["records"]
    assert iceberg["rps"] > 0 and iceberg["commits"] >= 1 and iceberg["seconds"] > 0
    assert 0 <= iceberg["start_up_s"] < 120  # submitted -> its consumer group held every partition
    assert iceberg["steady"]["uncovered"] == 0
    assert 0 < iceberg["visible_latency_p50_s"] <= iceberg["visible_latency_p99_s"] < 120
    assert iceberg["settings"]["connector"]["connector.class"] == anchors.ICEBERG_CLASS
    assert iceberg["cpu_us_per_record"] > 0 and iceberg["worker_hwm_rss_mb"] > 100

    hudi = result["anchors"]["hudi"]
    assert hudi["versions"] == {"kafka_connect": "4.3.1", "hudi": "1.0.2"}
    if hudi["error"] is not None:  # the reason, on its own line below the table
        assert f"- Apache Hudi Kafka Connect sink could not run: {hudi['error'].splitlines()[0]}" \
            in done.stdout
    else:
        assert hudi["committed_records"] == RECORDS and hudi["rows"] == hudi["rows_expected"]
    assert "| Apache Iceberg Kafka Connect sink (1 task) | kafka connect 4.3.1, iceberg 1.12.0 |" \
        in done.stdout
    assert "| hudi-sink, 1 participant(s) |" in done.stdout
    assert not list(tmp_path.glob("hudi-sink-bench-*")), "scratch directory left behind"


@pytest.mark.kafka
async def test_a_connector_task_that_fails_is_the_anchors_reason(kafka_broker: KafkaCluster,
                                                                 tmp_path: Path) -> None:
    iceberg = next(a for a in anchors.ANCHORS if a.key == "iceberg")

    def schemas_expected(*args: object) -> dict[str, str]:
        # JSON without a "schema"/"payload" envelope: Connect's converter fails the task
        return {**iceberg.configure(*args), "value.converter.schemas.enable": "true"}  # type: ignore[arg-type]

    broken = dataclasses.replace(iceberg, configure=schemas_expected)
    seed = (await produce(kafka_broker.bootstrap, "anchor-seed", 4, 200)).seed
    setup = anchors.AnchorSetup(bootstrap=kafka_broker.bootstrap, work=tmp_path, records=200,
                                record_bytes=200, seed=seed, interval_ms=1000, steady=None,
                                timeout_s=240)
    runtime = resolve_classpath("connect-runtime")
    result = await anchors._run_one(broken, setup, runtime, None)
    assert result["error"].startswith("the connector's task failed: "), result["error"]
    assert "DataException" in result["error"] or "schemas.enable" in result["error"], result["error"]
    assert "rps" not in result
