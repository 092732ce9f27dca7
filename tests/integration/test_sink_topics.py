"""The sink's own topics, through the contract (a ``hudi-sink`` service against the embedded
broker): topics the sink creates take ``kafka.replication_factor`` (the broker reports the
replicas asked for), or the broker's default when it is unset, the DLQ Kafka Connect's
``errors.deadletterqueue.topic.replication.factor`` when set; with ``kafka.create_topics:
false`` a missing topic is exit 2 naming it, and existing topics start the service. (Kafka
Connect's error keys run in ``test_bad_records``, on its sink.)"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from eventually import eventually
from pipeline import HTTP, HUDI_SINK

from hudi_sink.cli.broker import EmbeddedBroker, free_port

pytestmark = pytest.mark.timeout(300)

SUFFIXES = ("control", "dlq", "deletion", "deletion-retry", "deletion-dlq")


async def _describe(bootstrap: str) -> dict[str, set[int]]:
    """Each topic's replica counts (all-topics metadata: naming one would create it)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return {entry["topic"]: {len(p["replicas"]) for p in entry["partitions"]}
                for entry in await admin.describe_topics(None) if entry["partitions"]}
    finally:
        await admin.close()


async def _create(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        await admin.close()


def _config(tmp_path: Path, name: str, bootstrap: str, errors: dict[str, Any] | None = None,
            **kafka: Any) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name,
        "errors": errors or {},
        "kafka": {"bootstrap_servers": bootstrap, "topics": [f"{name}-data"],
                  "startup_timeout_s": 20, **kafka},
        "table": {"base_path": str(tmp_path / name)},
        "admin": {"host": "127.0.0.1", "allow_unauthenticated": True},
    }))
    return path


def _run_until_ready(role: str, config: Path) -> None:
    """Start ``role``, wait until /ready, stop it (SIGTERM) with exit 0."""
    port = free_port()
    process = subprocess.Popen([HUDI_SINK, role, "--config", str(config), "--admin-port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"{role} exited {process.returncode}: {process.stdout.read()}")  # type: ignore[union-attr]
            try:
                return HTTP.get(f"http://127.0.0.1:{port}/ready", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        eventually(ready, 90, f"{role} ready", every_s=0.2)
        process.terminate()
        output, _ = process.communicate(timeout=60)
        assert process.returncode == 0, output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_created_topics_take_the_asked_replication_factor_and_create_topics_false_names_the_missing(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    asked, default = f"{unique_name}-rf", f"{unique_name}-df"
    for name in (asked, default):
        asyncio.run(_create(broker.bootstrap, f"{name}-data"))

    refused = subprocess.run(
        [HUDI_SINK, "deleter", "--config",
         str(_config(tmp_path, asked, broker.bootstrap, create_topics=False))],
        capture_output=True, text=True, timeout=90)
    assert refused.returncode == 2, refused.stderr
    assert "kafka.create_topics" in refused.stderr
    for suffix in SUFFIXES:
        assert f"{asked}-{suffix} (" in refused.stderr
    assert f"{asked}-control (1 partition, exactly)" in refused.stderr
    described = asyncio.run(_describe(broker.bootstrap))
    assert not [t for t in described if t.startswith(f"{asked}-") and t != f"{asked}-data"]

    _run_until_ready("deleter", _config(tmp_path, asked, broker.bootstrap, replication_factor=3))
    _run_until_ready("deleter", _config(tmp_path, default, broker.bootstrap, errors={
        "deadletterqueue.topic.replication.factor": 2}))  # Connect's key, for the DLQ alone
    described = asyncio.run(_describe(broker.bootstrap))
    for suffix in SUFFIXES:
        assert described[f"{asked}-{suffix}"] == {3}, suffix
        assert described[f"{default}-{suffix}"] == ({2} if suffix == "dlq" else {1}), suffix
    # Now that they exist, a sink that may not create topics starts.
    _run_until_ready("deleter", _config(tmp_path, asked, broker.bootstrap, create_topics=False))
