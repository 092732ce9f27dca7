"""The Kafka offsets stored in each commit's ``extraMetadata``.

The offsets travel inside the very file whose atomic creation commits the data, so the table
itself says which records it contains: after any crash the sink resumes from the offsets of the
latest completed commit, which is what makes the sink exactly-once.

With a single topic the value uses the format of Hudi's own Kafka ingestion
(``0=1500,1=1432``), so Hudi tools can read it; with several topics each entry is qualified
(``orders:0=1500,refunds:0=77``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hudi_sink.shared.errors import TableFormatError
from hudi_sink.shared.kafka.partition_key import PartitionKey

__all__ = [
    "KAFKA_COMMIT_OFFSETS_KEY",
    "UNQUALIFIED_TOPIC_KEY",
    "Offsets",
    "format_offsets",
    "parse_offsets",
    "offsets_metadata",
    "offsets_from_metadata",
]

#: extraMetadata key holding the offsets (the key Hudi's Kafka Connect sink uses).
KAFKA_COMMIT_OFFSETS_KEY = "kafka.commit.offsets"

#: extraMetadata key naming the topic of unqualified entries (``0=1500``), so reordering or
#: adding topics can never re-assign them to another topic.
UNQUALIFIED_TOPIC_KEY = "hudi.sink.offsets.topic"

#: (topic, partition) -> next offset to consume.
Offsets = dict[PartitionKey, int]


def format_offsets(offsets: Offsets, topics: list[str]) -> str:
    """Serialise offsets in a stable order (topic order of the config, then partition).

    With one configured topic its entries are written unqualified, as Hudi does. Entries of a
    topic that is not configured (any more) are kept, qualified and ordered after the
    configured ones, rather than dropped: losing them would lose their position for good.
    """
    if not topics:
        raise ValueError("at least one topic is required")
    order = {topic: index for index, topic in enumerate(topics)}
    entries = []
    for (topic, partition), offset in sorted(
        offsets.items(), key=lambda item: (order.get(item[0][0], len(order)), item[0])
    ):
        if partition < 0 or offset < 0:
            raise ValueError(f"negative partition or offset for {topic}:{partition}={offset}")
        if not _storable_topic(topic):
            raise ValueError(f"topic name {topic!r} cannot be stored in offsets")
        if len(topics) == 1 and topic == topics[0]:
            entries.append(f"{partition}={offset}")
        else:
            entries.append(f"{topic}:{partition}={offset}")
    return ",".join(entries)


def _storable_topic(topic: str) -> bool:
    """Whether ``topic`` can be written into (and parsed back from) the offsets value."""
    return bool(topic) and not any(ch in topic for ch in ":,=")


def _non_negative_int(text: str, what: str, value: str) -> int:
    stripped = text.strip()
    if not stripped.isascii() or not stripped.isdigit():
        raise TableFormatError(f"invalid {what} {text!r} in {KAFKA_COMMIT_OFFSETS_KEY}={value!r}")
    return int(stripped)


def parse_offsets(value: str, topics: list[str]) -> Offsets:
    """Parse either form; an unqualified entry belongs to ``topics[0]``.

    For callers that know the table's single topic (tests, tools). The coordinator reads
    commits with ``offsets_from_metadata``, which does not guess from the topic order.
    Anything malformed is a TableFormatError: resuming from guessed offsets would silently
    lose or duplicate data.
    """
    if not topics:
        raise ValueError("at least one topic is required")
    return _parse(value, topics[0], "")


def _parse(value: str, owner: str | None, no_owner: str) -> Offsets:
    """Parse ``value``; unqualified entries belong to ``owner``, and without an owner they
    raise TableFormatError(``no_owner``)."""
    result: Offsets = {}
    if value.strip() == "":
        return result
    for raw in value.split(","):
        key, sep, offset_text = raw.partition("=")
        if not sep:
            raise TableFormatError(f"entry {raw!r} has no '=' in {KAFKA_COMMIT_OFFSETS_KEY}")
        topic, colon, partition_text = key.strip().rpartition(":")
        if not colon:
            if owner is None:
                raise TableFormatError(no_owner)
            topic = owner
        elif not topic:
            raise TableFormatError(f"entry {raw!r} has an empty topic")
        partition = _non_negative_int(partition_text, "partition", value)
        offset = _non_negative_int(offset_text, "offset", value)
        if (topic, partition) in result:
            raise TableFormatError(f"duplicate entry for {topic}:{partition} in {value!r}")
        result[(topic, partition)] = offset
    return result


def offsets_metadata(offsets: Offsets, topics: list[str]) -> dict[str, str]:
    """The ``extraMetadata`` entries that store ``offsets``: the offsets themselves (as
    ``format_offsets`` writes them) and, whenever some are written unqualified (one configured
    topic, Hudi's format), ``UNQUALIFIED_TOPIC_KEY`` naming their topic, so a later change of
    ``kafka.topics`` can never hand them to another topic."""
    entries = {KAFKA_COMMIT_OFFSETS_KEY: format_offsets(offsets, topics)}
    if len(topics) == 1 and any(topic == topics[0] for topic, _ in offsets):
        entries[UNQUALIFIED_TOPIC_KEY] = topics[0]
    return entries


def offsets_from_metadata(extra: Mapping[str, Any], topics: list[str]) -> Offsets:
    """Offsets stored in a commit's ``extraMetadata``, every topic's (configured or not).

    Unqualified entries belong to the topic the commit names (``UNQUALIFIED_TOPIC_KEY``).
    Commits written before that key existed (or by Hudi's own Kafka tools) name none; their
    entries are taken for the single configured topic. With several topics configured such
    entries are ambiguous, and guessing from the topic order would skip or repeat data: a
    TableFormatError says how to resolve it. Entries of topics that are not configured are
    returned too, so the caller can carry them forward: a topic removed and later re-added
    resumes where it stopped instead of re-ingesting from offset 0.
    """
    raw = extra.get(KAFKA_COMMIT_OFFSETS_KEY) or ""
    if not isinstance(raw, str):
        raise TableFormatError(f"{KAFKA_COMMIT_OFFSETS_KEY} is not a string: {raw!r}")
    named = extra.get(UNQUALIFIED_TOPIC_KEY)
    if named is not None and (not isinstance(named, str) or not _storable_topic(named)):
        raise TableFormatError(f"{UNQUALIFIED_TOPIC_KEY} is not a topic name: {named!r}")
    owner = named if named is not None else topics[0] if len(topics) == 1 else None
    return _parse(
        raw,
        owner,
        f"the latest commit stores unqualified offsets ({KAFKA_COMMIT_OFFSETS_KEY}={raw!r}) "
        f"without naming their topic ({UNQUALIFIED_TOPIC_KEY}), and {len(topics)} topics are "
        f"configured ({', '.join(topics) or 'none'}): which topic they belong to is ambiguous. "
        "Run once with only the topic the table was written from in kafka.topics (the next "
        "commit records its name), then configure the other topics.",
    )
