"""The (topic, partition) key every service indexes Kafka partitions by, and its text forms.

Text form ``<topic>:<partition>`` (split at the *last* colon, since topic names may not
contain one but readers should not depend on that) is what REST views, logs and the
``hudi.sink.carried.partitions`` commit entry show; offsets add ``=<offset>``. The wire form
is ``shared.kafka.protocol.TopicPartition``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["PartitionKey", "key_text", "keys_text", "offsets_text", "offsets_by_text"]

PartitionKey = tuple[str, int]


def key_text(key: PartitionKey) -> str:
    """``topic:partition``."""
    topic, partition = key
    return f"{topic}:{partition}"


def keys_text(keys: Iterable[PartitionKey], empty: str = "") -> str:
    """Comma-separated ``topic:partition`` list, in the given order (``empty`` when none)."""
    return ",".join(key_text(key) for key in keys) or empty


def offsets_text(offsets: Mapping[PartitionKey, int]) -> str:
    """``topic:partition=offset,...`` sorted by key (for logs)."""
    return ",".join(f"{key_text(key)}={offset}" for key, offset in sorted(offsets.items()))


def offsets_by_text(offsets: Mapping[PartitionKey, int]) -> dict[str, int]:
    """``{"topic:partition": offset}`` sorted by key (for REST views)."""
    return {key_text(key): offset for key, offset in sorted(offsets.items())}
