"""OAUTHBEARER against Apache Kafka: a listener that takes Kafka's unsecured tokens (an
unsigned JWT whose ``sub`` is the principal; the broker still checks the token's form and
expiry), and the sink's clients reading ``kafka.sasl_oauth_token_file``.

A service (``hudi-sink deleter``) starts over SASL with the file's token and creates its
topics; a token rotated to a bad one is refused at the next login (the file is read at every
login, not once), and rotated back it works again without any restart of the config.
Long suite: one more JVM.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from eventually import eventually
from kafka_cluster import KafkaCluster
from pipeline import HTTP, HUDI_SINK

from hudi_sink.cli.broker import free_port
from hudi_sink.shared.config.settings import SinkConfig, load_config
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.kafka.connection import consumer_options, producer_options, wait_for_kafka

pytestmark = [pytest.mark.long, pytest.mark.kafka, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    node = KafkaCluster(tmp_path_factory.mktemp("kafka-oauth"), heap_mb=256,
                        oauthbearer=True).start()
    try:
        yield node
    finally:
        node.stop()


def _b64(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def unsecured_jwt(subject: str, lifetime_s: int = 3600) -> str:
    now = int(time.time())
    return f"{_b64({'alg': 'none'})}.{_b64({'sub': subject, 'iat': now, 'exp': now + lifetime_s})}."


def _config(tmp_path: Path, cluster: KafkaCluster, name: str, token: Path) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name,
        "kafka": {"bootstrap_servers": cluster.sasl_bootstrap, "topics": [f"{name}-data"],
                  "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
                  "sasl_oauth_token_file": str(token), "startup_timeout_s": 30},
        "table": {"base_path": str(tmp_path / name)},
        "admin": {"host": "127.0.0.1", "allow_unauthenticated": True},
    }))
    return path


async def _round_trip(config: SinkConfig) -> bytes:
    """Produce one record to the control topic and read it back, each client over SASL."""
    producer = AIOKafkaProducer(**producer_options(config.kafka, "oauth-test"))
    await producer.start()
    try:
        await producer.send_and_wait(config.control_topic, b"over-oauthbearer", partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(**consumer_options(config.kafka, None, "oauth-test"))
    await consumer.start()
    try:
        partition = TopicPartition(config.control_topic, 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        record = await asyncio.wait_for(consumer.getone(), 30)
        return bytes(record.value or b"")
    finally:
        await consumer.stop()


def test_the_token_file_logs_in_and_is_read_again_at_every_login(
    cluster: KafkaCluster, tmp_path: Path, unique_name: str
) -> None:
    token = tmp_path / "token"
    token.write_text(unsecured_jwt("hudi-sink"))
    path = _config(tmp_path, cluster, unique_name, token)
    port = free_port()
    process = subprocess.Popen([HUDI_SINK, "deleter", "--config", str(path), "--admin-port",
                                str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    try:
        def ready() -> bool:
            assert process.poll() is None, process.stdout.read()  # type: ignore[union-attr]
            try:
                return HTTP.get(f"http://127.0.0.1:{port}/ready", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        eventually(ready, 120, "the deleter ready over OAUTHBEARER", every_s=0.5)
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output

    config = load_config(path, environ={})
    assert asyncio.run(_round_trip(config)) == b"over-oauthbearer"

    token.write_text("not-a-jwt")  # rotated to a token the broker refuses
    short = config.kafka.model_copy(update={"startup_timeout_s": 3})
    with pytest.raises(ConfigError, match="not reachable"):
        asyncio.run(wait_for_kafka(short))

    token.write_text(unsecured_jwt("hudi-sink"))  # rotated again: the next login takes it
    asyncio.run(wait_for_kafka(short))
