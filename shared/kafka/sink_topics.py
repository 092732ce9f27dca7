"""The sink's own topics: created (unless ``kafka.create_topics: false``) and checked at
every service's start.

The control topic must have exactly one partition: the coordinator protocol relies on a single
total order of control messages. The DLQ mirrors the widest data topic; deletion-retry matches
the deletion topic. Data topics are never created here (``TopicAdmin.require_topics``). With
``kafka.create_topics: false`` (clusters where topics come from an operator or a ticket) a
missing topic is an error listing every missing one and the shape it needs.

Every write to the sink's topics uses ``acks=all``: the broker takes it only while the
partition has at least ``min.insync.replicas`` in-sync replicas. A topic with fewer replicas
than that can never take a write (NOT_ENOUGH_REPLICAS on every send), which on a hardened
cluster (``min.insync.replicas=2``) is what a topic created with one replica gets. The start
refuses such a topic with what to change, instead of a sink whose every commit fails; a
write that fails with NOT_ENOUGH_REPLICAS later (brokers down, the in-sync set shrunk) is
logged with the same explanation (:func:`not_enough_replicas_hint`).

The topic's ``min.insync.replicas`` comes from DescribeConfigs (the topic's own value or the
broker default it inherits). A cluster that does not answer it (no DESCRIBE_CONFIGS ACL, a
development broker that returns no entries) leaves the check out, logged.

The same answer gives ``cleanup.policy``: the DLQ and the deletion topics hold one message per
letter or intent under keys that repeat (a record's Kafka key, a file's path), and their
offsets are committed once sent; a compacted topic would keep only the last message of a key,
so a letter or an intent would vanish after the sink had counted it delivered. Such a topic
(``compact``, or ``compact,delete``) is refused at start naming it. The DLQ's ``retention.ms``
is logged: letters older than it are deleted by the broker, read or not.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError, NotEnoughReplicasAfterAppendError, NotEnoughReplicasError

from hudi_sink.shared.config.errors_section import DLQ_NAME_KEY
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.kafka.connection import TopicAdmin

__all__ = ["ensure_sink_topics", "replica_shortfalls", "check_topic_configs", "min_insync_of",
           "topic_configs_of", "compacted_topics", "not_enough_replicas_hint",
           "missing_topics_message"]

log = logging.getLogger("hudi_sink.kafka.topics")

_MIN_INSYNC = "min.insync.replicas"
_CLEANUP = "cleanup.policy"
_RETENTION = "retention.ms"


def replica_shortfalls(replicas: Mapping[str, int], min_insync: Mapping[str, int]) -> list[str]:
    """One line for each topic whose replica count is below its ``min.insync.replicas``."""
    return [
        f"topic {topic!r} has {count} replica(s) but min.insync.replicas={min_insync[topic]}: "
        "every acks=all write to it fails with NOT_ENOUGH_REPLICAS. Delete it and restart with "
        f"kafka.replication_factor >= {min_insync[topic]} (or unset, for the broker's "
        "default.replication.factor), or lower the topic's min.insync.replicas"
        for topic, count in replicas.items()
        if topic in min_insync and count < min_insync[topic]
    ]


def topic_configs_of(responses: list[Any]) -> dict[str, dict[str, str]]:
    """Topic -> {config name: value} from DescribeConfigs responses (any version); a resource
    answered with an error, or an entry without a value, is left out."""
    found: dict[str, dict[str, str]] = {}
    for response in responses:
        for error_code, _message, _type, name, entries in (r[:5] for r in response.resources):
            if error_code != 0:
                continue
            for entry in entries:
                if entry[1] is not None:
                    found.setdefault(name, {})[entry[0]] = str(entry[1])
    return found


def min_insync_of(responses: list[Any]) -> dict[str, int]:
    """Topic -> ``min.insync.replicas`` from DescribeConfigs responses; a resource answered
    with an error, or without the entry, is left out."""
    return {topic: int(configs[_MIN_INSYNC])
            for topic, configs in topic_configs_of(responses).items() if _MIN_INSYNC in configs}


def compacted_topics(configs: Mapping[str, Mapping[str, str]],
                     kept: Mapping[str, tuple[str, str]]) -> list[tuple[str, str]]:
    """(config key, line) for each topic of ``kept`` (topic -> what it holds, the key that
    names it) whose ``cleanup.policy`` compacts: its messages would be dropped by key after
    their offsets were committed."""
    lines = []
    for topic, (holds, key) in kept.items():
        policy = configs.get(topic, {}).get(_CLEANUP, "")
        if "compact" in {part.strip().lower() for part in policy.split(",")}:
            lines.append((key, f"topic {topic!r} has cleanup.policy={policy}: compaction keeps only the "
                         f"last message of each key, so {holds} would be lost after the sink "
                         f"committed them. Set its cleanup.policy=delete, or delete it and let "
                         "the sink create it"))
    return lines


async def check_topic_configs(admin: AIOKafkaAdminClient, topics: list[str],
                              kept: Mapping[str, tuple[str, str]],
                              dlq_topic: str) -> list[tuple[str, str]]:
    """:func:`replica_shortfalls` and :func:`compacted_topics` of ``topics`` as the cluster
    describes them (replica counts from all-topics metadata, which never creates a topic);
    logs the DLQ's ``retention.ms``. (config key, line) for each problem; nothing is judged
    when the cluster does not answer."""
    replicas: dict[str, int] = {}
    for entry in await admin.describe_topics(None):
        if entry["topic"] in topics and entry["partitions"]:
            replicas[entry["topic"]] = min(len(p["replicas"]) for p in entry["partitions"])
    names = {_MIN_INSYNC: None, _CLEANUP: None, _RETENTION: None}
    resources = [ConfigResource(ConfigResourceType.TOPIC, topic, dict(names)) for topic in replicas]
    try:
        responses = await admin.describe_configs(resources) if resources else []
    except (KafkaError, OSError, ValueError) as exc:
        log.info("min.insync.replicas and cleanup.policy of the sink's topics not checked: %r",
                 exc)
        return []
    configs = topic_configs_of(responses)
    found = min_insync_of(responses)
    if len(found) < len(replicas):
        log.info("min.insync.replicas not reported for %s: not checked",
                 sorted(set(replicas) - set(found)))
    retention = configs.get(dlq_topic, {}).get(_RETENTION)
    if retention is not None:
        log.info("dead-letter topic %s keeps letters for retention.ms=%s%s", dlq_topic, retention,
                 " (forever)" if retention == "-1" else "")
    shortfalls = [("kafka.replication_factor", line)
                  for line in replica_shortfalls(replicas, found)]
    return shortfalls + compacted_topics(configs, kept)


def missing_topics_message(missing: Mapping[str, str]) -> str:
    """The error of ``kafka.create_topics: false`` when some of the sink's topics are missing
    (topic -> what it must be, e.g. ``1 partition, exactly``)."""
    listed = ", ".join(f"{topic} ({shape})" for topic, shape in missing.items())
    return (f"the sink may not create topics (kafka.create_topics: false) and these are "
            f"missing: {listed}; create them, or allow the sink to")


def not_enough_replicas_hint(error: BaseException | None, topic: str) -> str | None:
    """Why a write to ``topic`` failed, when it failed with NOT_ENOUGH_REPLICAS."""
    if not isinstance(error, NotEnoughReplicasError | NotEnoughReplicasAfterAppendError):
        return None
    return (f"writes to {topic} fail with NOT_ENOUGH_REPLICAS: fewer of its replicas are in "
            "sync than its min.insync.replicas. Likely reasons: brokers holding its replicas "
            "are down, or the topic has fewer replicas than min.insync.replicas (created "
            "with too small a kafka.replication_factor: the sink checks that at start)")


def _plural(count: int) -> str:
    return f"{count} partition{'s' if count != 1 else ''}"


async def ensure_sink_topics(config: SinkConfig) -> None:
    """Create the sink's own topics (control, DLQ, deletion trio) if missing and allowed;
    refuse a control topic of another size and topics that can never take a write."""
    async with TopicAdmin(config.kafka) as admin:
        data_counts = await admin.partition_counts(config.kafka.topics)
        wanted = {
            config.control_topic: (1, "1 partition, exactly"),
            config.dlq_topic: (max(data_counts.values(), default=1), ""),
            config.deletion_topic: (config.deletion.partitions, ""),
            config.deletion_retry_topic: (config.deletion.partitions,
                                          f"as many partitions as {config.deletion_topic}"),
            config.deletion_dlq_topic: (1, ""),
        }
        if not config.kafka.create_topics:
            existing = await admin.partition_counts(list(wanted))
            missing = {topic: shape or _plural(count)
                       for topic, (count, shape) in wanted.items() if topic not in existing}
            if missing:
                raise ConfigError(missing_topics_message(missing), "kafka.create_topics")
        await admin.ensure_topic(config.control_topic, 1, exact_partitions=True)
        await admin.ensure_topic(config.dlq_topic, wanted[config.dlq_topic][0],
                                 replication_factor=config.errors.dlq_replication_factor)
        deletion = await admin.ensure_topic(config.deletion_topic, config.deletion.partitions)
        await admin.ensure_topic(config.deletion_retry_topic, deletion)
        await admin.ensure_topic(config.deletion_dlq_topic, 1)
        kept = {config.dlq_topic: ("dead letters", DLQ_NAME_KEY),
                **{topic: ("deletion intents", "deletion") for topic in (
                    config.deletion_topic, config.deletion_retry_topic, config.deletion_dlq_topic)}}
        problems = await check_topic_configs(admin.admin, list(wanted), kept, config.dlq_topic)
        if problems:
            raise ConfigError("; ".join(line for _, line in problems), problems[0][0],
                              problems=problems)
