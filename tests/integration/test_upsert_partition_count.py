"""An upsert table keeps its data topic's partition count: keys are mapped to Kafka partitions
and a partition's participant owns its keys' file groups, so another count would re-map keys
and put two writers on one key. A real coordinator (``hudi-sink coordinator`` in a
subprocess, the embedded broker) records the count in ``.hoodie/.sink/table.json`` — when it
creates the table, or on its first start when another service created the table without it —
and exits 2 naming ``kafka.topics``, the topic and both counts when the topic has another
count: at start, and at the next transaction when the count changes while it runs. The topic
is deleted and created again with another count (the embedded broker has no
CreatePartitions; for the sink both are a topic with another count)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from confluent_kafka.admin import AdminClient, NewTopic
from eventually import eventually
from pipeline import HTTP, HUDI_SINK

from hudi_sink.cli.broker import free_port
from hudi_sink.shared.config.settings import load_config
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.storage.fs import LocalFileSystem

pytestmark = pytest.mark.timeout(240)


def _config(tmp_path: Path, name: str, bootstrap: str) -> Path:
    """An upsert sink on ``<name>-data``; its REST POSTs open (a trusted test machine)."""
    kafka = {"bootstrap_servers": bootstrap, "topics": [f"{name}-data"], "startup_timeout_s": 30}
    table = {"base_path": str(tmp_path / "table"), "name": name, "write_mode": "upsert",
             "record_key_field": "id", "schema": "id STRING, amount DOUBLE"}
    path = tmp_path / "sink.yaml"
    path.write_text(yaml.safe_dump({"name": name, "kafka": kafka, "table": table,
                                    "admin": {"allow_unauthenticated": True}}))
    return path


def _make_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    """``topic`` with ``partitions`` partitions, deleting an existing one first."""
    if topic in admin.list_topics(timeout=10).topics:
        for future in admin.delete_topics([topic]).values():
            future.result(30)
        eventually(lambda: topic not in admin.list_topics(timeout=10).topics, 30,
                   f"{topic} deleted")
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    eventually(lambda: len(admin.list_topics(timeout=10).topics[topic].partitions) == partitions,
               30, f"{topic} with {partitions} partitions")


def _recorded(tmp_path: Path) -> Any:
    record = tmp_path / "table" / layout.SINK_TABLE_FILE
    return orjson.loads(record.read_bytes())["kafka_partitions"] if record.is_file() else None


@pytest.fixture
def admin(broker: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


class Coordinator:
    """``hudi-sink coordinator`` in a subprocess, its output in a file (a pipe nobody reads
    while the test waits could fill and stop it)."""

    def __init__(self, config: Path, log: Path) -> None:
        self.port = free_port()
        self.log = log
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [HUDI_SINK, "coordinator", "--config", str(config), "--admin-port", str(self.port)],
                stdout=out, stderr=subprocess.STDOUT, text=True)

    def alive(self) -> bool:
        assert self.process.poll() is None, f"coordinator exited: {self.output()}"
        return True

    def get(self, path: str) -> Any:
        return HTTP.get(f"http://127.0.0.1:{self.port}{path}", timeout=5).json()

    def post(self, path: str) -> httpx.Response:
        return HTTP.post(f"http://127.0.0.1:{self.port}{path}", timeout=5)

    def output(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


@pytest.fixture
def coordinators() -> Iterator[list[Coordinator]]:
    started: list[Coordinator] = []
    yield started
    for coordinator in started:
        coordinator.stop()


def _refusal(topic: str, table: Path, recorded: int, current: int) -> str:
    return (f"kafka.topics: topic '{topic}' has {current} partitions, but the upsert table at "
            f"{table} recorded {recorded}")


def test_a_changed_partition_count_is_refused_at_start(
        tmp_path: Path, unique_name: str, broker: Any, admin: AdminClient,
        coordinators: list[Coordinator]) -> None:
    topic, config = f"{unique_name}-data", _config(tmp_path, unique_name, broker.bootstrap)
    _make_topic(admin, topic, 2)
    first = Coordinator(config, tmp_path / "first.log")
    coordinators.append(first)
    # It creates the table and records the count with it.
    eventually(lambda: first.alive() and _recorded(tmp_path) == 2, 90, "the count recorded")
    record = orjson.loads((tmp_path / "table" / layout.SINK_TABLE_FILE).read_bytes())
    assert record == {"write_mode": "upsert", "record_key_fields": ["id"],
                      "precombine_field": None, "kafka_partitions": 2}
    first.process.send_signal(signal.SIGTERM)
    assert first.process.wait(timeout=60) == 0, first.output()

    _make_topic(admin, topic, 3)
    result = subprocess.run([HUDI_SINK, "coordinator", "--config", str(config),
                             "--admin-port", str(free_port())],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert _refusal(topic, tmp_path / "table", 2, 3) in result.stderr
    assert _recorded(tmp_path) == 2  # the record is never rewritten to the new count


def test_a_count_changed_while_running_is_refused_at_the_next_transaction(
        tmp_path: Path, unique_name: str, broker: Any, admin: AdminClient,
        coordinators: list[Coordinator]) -> None:
    topic, config = f"{unique_name}-data", _config(tmp_path, unique_name, broker.bootstrap)
    _make_topic(admin, topic, 2)
    # Another service (a participant, the deleter) created the table: no count recorded yet.
    table = load_config(config, environ={}).table
    HudiTable(LocalFileSystem(), table.base_path).initialize(table, table.table_schema())
    assert _recorded(tmp_path) is None
    coordinator = Coordinator(config, tmp_path / "coordinator.log")
    coordinators.append(coordinator)
    eventually(lambda: coordinator.alive() and _recorded(tmp_path) == 2, 90,
               "the count recorded by the coordinator's first start")

    def leading_a_transaction() -> bool:
        current = coordinator.get("/transactions/current")
        return coordinator.alive() and current["role"] == "leader" and bool(current["commit_time"])

    eventually(leading_a_transaction, 90, "an open transaction on the leader")
    _make_topic(admin, topic, 3)
    assert coordinator.alive()
    # The open transaction waits for participants (none run here); aborting it starts the next.
    assert coordinator.post("/transactions/abort").status_code == 202
    assert coordinator.process.wait(timeout=90) == 2, coordinator.output()
    assert _refusal(topic, tmp_path / "table", 2, 3) in coordinator.output()
    assert _recorded(tmp_path) == 2

