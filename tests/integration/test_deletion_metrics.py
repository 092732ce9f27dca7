"""Deletion metrics that tell the truth, on the session broker and a real table: intents the
coordinator got acked (``hudi_sink_deletion_intents_sent_total``) against intents the deleter
settled (``hudi_sink_deletion_intents_settled_total``), and the backlog gauge that makes a
missing deleter visible on the coordinator's side."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from deleter_harness import T1, Table, deleter, sink_config
from eventually import eventually_async
from prometheus_client.parser import text_string_to_metric_families

from hudi_sink.cli.broker import EmbeddedBroker
from hudi_sink.shared.deletion.sender import DeletionBacklog, IntentSender, KafkaDisposal
from hudi_sink.shared.kafka.connection import producer_options
from hudi_sink.shared.kafka.sink_topics import ensure_sink_topics
from hudi_sink.shared.runtime.metrics import Metrics

pytestmark = pytest.mark.timeout(120)


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(metrics.render().decode()):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise AssertionError(f"no sample {name} {labels}")


async def test_a_missing_deleter_shows_as_a_growing_backlog_that_drains_once_it_runs(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    base = tmp_path / "t"
    config = sink_config(broker, unique_name, base)
    table = Table(config)
    table.hudi.start_instant(T1)
    staged = [table.staged(T1, f"{i:04d}-1") for i in range(6)]
    table.abort(T1)
    await ensure_sink_topics(config)
    producer = AIOKafkaProducer(**producer_options(config.kafka, "test-coordinator"))
    await producer.start()
    coordinator = Metrics("coordinator")
    sender = IntentSender(producer, config.deletion_topic, metrics=coordinator)
    backlog = DeletionBacklog(config, sender, coordinator)
    disposal = KafkaDisposal(sender, asyncio.get_running_loop(), config)
    try:
        assert await backlog.probe() == 0  # nothing sent yet
        await asyncio.to_thread(disposal.before_decision, T1, staged[:2], "ABORTED_INSTANT")
        assert await backlog.probe() == 2
        await asyncio.to_thread(disposal.before_decision, T1, staged[2:], "ABORTED_INSTANT")
        assert await backlog.probe() == 6, "no deleter runs: the backlog must grow"
        assert sample(coordinator, "hudi_sink_deletion_intents_sent_total") == 6
        assert sample(coordinator, "hudi_sink_deletion_backlog_intents") == 6

        async with deleter(broker, unique_name, base, config=config) as (h, _):
            async def drained() -> bool:
                return await backlog.probe() == 0

            await eventually_async(drained, 30, "the backlog to drain")
            settled = sample(h.service.metrics, "hudi_sink_deletion_intents_settled_total",
                             source="deletion")
            assert settled == 6
            assert (await h.stats())["deleted"] == 6
        assert sample(coordinator, "hudi_sink_deletion_backlog_intents") == 0
    finally:
        await backlog.close()
        await producer.stop()


async def test_backlog_probe_runs_until_stopped(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    config = sink_config(broker, unique_name, tmp_path / "t")
    table = Table(config)
    table.hudi.start_instant(T1)
    staged = table.staged(T1)
    await ensure_sink_topics(config)
    producer = AIOKafkaProducer(**producer_options(config.kafka, "test-coordinator"))
    await producer.start()
    metrics = Metrics("coordinator")
    sender = IntentSender(producer, config.deletion_topic, metrics=metrics)
    stop = asyncio.Event()
    runner = asyncio.create_task(DeletionBacklog(config, sender, metrics, interval_s=0.1).run(stop))
    try:
        disposal = KafkaDisposal(sender, asyncio.get_running_loop(), config)
        await asyncio.to_thread(disposal.before_decision, T1, [staged], "ABORTED_INSTANT")

        async def reported() -> bool:
            return sample(metrics, "hudi_sink_deletion_backlog_intents") == 1

        await eventually_async(reported, 15, "the running probe to report the unsettled intent")
    finally:
        stop.set()
        await asyncio.wait_for(runner, 15)
        await producer.stop()
