"""The whole control-topic protocol: one envelope, one payload model per message type.

RFC-32's four messages plus PARTICIPANT_READY. Every message carries the sink name, the Hudi
instant (``commit_time``) and the coordinator epoch, so a receiver can drop anything stale
without extra state. Decoders ignore unknown fields (a newer writer may add some) but reject
unknown message types and other major protocol versions loudly.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hudi_sink.shared.errors import ProtocolDecodeError
from hudi_sink.shared.kafka.partition_key import PartitionKey

__all__ = [
    "PROTOCOL_VERSION",
    "MessageType",
    "Role",
    "TopicPartition",
    "PartitionOffset",
    "StagedFile",
    "StartCommit",
    "EndCommit",
    "WriteCounts",
    "WriteStatus",
    "AckCommit",
    "ParticipantReady",
    "AnyPayload",
    "Payload",
    "Sender",
    "Envelope",
    "encode",
    "decode",
]

PROTOCOL_VERSION = 1


class MessageType(StrEnum):
    """The message catalogue. Values are stable and never reused."""

    START_COMMIT = "START_COMMIT"
    """StartCommit: coordinator → participants. Begin instant T from these offsets."""
    END_COMMIT = "END_COMMIT"
    """EndCommit: coordinator → participants. Write what you have, pause, report."""
    WRITE_STATUS = "WRITE_STATUS"
    """WriteStatus: participant → coordinator. Files staged for T and the next offset."""
    ACK_COMMIT = "ACK_COMMIT"
    """AckCommit: coordinator → participants. T is committed with these offsets."""
    PARTICIPANT_READY = "PARTICIPANT_READY"
    """ParticipantReady: participant → coordinator. I own these partitions; send me T."""


class Role(StrEnum):
    COORDINATOR = "coordinator"
    PARTICIPANT = "participant"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class TopicPartition(_Model):
    topic: str
    partition: int = Field(ge=0)

    def key(self) -> PartitionKey:
        return (self.topic, self.partition)


class PartitionOffset(_Model):
    """Next offset to consume for one topic-partition (Kafka's commit convention)."""

    topic: str
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)

    @classmethod
    def list_of(cls, offsets: Mapping[PartitionKey, int]) -> list[PartitionOffset]:
        """Offsets by partition key in wire form, sorted by partition."""
        return [cls(topic=t, partition=p, offset=o) for (t, p), o in sorted(offsets.items())]


class StagedFile(_Model):
    """A Parquet base file a participant wrote into the instant's staging area."""

    staged_path: str
    """Relative to the table base path, under ``.hoodie/.temp/<T>/``."""
    final_path: str
    """Relative to the base path: where the coordinator places it on commit."""
    file_id: str
    partition_path: str
    num_records: int = Field(ge=0)
    size_bytes: int = Field(ge=0)
    prev_commit: str | None = None
    """A new slice of an existing file group: the instant of the slice it was written over
    (its rows are carried into this file). None: a new file group."""
    num_inserts: int | None = Field(None, ge=0)
    """Rows of this flush in the file; None: all ``num_records`` (a new group)."""
    num_updates: int = Field(0, ge=0)
    """Upsert mode: of those rows, how many replaced a stored version of their key."""
    num_deletes: int = Field(0, ge=0)
    """Upsert mode: stored rows of the old slice left out (their keys deleted)."""

    @property
    def new_records(self) -> int:
        """Rows this flush wrote (a new slice's carried rows were counted when first written)."""
        return self.num_records if self.num_inserts is None else self.num_inserts


class StartCommit(_Model):
    type: Literal[MessageType.START_COMMIT] = MessageType.START_COMMIT
    offsets: list[PartitionOffset]
    """Committed offsets of every known partition; missing partitions start at 0."""
    targets: list[TopicPartition] | None = None
    """None: every participant. Otherwise a re-send for these partitions only."""
    table_schema: str | None = None
    """The instant's table schema (``table.schema`` DDL of the value columns): every flush of
    the instant writes with it. None: the config's (a coordinator without schema evolution)."""
    follow_writers: bool | None = None
    """Whether writer schemas evolve the table (``table.schema_source: registry``), decided by
    the coordinator's config for every participant alike. None: each participant's config."""


