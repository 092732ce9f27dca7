"""Issue 27's admin-surface and redaction lines through the contract:

- 20 concurrent ``GET /deletions/dlq`` against a real deleter on the session broker run one
  read of the DLQ topic (``hudi_sink_deletion_dlq_scans_total``) and all get its answer;
  ``limit`` bounds an answer;
- ``hudi-sink config check`` (the installed command) prints none of the secret kinds the
  review listed, and ``HUDI_SINK__ADMIN__TOKEN=null`` exits 2 naming the key;
- a participant whose ``spark.master`` is ``sc://…;token=…`` logs the master with the token
  masked;
- ``hudi-sink dev`` itself (loopback, no token, ``allow_unauthenticated``) refuses a
  cross-origin ``text/plain`` POST to ``/transactions/commit`` and a rebound ``Host``, and
  takes the same POST from curl.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from aiokafka import AIOKafkaProducer
from deleter_harness import T1, deleter, sink_config
from eventually import eventually
from pipeline import HTTP, HUDI_SINK, Pipeline

from hudi_sink.cli.broker import EmbeddedBroker, free_port
from hudi_sink.cli.dev import DEFAULT_DEV_CONFIG
from hudi_sink.shared.deletion.intent import DeletionReason
from hudi_sink.shared.kafka.connection import producer_options

pytestmark = pytest.mark.timeout(180)

SCANS = "hudi_sink_deletion_dlq_scans_total"


def _scans(metrics_text: str) -> float:
    for line in metrics_text.splitlines():
        if line.startswith(f"{SCANS} "):
            return float(line.split()[1])
    raise AssertionError(f"no {SCANS} in /metrics")


async def test_concurrent_dlq_listings_share_one_bounded_scan(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    config = sink_config(broker, unique_name, tmp_path / "t")
    async with deleter(broker, unique_name, tmp_path / "t", config=config) as (h, _table):
        producer = AIOKafkaProducer(**producer_options(config.kafka, "test-dlq"))
        await producer.start()
        try:
            for i in range(3):
                intent = h.intent(f"{h.base}/de/f{i}.parquet", DeletionReason.ABORTED_INSTANT, T1)
                await producer.send_and_wait(config.deletion_dlq_topic, intent.encode())
        finally:
            await producer.stop()
        assert _scans((await h.http.get("/metrics")).text) == 0

        answers = await asyncio.gather(*(h.http.get("/deletions/dlq") for _ in range(20)))
        assert [a.status_code for a in answers] == [200] * 20
        bodies = [a.json() for a in answers]
        assert all(body == bodies[0] for body in bodies)
        assert sorted(e["file_path"] for e in bodies[0]) == [f"{h.base}/de/f{i}.parquet" for i in range(3)]
        assert _scans((await h.http.get("/metrics")).text) == 1, "20 concurrent GETs, one scan"

        limited = await h.http.get("/deletions/dlq", params={"limit": 2})
        assert [e["offset"] for e in limited.json()] == [e["offset"] for e in bodies[0]][:2]
        assert _scans((await h.http.get("/metrics")).text) == 2, "a later GET reads afresh"
        assert (await h.http.get("/deletions/dlq", params={"limit": 0})).status_code == 422


SECRETS = {
    "storage_options": {
        "azure_storage_master_key": "azure-master-SECRET", "azure_storage_account_key": "azure-acct-SECRET",
        "sas_token": "sv=2022-11-02&ss=b&sig=sas-sig-SECRET", "aws_session_token": "session-SECRET",
        "aws_secret_access_key": "aws-SECRET", "aws_endpoint_url": "http://minio:minio-pw-SECRET@minio:9000",
    },
    "spark_conf": {
        "spark.hadoop.fs.s3a.encryption.key": "ssec-SECRET",
        "spark.hadoop.fs.s3a.server-side-encryption.key": "ssec-old-SECRET",
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net": "hadoop-azure-SECRET",
        "spark.hadoop.fs.azure.sas.fixed.token": "hadoop-sas-SECRET",
        "spark.hadoop.fs.gs.auth.service.account.private.key": "gcs-private-SECRET",
    },
}


def test_config_check_redacts_every_secret_kind_and_refuses_a_null_token(tmp_path: Path) -> None:
    config = tmp_path / "sink.yaml"
    config.write_text(yaml.safe_dump({
        "name": "redact",
        "kafka": {"bootstrap_servers": "kafka:9093", "security_protocol": "SASL_SSL",
                  "sasl_mechanism": "PLAIN", "sasl_plain_username": "sink",
                  "sasl_plain_password": "sasl-SECRET"},
        "table": {"base_path": "s3://bucket/redact", "storage_options": SECRETS["storage_options"]},
        "avro": {"registry_url": "https://reg:reg-url-SECRET@registry:8081",
                 "registry_password": "reg-pw-SECRET"},
        "spark": {"master": "sc://spark-connect:15002/;token=connect-SECRET;use_ssl=true",
                  "conf": SECRETS["spark_conf"]},
    }))
    env = {**os.environ, "HUDI_SINK__ADMIN__TOKEN": "admin-SECRET\n"}
    for fmt in ([], ["--json"]):
        result = subprocess.run([HUDI_SINK, "config", "check", "--config", str(config), *fmt],
                                capture_output=True, text=True, timeout=60, env=env)
        assert result.returncode == 0, result.stderr
        shown = result.stdout + result.stderr
        assert "SECRET" not in shown, [line for line in shown.splitlines() if "SECRET" in line]
        assert "sc://spark-connect:15002/;token=***;use_ssl=true" in shown
        assert "https://reg:***@registry:8081" in shown and "http://minio:***@minio:9000" in shown
        assert "azure_storage_master_key" in shown and "fs.s3a.encryption.key" in shown

    refused = subprocess.run([HUDI_SINK, "config", "check", "--config", str(config)],
                             capture_output=True, text=True, timeout=60,
                             env={**env, "HUDI_SINK__ADMIN__TOKEN": "null"})
    assert refused.returncode == 2
    assert "admin.token" in refused.stderr and "HUDI_SINK__ADMIN__TOKEN is 'null'" in refused.stderr


def test_a_participant_logs_its_spark_connect_master_without_the_token(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """Nothing listens at the ``sc://`` address: the participant logs where it goes, then
    fails to get there; its whole log (our lines, tracebacks, other libraries' lines) must
    not hold the token."""
    master = f"sc://127.0.0.1:{free_port()}/;token=connect-token-SECRET;use_ssl=false"
    pipeline = Pipeline(tmp_path, f"sct{uuid.uuid4().hex[:8]}", broker.bootstrap,
                        overrides={"spark": {"master": master, "conf": {}}})
    with pipeline:
        pipeline.produce(0)  # creates the data topic
        participant = pipeline.start("participant")
        eventually(lambda: "starting SparkSession" in participant.log_path.read_text(errors="replace"),
                   120, "the participant to start its Spark session")
        pipeline.kill(participant)
        log = participant.log_path.read_text(errors="replace")
    assert "SECRET" not in log, [line for line in log.splitlines() if "SECRET" in line]
    assert "sc://127.0.0.1:" in log and ";token=***;use_ssl=false" in log


def test_hudi_sink_dev_refuses_cross_origin_posts(tmp_path: Path) -> None:
    """The real ``hudi-sink dev`` (its own embedded broker, coordinator, participant and
    deleter processes, no token): a page's ``text/plain`` POST and a rebound ``Host`` are
    refused and change nothing; curl's POST ends the open transaction; Ctrl-C leaves no
    inflight and no rolled-back instant."""
    config = tmp_path / "dev.yaml"
    config.write_text(yaml.safe_dump({
        **DEFAULT_DEV_CONFIG, "name": "devorigin",
        "kafka": {"bootstrap_servers": f"127.0.0.1:{free_port()}", "topics": ["devorigin-orders"],
                  "session_timeout_ms": 6000},
        "transaction": {"interval_ms": 600000, "write_status_timeout_ms": 60000},
        "admin": {"port": free_port()},  # no host: dev binds 127.0.0.1
        "spark": {"master": "local[1]", "conf": {"spark.driver.memory": "1g"}},
    }))
    out = tmp_path / "dev.out"
    with out.open("wb") as sink:
        dev = subprocess.Popen([HUDI_SINK, "dev", "--config", str(config), "--records", "10"],
                               cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT)
    try:
        started = eventually(lambda: re.search(r"coordinator started \(admin (http://\S+),",
                                               out.read_text()), 120, "dev's coordinator")
        url = started.group(1)
        assert url.startswith("http://127.0.0.1:")
        current = eventually(lambda: (c := HTTP.get(f"{url}/transactions/current").json())
                             ["phase"] == "started" and c, 120, "an open transaction")

        forged = HTTP.post(f"{url}/transactions/commit", content=b"commit=1",
                           headers={"Origin": "http://evil.example", "Content-Type": "text/plain"})
        assert forged.status_code == 403 and "cross-origin" in forged.json()["detail"]
        port = url.rsplit(":", 1)[1]
        rebound = HTTP.post(f"{url}/transactions/commit",
                            headers={"Host": f"evil.example:{port}",
                                     "Origin": f"http://evil.example:{port}"})
        assert rebound.status_code == 403 and "loopback" in rebound.json()["detail"]
        still = HTTP.get(f"{url}/transactions/current").json()
        assert still["commit_time"] == current["commit_time"] and still["phase"] == "started"

        accepted = HTTP.post(f"{url}/transactions/commit")  # curl: no Origin
        assert accepted.status_code == 202
        assert accepted.json()["commit_time"] == current["commit_time"]
        eventually(lambda: "all 10 records committed" in out.read_text(), 240, "the demo's records")
        eventually(lambda: HTTP.get(f"{url}/transactions/current").json()["phase"] == "started",
                   60, "the next instant open")  # what Ctrl-C finds
    finally:
        dev.send_signal(signal.SIGINT)
        dev.wait(timeout=150)
    assert dev.returncode == 0, out.read_text()[-3000:]
    # The stop drained the open instant (the coordinator first, while the participant ran):
    # nothing inflight, nothing rolled back.
    shown = subprocess.run([HUDI_SINK, "table", "show", "--path", ".hudi-sink-dev/warehouse/orders"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "10 records" in shown.stdout, shown.stdout + shown.stderr
    assert "inflight" not in shown.stdout and "rolled_back" not in shown.stdout, shown.stdout
