"""Skipping a poison record, through the contract (README "Skipping a poison record").

``errors.tolerance: fail`` stops partition 0 at its bad record (commit metadata,
``/partitions``, metrics, ``GET /offsets``; the other partitions keep committing and further
transactions leave it there). ``POST /offsets`` needs the admin token (401 without, 403 with a
wrong one); with it, past the bad record, the sink resumes: the table holds every other record
exactly once (read back with hudi-rs) and ``hudi-sink table history`` shows the change with
its reason.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from eventually import eventually
from pipeline import HTTP, HUDI_SINK, Pipeline

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(600)

TOKEN = "offsets-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
REASON = "poison record at offset 100 (ticket OPS-17)"


async def _produce_garbage(bootstrap: str, topic: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await (await producer.send(topic, value=b"garbage", partition=0))
    finally:
        await producer.stop()


def test_a_poison_record_stops_its_partition_until_post_offsets_skips_it(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "errors": {"tolerance": "fail"},
        "admin": {"host": "127.0.0.1", "port": 0, "token": TOKEN}})
    topic = pipeline.topic
    pipeline.produce(400)  # 100 per partition, offsets 0..99
    asyncio.run(_produce_garbage(broker.bootstrap, topic))  # p0 offset 100
    pipeline.produce(400)  # p0 offsets 101..200, others 100..199
    try:
        coordinator, participant = pipeline.start_ready("coordinator", "participant")
        eventually(lambda: pipeline.latest_offsets() == {0: 100, 1: 200, 2: 200, 3: 200}, 240,
                   "partitions 1-3 complete, partition 0 stopped at its bad record", every_s=1)
        latest = pipeline.commit_metadata(pipeline.completed_commits()[-1])
        assert "offset 100" in latest["extraMetadata"]["hudi.sink.failed.partitions"]

        def failed_view() -> bool:
            views = HTTP.get(f"{participant.url}/partitions", headers=AUTH, timeout=5).json()
            return any(v["partition"] == 0 and v["failed"] for v in views)

        eventually(failed_view, 30, "partition 0 shown as failed in /partitions", every_s=0.2)
        metrics = HTTP.get(f"{participant.url}/metrics", timeout=5).text
        assert f'hudi_sink_partition_failed{{partition="0",topic="{topic}"}} 1.0' in metrics
        pipeline.wait_transactions(coordinator, 2)  # more transactions: still stopped there
        offsets = HTTP.get(f"{coordinator.url}/offsets", headers=AUTH, timeout=5).json()
        assert offsets["offsets"][f"{topic}:0"] == 100

        body = {"offsets": {f"{topic}:0": 101}, "reason": REASON}
        url = f"{coordinator.url}/offsets"
        assert HTTP.post(url, json=body, timeout=5).status_code == 401
        assert HTTP.post(url, json=body, timeout=5,
                          headers={"Authorization": "Bearer wrong"}).status_code == 403
        bad = HTTP.post(url, json={**body, "offsets": {f"{topic}:9": 1}}, headers=AUTH, timeout=5)
        assert bad.status_code == 422 and bad.json()["key"] == f"offsets.{topic}:9"
        assert pipeline.latest_offsets()[0] == 100  # refused requests changed nothing
        accepted = HTTP.post(url, json=body, headers=AUTH, timeout=30)
        assert accepted.status_code == 202, accepted.text

        pipeline.produce(400)  # after the change: p0 offsets 201..300, others 200..299
        eventually(lambda: pipeline.latest_offsets() == {0: 301, 1: 300, 2: 300, 3: 300}, 240,
                   "partition 0 resumed past its bad record", every_s=1)
        ids = pipeline.read().column("id").to_pylist()
        assert len(ids) == 1_200 and len(set(ids)) == 1_200  # every other record, exactly once

        last = HTTP.get(url, headers=AUTH, timeout=5).json()["last_request"]
        assert last["state"] == "applied" and last["request_id"] == accepted.json()["request_id"]
        shown = subprocess.run([HUDI_SINK, "table", "history", "--path", str(pipeline.base_path),
                                "--json", "--limit", "1000"], capture_output=True, text=True,
                               timeout=120, check=True)
        [change] = [h for h in json.loads(shown.stdout) if "offsets_set" in h]
        assert change["commit_time"] == last["commit_time"]
        assert change["offsets_set"] == {f"{topic}:0": {"from": 100, "to": 101}}
        assert change["reason"] == REASON and change["set_by"] == "rest"
        text = subprocess.run([HUDI_SINK, "table", "history", "--path", str(pipeline.base_path),
                               "--limit", "1000"], capture_output=True, text=True, timeout=120,
                              check=True).stdout
        assert f"{topic}:0 100 -> 101; reason: {REASON}" in text
    finally:
        pipeline.stop_all()
