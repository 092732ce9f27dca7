"""The checks of the sink's own topics that need no broker: a replica count below
``min.insync.replicas`` (every acks=all write would fail), the answer of DescribeConfigs read,
``kafka.create_topics: false``'s message, NOT_ENOUGH_REPLICAS explained where a send
fails, and a compacted DLQ or deletion topic refused (its messages would be lost by key)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from aiokafka.errors import (
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    RequestTimedOutError,
)

from hudi_sink.shared.deletion.intent import DeletionReason, PendingDelete
from hudi_sink.shared.deletion.sender import IntentSender
from hudi_sink.shared.kafka.sink_topics import (
    check_topic_configs,
    compacted_topics,
    min_insync_of,
    missing_topics_message,
    not_enough_replicas_hint,
    replica_shortfalls,
)


def test_a_replica_count_below_min_insync_is_named_with_the_fix() -> None:
    [line] = replica_shortfalls({"s-control": 1, "s-dlq": 3, "s-deletion": 2},
                                {"s-control": 2, "s-dlq": 2, "s-deletion": 2})
    assert "'s-control' has 1 replica(s) but min.insync.replicas=2" in line
    assert "NOT_ENOUGH_REPLICAS" in line and "kafka.replication_factor >= 2" in line


def test_topics_without_a_reported_min_insync_are_not_judged() -> None:
    assert replica_shortfalls({"s-control": 1}, {}) == []


def test_describe_configs_answers_are_read_per_topic() -> None:
    response = SimpleNamespace(resources=[
        (0, None, 2, "s-control", [("min.insync.replicas", "2", False, 5, False)]),
        (0, None, 2, "s-dlq", []),  # the development broker answers no entries
        (29, "denied", 2, "s-deletion", []),  # no DESCRIBE_CONFIGS ACL
    ])
    assert min_insync_of([response]) == {"s-control": 2}


def test_missing_topics_are_listed_with_their_shape() -> None:
    message = missing_topics_message({"s-control": "1 partition, exactly", "s-dlq": "4 partitions"})
    assert "kafka.create_topics: false" in message
    assert "s-control (1 partition, exactly), s-dlq (4 partitions)" in message


def test_not_enough_replicas_is_explained_other_errors_are_not() -> None:
    for error in (NotEnoughReplicasError(), NotEnoughReplicasAfterAppendError()):
        hint = not_enough_replicas_hint(error, "s-control")
        assert hint is not None and "s-control" in hint and "min.insync.replicas" in hint
    assert not_enough_replicas_hint(RequestTimedOutError(), "s-control") is None
    assert not_enough_replicas_hint(None, "s-control") is None


class _RefusingProducer:
    async def send(self, topic: str, value: bytes, key: bytes | None = None) -> object:
        raise NotEnoughReplicasError()

    async def send_and_wait(self, topic: str, value: bytes, **_: object) -> object:
        raise NotEnoughReplicasError()


async def test_intent_sends_refused_for_replicas_are_explained_and_raised(
        caplog: pytest.LogCaptureFixture) -> None:
    sender = IntentSender(_RefusingProducer(), "s-deletion")  # type: ignore[arg-type]
    intent = PendingDelete(table_path="/t", file_path="/t/f.parquet",
                           reason=DeletionReason.ABORTED_INSTANT, killing_instant="20260101000000000")
    with caplog.at_level(logging.ERROR), pytest.raises(NotEnoughReplicasError):
        await sender.send_intents([intent])
    with caplog.at_level(logging.ERROR), pytest.raises(NotEnoughReplicasError):
        await sender.send("s-deletion-dlq", intent)
    explained = [r.getMessage() for r in caplog.records if "NOT_ENOUGH_REPLICAS" in r.getMessage()]
    assert len(explained) == 2 and "s-deletion-dlq" in explained[1]


class _DescribingAdmin:
    """The two admin calls the start-up check makes, answered as a broker would."""

    def __init__(self, configs: dict[str, list[tuple[str, str]]], *, fails: bool = False) -> None:
        self.configs, self.fails = configs, fails

    async def describe_topics(self, _topics: object) -> list[dict[str, object]]:
        return [{"topic": topic, "partitions": [{"replicas": [1, 2]}]} for topic in self.configs]

    async def describe_configs(self, resources: list[object]) -> list[SimpleNamespace]:
        if self.fails:
            raise RequestTimedOutError()
        return [SimpleNamespace(resources=[
            (0, None, 2, topic, [(name, value, False, 5, False) for name, value in entries])
            for topic, entries in self.configs.items()])]


KEPT = {"s-dlq": ("dead letters", "errors.deadletterqueue.topic.name"),
        "s-deletion": ("deletion intents", "deletion")}


@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete, COMPACT"])
async def test_a_compacted_dlq_or_deletion_topic_is_refused_naming_it(
        policy: str, caplog: pytest.LogCaptureFixture) -> None:
    admin = _DescribingAdmin({
        "s-control": [("cleanup.policy", "compact"), ("min.insync.replicas", "1")],  # not kept
        "s-dlq": [("cleanup.policy", policy), ("retention.ms", "604800000")],
        "s-deletion": [("cleanup.policy", "delete")],
    })
    with caplog.at_level(logging.INFO, logger="hudi_sink.kafka.topics"):
        problems = await check_topic_configs(admin, ["s-control", "s-dlq", "s-deletion"],  # type: ignore[arg-type]
                                             KEPT, "s-dlq")
    [(key, line)] = problems
    assert key == "errors.deadletterqueue.topic.name"
    assert f"'s-dlq' has cleanup.policy={policy}" in line and "dead letters would be lost" in line
    assert "s-dlq keeps letters for retention.ms=604800000" in caplog.text
    [(key, line)] = compacted_topics({"s-deletion": {"cleanup.policy": "compact"}}, KEPT)
    assert key == "deletion" and "'s-deletion'" in line and "deletion intents" in line


async def test_topic_configs_unanswered_or_deleting_are_not_refused() -> None:
    deleting = _DescribingAdmin({"s-dlq": [("cleanup.policy", "delete")], "s-deletion": []})
    assert await check_topic_configs(deleting, ["s-dlq", "s-deletion"], KEPT, "s-dlq") == []  # type: ignore[arg-type]
    silent = _DescribingAdmin({"s-dlq": [("cleanup.policy", "compact")]}, fails=True)
    assert await check_topic_configs(silent, ["s-dlq"], KEPT, "s-dlq") == []  # type: ignore[arg-type]
