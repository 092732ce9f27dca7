"""An operator's change of the committed Kafka offsets, as a commit of its own — pure logic.

Offsets live in the table (``shared.hudi.offsets``): a consumer-group reset does nothing, so
skipping a poison record or re-reading a range is a *commit*. The change is an ingestion
``commit`` without files whose ``kafka.commit.offsets`` hold the committed offsets with the
chosen partitions replaced, decided through the sink log like every commit (the COMMIT
entry is the fence, and a crash after it is rolled forward by the next leader: the change
applies exactly once). Its ``extraMetadata`` also records what changed and why, so
``table history`` and ``GET /transactions`` show it as an audit entry:

- ``hudi.sink.offsets.change``: ``topic:p=old->new`` per changed partition (``-`` for a
  partition the table held no offset for);
- ``hudi.sink.offsets.reason``: the operator's reason;
- ``hudi.sink.offsets.set.by``: ``rest`` (``POST /offsets``) or ``cli`` (``offsets set``);
- ``hudi.sink.offsets.request``: the request's id (a retried request is recognised).

Everything here is shared by the coordinator (``POST /offsets``) and the CLI (``hudi-sink
offsets set``), so both write the same commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.hudi.offsets import Offsets, offsets_metadata
from hudi_sink.shared.hudi.write_stats import build_commit_metadata
from hudi_sink.shared.kafka.partition_key import PartitionKey, key_text

__all__ = [
    "CHANGE_KEY",
    "REASON_KEY",
    "SET_BY_KEY",
    "REQUEST_KEY",
    "MAX_REASON_CHARS",
    "OffsetChange",
    "parse_requested",
    "check_reason",
    "change_metadata",
    "describe_change",
]

CHANGE_KEY = "hudi.sink.offsets.change"
REASON_KEY = "hudi.sink.offsets.reason"
SET_BY_KEY = "hudi.sink.offsets.set.by"
REQUEST_KEY = "hudi.sink.offsets.request"
MAX_REASON_CHARS = 1000
"""A reason is an audit note, not a document: longer ones are refused."""


@dataclass(frozen=True)
class OffsetChange:
    """Set ``offsets`` (next offset to consume per partition), because of ``reason``."""

    offsets: Offsets
    reason: str
    set_by: str
    request_id: str

    def applied_to(self, committed: Mapping[PartitionKey, int]) -> Offsets:
        """The committed offsets after the change: the named partitions replaced, every other
        one (other topics' included) kept."""
        return {**committed, **self.offsets}

    def changes(self, committed: Mapping[PartitionKey, int]) -> dict[PartitionKey, tuple[int | None, int]]:
        """Each named partition's (old, new) offset; old is None when the table held none."""
        return {key: (committed.get(key), offset) for key, offset in sorted(self.offsets.items())}


def check_reason(reason: object, where: str = "reason") -> str:
    """The reason, stripped; ConfigError naming ``where`` when it is missing or too long: a
    change that skips or repeats records must say why in the table's history."""
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigError("a non-empty reason is required: it is recorded in the table's "
                          "history beside the offsets it changed", where)
    text = reason.strip()
    if len(text) > MAX_REASON_CHARS:
        raise ConfigError(f"the reason has {len(text)} characters; at most {MAX_REASON_CHARS}", where)
    return text


def parse_requested(raw: object, topics: list[str], partitions: Mapping[str, int] | None,
                    where: str = "offsets") -> Offsets:
    """``{"<topic>:<p>": <offset>}`` as offsets; ConfigError naming the bad entry.

    ``topics``: the topics offsets may be set for (configured, or found in the table);
    ``partitions``: each topic's partition count when known (the coordinator asks Kafka),
    so a partition that does not exist is refused instead of stored.
    """
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError('expected a non-empty object {"<topic>:<partition>": <offset>}', where)
    result: Offsets = {}
    for name, offset in raw.items():
        entry = f"{where}.{name}"
        topic, colon, partition_text = str(name).rpartition(":")
        if not colon or not topic:
            raise ConfigError(f"{name!r} is not '<topic>:<partition>'", entry)
        if topic not in topics:
            raise ConfigError(f"topic {topic!r} is not one of this sink's topics "
                              f"({', '.join(topics) or 'none'})", entry)
        if not partition_text.isascii() or not partition_text.isdigit():
            raise ConfigError(f"partition {partition_text!r} is not a non-negative integer", entry)
        partition = int(partition_text)
        count = None if partitions is None else partitions.get(topic)
        if count is not None and partition >= count:
            raise ConfigError(f"topic {topic!r} has {count} partition(s); {partition} does not "
                              "exist", entry)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ConfigError(f"offset {offset!r} is not a non-negative integer", entry)
        if (topic, partition) in result:
            raise ConfigError(f"{key_text((topic, partition))} is named twice", entry)
        result[(topic, partition)] = offset
    return result


def _changes_text(changes: Mapping[PartitionKey, tuple[int | None, int]]) -> str:
    return ",".join(f"{key_text(key)}={'-' if old is None else old}->{new}"
                    for key, (old, new) in changes.items())


def change_metadata(change: OffsetChange, committed: Mapping[PartitionKey, int], *,
                    topics: list[str], schema_json: str, epoch: int, sink_name: str,
                    operation: str) -> dict[str, Any]:
    """The Hudi commit metadata of the change: no file, the new offsets, the audit entries.

    ``committed``: the offsets of the latest commit (other topics' included, so none is
    lost); ``schema_json``: the table's Avro schema (readers take it from the newest commit);
    ``topics``: the sink's topic order (``offsets_metadata``)."""
    extra = {
        "schema": schema_json,
        **offsets_metadata(change.applied_to(committed), topics),
        "hudi.sink.name": sink_name,
        "hudi.sink.coordinator.epoch": str(epoch),
        "hudi.sink.records.written": "0",
        CHANGE_KEY: _changes_text(change.changes(committed)),
        REASON_KEY: change.reason,
        SET_BY_KEY: change.set_by,
        REQUEST_KEY: change.request_id,
    }
    return build_commit_metadata([], extra, operation)


def describe_change(extra: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a commit's ``extraMetadata`` says of an offset change (None: not one), for
    histories: ``{"reason", "set_by", "changes": {"topic:p": {"from": old, "to": new}}}``."""
    text = extra.get(CHANGE_KEY)
    if not isinstance(text, str):
        return None
    changes: dict[str, dict[str, int | None]] = {}
    for item in filter(None, text.split(",")):
        key, _, span = item.rpartition("=")
        old, _, new = span.partition("->")
        changes[key] = {"from": int(old) if old.isdigit() else None,
                        "to": int(new) if new.isdigit() else None}
    return {"reason": str(extra.get(REASON_KEY, "")), "set_by": str(extra.get(SET_BY_KEY, "")),
            "changes": changes}
