"""What a rejected record becomes in the dead-letter topic (``<name>-dlq``, or
``errors.deadletterqueue.topic.name``).

The dead letter keeps the original key and value bytes unchanged, so the record can be
fixed and replayed byte-for-byte, and carries its provenance and the decoder's verdict in
headers, so an operator reading the DLQ sees where it came from and why it was refused
without access to the participant's logs. This module builds and parses that shape only;
producing to Kafka is the participant's job.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hudi_sink.services.participant.decoded import KEY_PARTITION_MISMATCH, Rejected
from hudi_sink.shared.kafka.dlq_headers import (
    CONNECT_CLASS_NAME,
    CONNECT_CONNECTOR_NAME,
    CONNECT_ERRORS_PREFIX,
    CONNECT_EXCEPTION_CLASS,
    CONNECT_EXCEPTION_MESSAGE,
    CONNECT_EXCEPTION_STACKTRACE,
    CONNECT_OFFSET,
    CONNECT_PARTITION,
    CONNECT_STAGE,
    CONNECT_TASK_ID,
    CONNECT_TOPIC,
    HEADER_ERROR_CLASS,
    HEADER_ERROR_MESSAGE,
    HEADER_HEADERS_TRUNCATED,
    HEADER_ORIGINAL_PREFIX,
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_PARTITION,
    HEADER_SOURCE_TIMESTAMP,
    HEADER_SOURCE_TOPIC,
    MAX_COPIED_HEADER_BYTES,
    MAX_HEADER_CHARS,
    header_bytes,
    truncate_text,
)

__all__ = [
    "ConnectContext",
    "DeadLetter",
    "copied_headers",
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

Header = tuple[str, bytes | None]
_RESERVED = ("hudi.sink.", CONNECT_ERRORS_PREFIX)


def copied_headers(headers: Iterable[tuple[str, bytes | None]] | None,
                   limit: int = MAX_COPIED_HEADER_BYTES) -> tuple[Header, ...]:
    """The record's own headers as its letter carries them: a null value stays null (Kafka
    tells it apart from an empty one), a name in our or Connect's namespace is renamed to
    ``hudi.sink.original.<name>`` (a reader of the letter must not take the record's
    ``hudi.sink.error.class`` for ours), and past ``limit`` bytes the rest are left out with
    :data:`HEADER_HEADERS_TRUNCATED` saying how many."""
    kept: list[Header] = []
    used = dropped = dropped_bytes = 0
    for name, value in headers or ():
        name = str(name)
        if name.startswith(_RESERVED):
            name = HEADER_ORIGINAL_PREFIX + name
        raw = None if value is None else bytes(value)
        size = len(name.encode()) + len(raw or b"")
        if dropped or used + size > limit:
            dropped, dropped_bytes = dropped + 1, dropped_bytes + size
            continue
        kept.append((name, raw))
        used += size
    if dropped:
        kept.append((HEADER_HEADERS_TRUNCATED, f"{dropped} headers, {dropped_bytes} bytes".encode()))
    return tuple(kept)


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
    source_headers: tuple[Header, ...] = ()
    """The record's own headers (:func:`copied_headers`), written first (as Kafka Connect's
    DLQ keeps them), so a letter replayed byte-for-byte carries them again; ours follow."""

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
        headers: Iterable[tuple[str, bytes | None]] | None = None,
    ) -> DeadLetter:
        """Build the dead letter of a record the decoder rejected (key and value kept as-is,
        headers by :func:`copied_headers`)."""
        return cls(topic=topic, partition=partition, offset=offset, timestamp_ms=timestamp_ms,
                   key=key, value=value, error_class=rejected.error_class,
                   message=truncate_text(rejected.message),
                   source_headers=copied_headers(headers))

    def headers(self, connect: ConnectContext | None = None) -> list[Header]:
        """Kafka headers: the record's own, ours (:data:`DLQ_HEADER_NAMES` order), then
        Kafka Connect's when ``connect`` is given."""
        ours: list[Header] = [
            (HEADER_SOURCE_TOPIC, header_bytes(self.topic)),
            (HEADER_SOURCE_PARTITION, str(self.partition).encode()),
            (HEADER_SOURCE_OFFSET, str(self.offset).encode()),
            (HEADER_SOURCE_TIMESTAMP, str(self.timestamp_ms).encode()),
            (HEADER_ERROR_CLASS, header_bytes(self.error_class)),
            (HEADER_ERROR_MESSAGE, header_bytes(self.message)),
        ]
        return [*self.source_headers, *ours, *(connect.headers(self) if connect else ())]


_KEY_ERRORS = frozenset({KEY_PARTITION_MISMATCH})
"""Error classes about the record's key (Connect's KEY_CONVERTER stage); every other one is
about its value (VALUE_CONVERTER)."""
DECODER_CLASS = "hudi_sink.services.participant.decoder.RecordDecoder"
"""What ``__connect.errors.class.name`` names: the code that refused the record."""


@dataclass(frozen=True, slots=True)
class ConnectContext:
    """Who wrote the letter, for Kafka Connect's context headers: the connector is the sink
    (``name``), the task the participant process."""

    connector: str
    task: str

    def headers(self, letter: DeadLetter) -> list[tuple[str, bytes]]:
        """Connect's ``__connect.errors.*`` headers of ``letter`` (``DeadLetterQueueReporter``'s
        names and order). There is no Java exception: the exception class is the error class
        and the "stack trace" the one line ``<class>: <message>``."""
        stage = "KEY_CONVERTER" if letter.error_class in _KEY_ERRORS else "VALUE_CONVERTER"
        return [
            (CONNECT_TOPIC, header_bytes(letter.topic)),
            (CONNECT_PARTITION, str(letter.partition).encode()),
            (CONNECT_OFFSET, str(letter.offset).encode()),
            (CONNECT_CONNECTOR_NAME, header_bytes(self.connector)),
            (CONNECT_TASK_ID, header_bytes(self.task)),
            (CONNECT_STAGE, stage.encode()),
            (CONNECT_CLASS_NAME, DECODER_CLASS.encode()),
            (CONNECT_EXCEPTION_CLASS, header_bytes(letter.error_class)),
            (CONNECT_EXCEPTION_MESSAGE, header_bytes(letter.message)),
            (CONNECT_EXCEPTION_STACKTRACE,
             header_bytes(f"{letter.error_class}: {letter.message}")),
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
