"""Two-phase deletion through the contract: coordinator, 2 participants, deleter;
``flush_records`` 500 so files exist mid-transaction; one participant SIGKILLed
mid-transaction (before it could report the instant) and restarted; 16,000 records.
Exactly once holds, and within 90 s of the commit covering every offset: partition
directories hold only committed files, none of the killed participant's staged files
remains, staging holds no file and no directory of a finished instant (files that landed
after a rollback's intents included: the deleter's scheduled sweep removes them), and the
deletion DLQ is empty."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaTopicPartition
from eventually import eventually
from pipeline import HTTP, Pipeline, files_below, metric_total

from hudi_sink.cli.broker import EmbeddedBroker

# Long suite: its parts run in the default suite (test_deleter.py: the two-phase protocol, an
# in-flight file kept until its rollback, staging directories removed, orphans reconciled;
# test_real_kafka.py: a participant SIGKILLed mid-transaction).
pytestmark = [pytest.mark.timeout(900), pytest.mark.long]


async def _count_records(bootstrap: str, topic: str) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        if not partitions:
            await consumer.topics()
            partitions = consumer.partitions_for_topic(topic) or set()
        tps = [KafkaTopicPartition(topic, p) for p in partitions]
        if not tps:
            return 0
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        total, idle = 0, 0
        while idle < 3:
            batch = await consumer.getmany(timeout_ms=700)
            got = sum(len(v) for v in batch.values())
            total += got
            idle = 0 if got else idle + 1
        return total
    finally:
        await consumer.stop()


def _staged_files(pipeline: Pipeline) -> set[Path]:
    return files_below(pipeline.timeline / ".temp")


def test_deletion_leaves_no_orphans_after_a_participant_kill(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "transaction": {"interval_ms": 4000, "write_status_timeout_ms": 60000,
                        "flush_records": 500, "resend_interval_ms": 1000},
        "deletion": {"send_delay_s": 1, "reconsume_later_s": 2, "orphan_min_age_s": 0,
                     "max_redeliveries": 50},
    })
    pipeline.produce(0)
    try:
        # The victim never gets a status through (its WRITE_STATUS sends are all dropped), so
        # the instant it holds staged files in cannot commit before the kill: it dies with
        # files no commit will list, whatever the machine's load. (Killing it at a moment seen
        # over REST alone raced the instant's END: under load its status could land and its
        # files be committed first, leaving nothing to delete and no intent to send.)
        victim = pipeline.start("participant", env={"HUDI_SINK_FAULTS": "drop:WRITE_STATUS:1000000"})
        coordinator, _, deleter = pipeline.start_ready("coordinator", "participant", "deleter")
        pipeline.wait_ready(victim, timeout_s=240)
        producer = pipeline.produce_in_background(16_000, rate=800)
        pipeline.wait_holding_staged_files(victim)
        before_kill = _staged_files(pipeline)
        pipeline.kill(victim, signal.SIGKILL)
        victim_files = before_kill  # superset: every staged file that existed at the kill
        restarted = pipeline.start("participant")
        pipeline.wait_ready(restarted, timeout_s=240)
        assert producer.wait(timeout=300) == 0
        pipeline.wait_offsets(4_000, timeout_s=300)

        ids = pipeline.read().column("id").to_pylist()
        assert len(ids) == 16_000 and len(set(ids)) == 16_000

        def pending() -> set[str]:
            # From the timeline on disk only: requested or inflight, not completed.
            started = {p.name.split(".")[0] for p in pipeline.timeline.glob("*.inflight")} | {
                p.name.split(".")[0] for p in pipeline.timeline.glob("*.commit.requested")}
            return started - set(pipeline.completed_commits())

        def clean() -> bool:
            temp = pipeline.timeline / ".temp"
            open_now = pending()
            finished = {d.name for d in temp.iterdir() if d.name not in open_now} \
                if temp.exists() else set()
            leftovers = [p for p in _staged_files(pipeline)
                         if p.relative_to(pipeline.timeline / ".temp").parts[0] in finished]
            lingering = [p for p in victim_files if p.exists()]
            finished_dirs = [d for d in temp.iterdir() if d.name in finished] if temp.exists() else []
            return (pipeline.partition_files() <= pipeline.listed_files()
                    and not leftovers and not lingering and not finished_dirs)

        eventually(clean, 90, "no orphan, no lingering staged file or staging directory of a "
                   "finished instant", every_s=1)
        assert asyncio.run(_count_records(broker.bootstrap, f"{unique_name}-deletion-dlq")) == 0
        # Phase 1's view of phase 2 on the coordinator: intents sent, none left unsettled.
        assert metric_total(coordinator, "hudi_sink_deletion_intents_sent_total") > 0
        eventually(lambda: metric_total(coordinator, "hudi_sink_deletion_backlog_intents") == 0,
                   60, "the deletion backlog drained", every_s=1)
        stats = HTTP.get(f"{deleter.url}/deletions/stats").json()
        assert stats["deleted"] > 0
        report = HTTP.post(f"{deleter.url}/deletions/reconcile", params={"dry_run": "true"}).json()
        assert report["orphans"] == [], report
    finally:
        pipeline.stop_all()
