"""Header names of both dead-letter topics, and how header text is bounded and encoded.

The data DLQ (``<name>-dlq``, rejected records) and the deletion DLQ (intents that could not
be carried out) share the provenance and error header names (docs/design.md §5), so one operator
tool reads both; the deletion-specific ones carry a ``deletion`` infix. Every producer of a
dead letter takes its names and its truncation from here, so the two cannot drift apart.
"""

from __future__ import annotations

__all__ = [
    "HEADER_SOURCE_TOPIC",
    "HEADER_SOURCE_PARTITION",
    "HEADER_SOURCE_OFFSET",
    "HEADER_SOURCE_TIMESTAMP",
    "HEADER_ERROR_CLASS",
    "HEADER_ERROR_MESSAGE",
    "HEADER_VALUE_TRUNCATED",
    "HEADER_ORIGINAL_PREFIX",
    "HEADER_HEADERS_TRUNCATED",
    "MAX_COPIED_HEADER_BYTES",
    "HEADER_ATTEMPT",
    "HEADER_DLQ_REASON",
    "HEADER_REPLAYED_FROM",
    "CONNECT_ERRORS_PREFIX",
    "CONNECT_TOPIC",
    "CONNECT_PARTITION",
    "CONNECT_OFFSET",
    "CONNECT_CONNECTOR_NAME",
    "CONNECT_TASK_ID",
    "CONNECT_STAGE",
    "CONNECT_CLASS_NAME",
    "CONNECT_EXCEPTION_CLASS",
    "CONNECT_EXCEPTION_MESSAGE",
    "CONNECT_EXCEPTION_STACKTRACE",
    "MAX_HEADER_CHARS",
    "truncate_text",
    "header_bytes",
]

HEADER_SOURCE_TOPIC = "hudi.sink.source.topic"
HEADER_SOURCE_PARTITION = "hudi.sink.source.partition"
HEADER_SOURCE_OFFSET = "hudi.sink.source.offset"
HEADER_SOURCE_TIMESTAMP = "hudi.sink.source.timestamp"
HEADER_ERROR_CLASS = "hudi.sink.error.class"
HEADER_ERROR_MESSAGE = "hudi.sink.error.message"
HEADER_VALUE_TRUNCATED = "hudi.sink.value.truncated"
"""On a data dead letter whose value was cut to fit the broker: the original size in bytes."""
HEADER_ORIGINAL_PREFIX = "hudi.sink.original."
"""A record's own header in our or Connect's namespace (``hudi.sink.*``, ``__connect.errors.*``)
is copied into its letter under this prefix, so the only headers of those names on a letter
are the ones that describe this failure."""
HEADER_HEADERS_TRUNCATED = "hudi.sink.headers.truncated"
"""On a data dead letter whose record's headers were cut to :data:`MAX_COPIED_HEADER_BYTES`:
how many of them were left out, and their bytes (``<count> headers, <bytes> bytes``)."""
MAX_COPIED_HEADER_BYTES = 64 * 1024
"""Most bytes (names and values) of a record's own headers copied into its letter, so a record
with huge headers still makes a letter the broker takes."""
HEADER_ATTEMPT = "hudi.sink.deletion.attempt"
HEADER_DLQ_REASON = "hudi.sink.deletion.dlq.reason"
HEADER_REPLAYED_FROM = "hudi.sink.deletion.replayed.from"

CONNECT_ERRORS_PREFIX = "__connect.errors."
"""Kafka Connect's dead-letter context headers (``DeadLetterQueueReporter``), added beside
ours with ``errors.deadletterqueue.context.headers.enable``: the names below follow it, so
tooling written for a Connect sink's DLQ reads ours."""
CONNECT_TOPIC = CONNECT_ERRORS_PREFIX + "topic"
CONNECT_PARTITION = CONNECT_ERRORS_PREFIX + "partition"
CONNECT_OFFSET = CONNECT_ERRORS_PREFIX + "offset"
CONNECT_CONNECTOR_NAME = CONNECT_ERRORS_PREFIX + "connector.name"
CONNECT_TASK_ID = CONNECT_ERRORS_PREFIX + "task.id"
CONNECT_STAGE = CONNECT_ERRORS_PREFIX + "stage"
CONNECT_CLASS_NAME = CONNECT_ERRORS_PREFIX + "class.name"
CONNECT_EXCEPTION_CLASS = CONNECT_ERRORS_PREFIX + "exception.class.name"
CONNECT_EXCEPTION_MESSAGE = CONNECT_ERRORS_PREFIX + "exception.message"
CONNECT_EXCEPTION_STACKTRACE = CONNECT_ERRORS_PREFIX + "exception.stacktrace"

MAX_HEADER_CHARS = 1000
"""Longest error text kept in a header, so one huge exception or bad record cannot bloat
every letter and retry."""
_ELLIPSIS = "..."


def truncate_text(text: str) -> str:
    """``text`` cut to :data:`MAX_HEADER_CHARS` characters, marked with ``...`` when cut."""
    if len(text) <= MAX_HEADER_CHARS:
        return text
    return text[: MAX_HEADER_CHARS - len(_ELLIPSIS)] + _ELLIPSIS


def header_bytes(text: str) -> bytes:
    """UTF-8 header value; ``backslashreplace`` so a lone surrogate quoted from a record's
    content cannot make building the dead letter itself fail."""
    return text.encode("utf-8", "backslashreplace")
