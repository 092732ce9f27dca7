"""Phase 1 when intents cannot be sent (docs/design.md §4.2): the coordinator's committer, a real
``KafkaDisposal`` and a broker of the test's own that goes away. A commit or abort whose
intents are not acked leaves the sink log, the timeline and every staged file exactly as they
were; once the broker is back, the same decision is taken again and its intent is sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from deleter_harness import T1, Table, sink_config
from eventually import eventually_async

from hudi_sink.cli.broker import EmbeddedBroker, free_port
from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.shared.config.settings import KafkaConfig
from hudi_sink.shared.deletion.intent import DeletionIntentError, DeletionReason, PendingDelete
from hudi_sink.shared.deletion.sender import IntentSender, KafkaDisposal
from hudi_sink.shared.hudi.naming import base_file_name
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.write_stats import WriteStat, build_commit_metadata
from hudi_sink.shared.kafka.connection import consumer_options, producer_options
from hudi_sink.shared.kafka.sink_topics import ensure_sink_topics
from hudi_sink.shared.storage.fs import LocalFileSystem

pytestmark = pytest.mark.timeout(180)

ACK_TIMEOUT_S = 3.0
RETRY_FOR_S = 60.0


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its content: the metadata as a reader would see it."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """A broker this test may stop; restarted on the same port it is 'the broker is back'."""
    embedded = EmbeddedBroker(port=free_port(), log_path=tmp_path / "broker-1.log")
    embedded.start()
    try:
        yield embedded
    finally:
        embedded.stop()


async def read_intents(kafka: KafkaConfig, topic: str, partitions: int) -> list[PendingDelete]:
    """Every intent on ``topic`` from the start (a group-less reader)."""
    found: list[PendingDelete] = []
    async with AIOKafkaConsumer(**consumer_options(kafka, None, "test-reader")) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        while batch := await consumer.getmany(timeout_ms=1500):
            found += [PendingDelete.decode(r.value) for records in batch.values() for r in records]
    return found


async def test_unsendable_intents_leave_metadata_unchanged_and_the_decision_is_retried(
    own_broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    base = tmp_path / "t"
    config = sink_config(own_broker, unique_name, base)
    table = Table(config)
    await ensure_sink_topics(config)
    producer = AIOKafkaProducer(**producer_options(config.kafka, "test-coordinator"))
    await producer.start()
    fs = LocalFileSystem()
    disposal = KafkaDisposal(IntentSender(producer, config.deletion_topic), asyncio.get_running_loop(),
                             config, timeout_s=ACK_TIMEOUT_S)
    committer = TableCommitter(fs, HudiTable(fs, str(base)), disposal)
    try:
        committer.claim_epoch({"id": "test"})
        committer.start(T1)
        listed = table.staged(T1, "aaaa-1")
        unlisted = table.staged(T1, "bbbb-1")  # its intent must be acked before the COMMIT
        final = f"de/{base_file_name('aaaa-1', '0-0-1', T1)}"
        size = Path(listed).stat().st_size
        stat = WriteStat(file_id="aaaa-1", path=final, partition_path="de", num_writes=2,
                         num_inserts=2, file_size_bytes=size, total_write_bytes=size)
        metadata = build_commit_metadata([stat], {"schema": table.schema.avro_schema_json()})
        moves = [(str(Path(listed).relative_to(base)), final)]

        own_broker.stop()
        before = tree(base)
        with pytest.raises(DeletionIntentError, match="metadata left unchanged"):
            await asyncio.to_thread(committer.commit, T1, metadata, moves)
        assert tree(base) == before, "a commit whose intents were not acked changed the table"
        with pytest.raises(DeletionIntentError, match="metadata left unchanged"):
            await asyncio.to_thread(committer.abort, T1, "test abort")
        assert tree(base) == before, "an abort whose intents were not acked changed the table"
        assert committer.refresh().decisions == {}
        assert T1 in table.hudi.pending_instants()

        back = EmbeddedBroker(port=own_broker.port, log_path=tmp_path / "broker-2.log")
        back.start()
        try:
            await ensure_sink_topics(config)

            async def decided() -> bool:
                """What the coordinator does with a refused decision: try again later."""
                try:
                    await asyncio.to_thread(committer.commit, T1, metadata, moves)
                except DeletionIntentError:
                    return False
                return True

            await eventually_async(decided, RETRY_FOR_S, "the decision accepted once the broker is back",
                                   every_s=0.5)
            assert table.hudi.completed_commits() == [T1]
            assert committer.refresh().committed(T1)
            assert (base / final).exists() and Path(unlisted).exists()  # the deleter's job now
            intents = await read_intents(config.kafka, config.deletion_topic, config.deletion.partitions)
            assert (unlisted, DeletionReason.UNCOMMITTED_FILE, T1) in [
                (i.file_path, i.reason, i.killing_instant) for i in intents]
            # Sends of the refused attempts may still arrive late: harmless, because they
            # only ever name staged paths, which the deleter decides from the table.
            staging = table.hudi.staging_dir(T1)
            assert all(i.file_path.startswith(staging + "/") for i in intents)
        finally:
            back.stop()
    finally:
        await producer.stop()
