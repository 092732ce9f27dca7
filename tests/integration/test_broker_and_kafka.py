"""Real-broker tests for the embedded tansu broker and the shared Kafka plumbing."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from hudi_sink.cli.broker import (
    BrokerStartError,
    EmbeddedBroker,
    find_tansu_binary,
    free_port,
    run_broker_foreground,
)
from hudi_sink.shared.config.settings import DeletionConfig, KafkaConfig, SinkConfig
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.kafka.connection import (
    TopicAdmin,
    consumer_options,
    producer_options,
    wait_for_kafka,
)
from hudi_sink.shared.kafka.sink_topics import ensure_sink_topics

ROOT = Path(__file__).resolve().parents[2]


def kafka_config(broker: EmbeddedBroker, topics: list[str], **extra: object) -> KafkaConfig:
    return KafkaConfig(bootstrap_servers=broker.bootstrap, topics=topics, **extra)


def test_binary_is_executable() -> None:
    binary = find_tansu_binary()
    assert binary.is_file()
    assert os.access(binary, os.X_OK)


def test_explicit_port_in_use_is_refused(broker: EmbeddedBroker) -> None:
    # tansu would not exit on a taken port (a worker thread panics, the process lives on),
    # so the check has to happen before spawning.
    with pytest.raises(BrokerStartError, match="already in use"):
        EmbeddedBroker(port=broker.port).start(timeout_s=5)


def test_context_manager_stops_process(tmp_path: Path) -> None:
    with EmbeddedBroker(log_path=tmp_path / "b.log") as embedded:
        pid = embedded.pid
        assert pid is not None and embedded.is_running()
    assert not embedded.is_running()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert "ready" in (tmp_path / "b.log").read_text()


async def test_produce_consume_round_trip(broker: EmbeddedBroker, unique_name: str) -> None:
    topic = f"{unique_name}-data"
    kafka = kafka_config(broker, [topic])
    async with TopicAdmin(kafka) as admin:
        assert await admin.ensure_topic(topic, 2) == 2

    producer = AIOKafkaProducer(**producer_options(kafka, client_id="test-producer"))
    await producer.start()
    try:
        for i in range(5):
            await producer.send_and_wait(
                topic, f"v{i}".encode(), key=b"k", partition=1, headers=[("h", b"x")]
            )
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(**consumer_options(kafka, group_id=None))
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 1)])
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(got) < 5 and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                got.extend(r.value for r in records)
                assert all(r.key == b"k" and r.headers == (("h", b"x"),) for r in records)
    finally:
        await consumer.stop()
    assert got == [f"v{i}".encode() for i in range(5)]


async def test_ensure_sink_topics_creates_all_and_is_idempotent(
    broker: EmbeddedBroker, unique_name: str
) -> None:
    data = f"{unique_name}-orders"
    config = SinkConfig(
        name=unique_name,
        kafka=kafka_config(broker, [data]),
        deletion=DeletionConfig(partitions=3),
    )
    async with TopicAdmin(config.kafka) as admin:
        await admin.ensure_topic(data, 6)

    # Two services starting at once: both try to create the same topics.
    await asyncio.gather(ensure_sink_topics(config), ensure_sink_topics(config))
    await ensure_sink_topics(config)

    expected = {
        config.control_topic: 1,
        config.dlq_topic: 6,
        config.deletion_topic: 3,
        config.deletion_retry_topic: 3,
        config.deletion_dlq_topic: 1,
    }
    async with TopicAdmin(config.kafka) as admin:
        assert await admin.partition_counts(list(expected)) == expected
        assert await admin.require_topics([data]) == {data: 6}


async def test_dlq_defaults_to_one_partition_without_data_topics(
    broker: EmbeddedBroker, unique_name: str
) -> None:
    config = SinkConfig(name=unique_name, kafka=kafka_config(broker, [f"{unique_name}-absent"]))
    await ensure_sink_topics(config)
    async with TopicAdmin(config.kafka) as admin:
        counts = await admin.partition_counts([config.dlq_topic, f"{unique_name}-absent"])
    assert counts == {config.dlq_topic: 1}


async def test_control_topic_with_two_partitions_is_rejected(
    broker: EmbeddedBroker, unique_name: str
) -> None:
    config = SinkConfig(name=unique_name, kafka=kafka_config(broker, ["unused"]))
    async with TopicAdmin(config.kafka) as admin:
        await admin.ensure_topic(config.control_topic, 2)
    with pytest.raises(ConfigError) as info:
        await ensure_sink_topics(config)
    assert info.value.key == "kafka"
    assert config.control_topic in str(info.value)
    assert "exactly 1" in str(info.value)


async def test_ensure_topic_exact_accepts_matching_count(
    broker: EmbeddedBroker, unique_name: str
) -> None:
    async with TopicAdmin(kafka_config(broker, ["unused"])) as admin:
        assert await admin.ensure_topic(unique_name, 3, exact_partitions=True) == 3
        assert await admin.ensure_topic(unique_name, 3, exact_partitions=True) == 3
        # Without exact_partitions the existing count wins.
        assert await admin.ensure_topic(unique_name, 5) == 3


async def test_require_topics_missing_raises_and_does_not_create(
    broker: EmbeddedBroker, unique_name: str
) -> None:
    present, missing = f"{unique_name}-here", f"{unique_name}-missing"
    kafka = kafka_config(broker, [present, missing])
    async with TopicAdmin(kafka) as admin:
        await admin.ensure_topic(present, 1)
        with pytest.raises(ConfigError) as info:
            await admin.require_topics([present, missing])
        assert info.value.key == "kafka.topics"
        assert missing in str(info.value) and present not in str(info.value)
        # A metadata request naming the topic would have auto-created it on tansu.
        assert await admin.partition_counts([missing]) == {}


async def test_wait_for_kafka_succeeds_against_broker(broker: EmbeddedBroker) -> None:
    reasons: list[str] = []
    await wait_for_kafka(kafka_config(broker, ["x"], startup_timeout_s=10), reasons.append)
    assert reasons == []


async def test_wait_for_kafka_times_out_on_closed_port() -> None:
    servers = f"127.0.0.1:{free_port()}"
    kafka = KafkaConfig(bootstrap_servers=servers, startup_timeout_s=2)
    reasons: list[str] = []
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        await wait_for_kafka(kafka, reasons.append)
    elapsed = time.monotonic() - started
    assert 1.5 <= elapsed < 3.5
    assert info.value.key == "kafka.bootstrap_servers"
    assert servers in str(info.value) and "after 2 s" in str(info.value)
    assert len(reasons) >= 2 and all(servers in r for r in reasons)


async def test_run_broker_foreground_prints_ready_and_exits_on_sigterm() -> None:
    port = free_port()
    code = (
        "import asyncio, cli.broker as b; "
        f"raise SystemExit(asyncio.run(b.run_broker_foreground({port})))"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), timeout=30)
        assert line.decode() == f"ready bootstrap=127.0.0.1:{port}\n"
        await wait_for_kafka(
            KafkaConfig(bootstrap_servers=f"127.0.0.1:{port}", startup_timeout_s=5)
        )
        process.send_signal(signal.SIGTERM)
        rc = await asyncio.wait_for(process.wait(), timeout=20)
        assert rc == 0, (await process.stderr.read()).decode()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    # The broker went down with it: nothing listens on the port any more.
    with pytest.raises(OSError):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()


async def test_run_broker_foreground_port_in_use_returns_1(broker: EmbeddedBroker) -> None:
    assert await run_broker_foreground(broker.port) == 1