class EndCommit(_Model):
    type: Literal[MessageType.END_COMMIT] = MessageType.END_COMMIT
    targets: list[TopicPartition] | None = None
    """None: every participant. Otherwise only partitions that have not answered."""


class WriteCounts(BaseModel):
    """What one partition's instant came to, as its WriteStatus reports it (flat fields of the
    status on the wire). Not frozen: the participant counts into one while it accepts records
    and flushes them, so the list of counts is written once, here."""

    model_config = ConfigDict(extra="ignore")

    records_written: int = 0
    """Rows in the instant's new files (a new slice's rows carried from the old one were
    counted when first written)."""
    records_dlq: int = 0
    """Records sent to the dead-letter topic."""
    records_skipped: int = 0
    """Tombstones (null values) skipped."""
    unknown_fields: int = 0
    """Fields of written records that are not columns: ignored, counted."""
    records_deleted: int = 0
    """Upsert mode: offsets whose change deleted a stored key."""
    records_delete_noop: int = 0
    """Upsert mode: deletes of a key the table does not hold."""
    records_superseded: int = 0
    """Upsert mode: changes replaced by a later one of their key, or older than the stored
    version (``table.precombine_field``): nothing written for them."""


class WriteStatus(_Model, WriteCounts):
    type: Literal[MessageType.WRITE_STATUS] = MessageType.WRITE_STATUS
    topic: str
    partition: int = Field(ge=0)
    start_offset: int = Field(ge=0)
    next_offset: int = Field(ge=0)
    files: list[StagedFile] = Field(default_factory=list)
    failed: str | None = None
    """Set when errors.tolerance=fail stopped this partition at a bad record."""
    table_schema: str | None = None
    """The table schema (DDL) a writer schema seen in this instant needs: the partition stopped
    before its first record, and the coordinator evolves the table to it in this commit."""

    def key(self) -> PartitionKey:
        return (self.topic, self.partition)


class AckCommit(_Model):
    type: Literal[MessageType.ACK_COMMIT] = MessageType.ACK_COMMIT
    offsets: list[PartitionOffset]


class ParticipantReady(_Model):
    type: Literal[MessageType.PARTICIPANT_READY] = MessageType.PARTICIPANT_READY
    partitions: list[TopicPartition]


AnyPayload = StartCommit | EndCommit | WriteStatus | AckCommit | ParticipantReady
"""Any message's body: what is sent (``Envelope.wrap``) and what an envelope carries."""
Payload = Annotated[AnyPayload, Field(discriminator="type")]
"""The body as an envelope decodes it: the model is chosen by its ``type``."""


class Sender(_Model):
    role: Role
    id: str
    """Process-unique member id (uuid), stable for the life of the process."""
    host: str = ""


class Envelope(_Model):
    protocol_version: int = PROTOCOL_VERSION
    type: MessageType
    sink: str
    commit_time: str | None = None
    coordinator_epoch: int = Field(0, ge=0)
    sender: Sender
    payload: Payload

    @classmethod
    def wrap(
        cls,
        payload: AnyPayload,
        *,
        sink: str,
        sender: Sender,
        commit_time: str | None,
        epoch: int,
    ) -> Envelope:
        return cls(
            type=payload.type,
            sink=sink,
            commit_time=commit_time,
            coordinator_epoch=epoch,
            sender=sender,
            payload=payload,
        )


def encode(envelope: Envelope) -> bytes:
    return orjson.dumps(envelope.model_dump(mode="json"))


def decode(data: bytes) -> Envelope:
    """Decode one control message; raise ProtocolDecodeError with the reason."""
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ProtocolDecodeError(f"control message is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ProtocolDecodeError("control message is not a JSON object")
    version = raw.get("protocol_version")
    if type(version) is not int or version != PROTOCOL_VERSION:  # True == 1 in Python
        raise ProtocolDecodeError(f"unsupported protocol_version {version!r}")
    kind = raw.get("type")
    if kind not in MessageType._value2member_map_:
        raise ProtocolDecodeError(f"unknown message type {kind!r}")
    payload = raw.get("payload")
    if isinstance(payload, dict) and payload.get("type") != kind:
        raise ProtocolDecodeError(f"payload type {payload.get('type')!r} != envelope type {kind}")
    try:
        return Envelope.model_validate(raw)
    except ValidationError as exc:
        raise ProtocolDecodeError(f"invalid {kind} message: {exc.errors()[0]}") from None
