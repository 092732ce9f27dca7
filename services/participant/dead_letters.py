"""What a rejected record becomes in the ``<name>-dlq`` topic.

The dead letter keeps the original key and value bytes unchanged, so the record can be
fixed and replayed byte-for-byte, and carries its provenance and the decoder's verdict in
headers, so an operator reading the DLQ sees where it came from and why it was refused
without access to the participant's logs. This module builds and parses that shape only;
producing to Kafka is the participant's job.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hudi_sink.services.participant.decoded import Rejected
from hudi_sink.shared.kafka.dlq_headers import (
    HEADER_ERROR_CLASS,
    HEADER_ERROR_MESSAGE,
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_PARTITION,
    HEADER_SOURCE_TIMESTAMP,
    HEADER_SOURCE_TOPIC,
    MAX_HEADER_CHARS,
    header_bytes,
    truncate_text,
)

__all__ = [
    "DeadLetter",
    "parse_headers",
    "DLQ_HEADER_NAMES",
    "MAX_MESSAGE_CHARS",
]


#: The headers of every dead letter, in the order they are written.
DLQ_HEADER_NAMES = (
    HEADER_SOURCE_TOPIC,
    HEADER_SOURCE_PARTITION,
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_TIMESTAMP,
    HEADER_ERROR_CLASS,
    HEADER_ERROR_MESSAGE,
)

#: Longest error message kept (characters), so one bad record cannot make a huge header.
MAX_MESSAGE_CHARS = MAX_HEADER_CHARS


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One record for the DLQ topic: original key/value plus provenance and reason.

    ``timestamp_ms`` is the source record's Kafka timestamp (epoch milliseconds; Kafka
    uses -1 for "none"). ``message`` is already truncated to :data:`MAX_MESSAGE_CHARS`.
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    error_class: str
    message: str

    @classmethod
    def from_rejected(
        cls,
        rejected: Rejected,
        topic: str,
        partition: int,
        offset: int,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
    ) -> DeadLetter:
        """Build the dead letter of a record the decoder rejected (key/value kept as-is)."""
        return cls(topic=topic, partition=partition, offset=offset, timestamp_ms=timestamp_ms,
                   key=key, value=value, error_class=rejected.error_class,
                   message=truncate_text(rejected.message))

    def headers(self) -> list[tuple[str, bytes]]:
        """Kafka headers (name, UTF-8 text), in :data:`DLQ_HEADER_NAMES` order."""
        return [
            (HEADER_SOURCE_TOPIC, header_bytes(self.topic)),
            (HEADER_SOURCE_PARTITION, str(self.partition).encode()),
            (HEADER_SOURCE_OFFSET, str(self.offset).encode()),
            (HEADER_SOURCE_TIMESTAMP, str(self.timestamp_ms).encode()),
            (HEADER_ERROR_CLASS, header_bytes(self.error_class)),
            (HEADER_ERROR_MESSAGE, header_bytes(self.message)),
        ]


def parse_headers(headers: Iterable[tuple[str, bytes | None]] | None) -> dict[str, str]:
    """Decode Kafka headers to ``{name: text}`` (all headers, not only ours).

    Lenient on purpose, because tools read DLQ records written by anyone: a null header
    value becomes ``""``, invalid UTF-8 is replaced rather than raising, and a repeated
    name keeps its last value (Kafka allows repeats).
    """
    parsed: dict[str, str] = {}
    for name, raw in headers or ():
        parsed[name] = "" if raw is None else bytes(raw).decode("utf-8", "replace")
    return parsed
