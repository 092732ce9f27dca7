"""The deletion intent (docs/design.md §4.2): what a ``<name>-deletion`` record says, and its headers.

An intent is a request, never an order: the deleter decides from the table's state whether
the file is really dead, so a forged, stale or duplicated intent cannot delete a live file.
How intents are sent and acknowledged is ``shared.deletion.sender``'s.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hudi_sink.shared.errors import HudiSinkError
from hudi_sink.shared.hudi.naming import is_instant_time, parse_base_file_name
from hudi_sink.shared.kafka.dlq_headers import (
    HEADER_ATTEMPT,
    HEADER_DLQ_REASON,
    HEADER_ERROR_CLASS,
    HEADER_ERROR_MESSAGE,
    HEADER_REPLAYED_FROM,
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_PARTITION,
    HEADER_SOURCE_TOPIC,
    header_bytes,
    truncate_text,
)
from hudi_sink.shared.storage.store_uri import is_object_store_uri

__all__ = [
    "DeletionReason",
    "PendingDelete",
    "DeletionDecodeError",
    "DeletionIntentError",
    "IntentHeaders",
    "intent_for_staged_file",
]


class DeletionReason(StrEnum):
    """Why a file is to be deleted; the deleter's rules differ per reason (docs/design.md §4.3)."""

    ABORTED_INSTANT = "ABORTED_INSTANT"
    """A file of instant T that is being rolled back; dead once the ABORT is decided."""
    UNCOMMITTED_FILE = "UNCOMMITTED_FILE"
    """A staged file of instant T that T's commit does not list; dead once T completes."""
    REPLACED = "REPLACED"
    """A file group replaced by a clustering/replace instant; dead once that completes."""
    CLEANED = "CLEANED"
    """An old file slice removed by a clean instant; dead once that completes."""
    ORPHAN = "ORPHAN"
    """Found by the reconcile scan: no instant references it and it is old enough."""


class DeletionDecodeError(HudiSinkError):
    """A deletion-topic record is not a PendingDelete (bad JSON or missing fields)."""


class DeletionIntentError(HudiSinkError):
    """Intents could not be made durable; the metadata change must not happen."""


def _check_instant(value: str | None, field: str) -> None:
    if value is not None and not is_instant_time(value):
        raise ValueError(f"{field} is not an instant time: {value!r}")


class PendingDelete(BaseModel):
    """One file that may be deleted once the table's state says it is dead.

    Times are epoch seconds (UTC wall clock), because the sender and the deleter are
    different processes, usually on different machines.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    table_path: str = Field(min_length=1)
    """Base path of the table the file belongs to."""
    file_path: str = Field(min_length=1)
    """Absolute path of the file (same spelling as the table's base path)."""
    file_id: str | None = None
    """Hudi file id parsed from the name; None when the file is not a base file."""
    file_instant: str | None = None
    """Instant the file was written for (from its name or its staging directory)."""
    reason: DeletionReason
    killing_instant: str | None = None
    """The instant whose completion (or rollback) makes the file dead; None for ORPHAN."""
    check_in_use: bool = True
    """PIP-186's flag. Carried for the record only: the deleter always checks, because a
    forged intent could clear the flag."""
    not_before: float = 0.0
    """Do not act before this time (epoch seconds)."""
    attempt: int = Field(0, ge=0)
    """0 on first delivery; +1 for every re-enqueue to the retry topic."""
    first_failure_at: float | None = None
    """When the first attempt failed or could not decide (epoch seconds)."""
    created_at: float = Field(default_factory=time.time)

    @model_validator(mode="after")
    def _consistent(self) -> PendingDelete:
        if not (self.file_path.startswith(("/", "file://")) or is_object_store_uri(self.file_path)):
            raise ValueError(f"file_path must be absolute: {self.file_path!r}")
        _check_instant(self.file_instant, "file_instant")
        _check_instant(self.killing_instant, "killing_instant")
        if self.reason is not DeletionReason.ORPHAN and self.killing_instant is None:
            raise ValueError(f"reason {self.reason} needs a killing_instant")
        return self

    def key(self) -> bytes:
        """Record key: the file path, so one file's intents stay in one partition, in order."""
        return self.file_path.encode()

    def encode(self) -> bytes:
        return orjson.dumps(self.model_dump(mode="json"))

    @classmethod
    def decode(cls, data: bytes | None) -> PendingDelete:
        if data is None:
            raise DeletionDecodeError("empty record (tombstone) is not a PendingDelete")
        try:
            return cls.model_validate(orjson.loads(data))
        except (orjson.JSONDecodeError, ValidationError) as exc:
            raise DeletionDecodeError(f"not a PendingDelete: {exc}") from None

    def instants(self) -> list[str]:
        """Every instant the intent names (for the deleter's staleness guard)."""
        return [i for i in (self.killing_instant, self.file_instant) if i is not None]


@dataclass(frozen=True)
class IntentHeaders:
    """The headers a deletion record carries, parsed.

    ``source_*`` is where the intent was first consumed (the deletion topic record): it is set
    on the first re-enqueue and carried unchanged through retries and into the DLQ, so an
    operator can find the original request.
    """

    source_topic: str | None = None
    source_partition: int | None = None
    source_offset: int | None = None
    error_class: str | None = None
    error_message: str | None = None
    attempt: int | None = None
    dlq_reason: str | None = None
    replayed_from: str | None = None

    def to_kafka(self) -> list[tuple[str, bytes]]:
        pairs = [
            (HEADER_SOURCE_TOPIC, self.source_topic),
            (HEADER_SOURCE_PARTITION, None if self.source_partition is None else str(self.source_partition)),
            (HEADER_SOURCE_OFFSET, None if self.source_offset is None else str(self.source_offset)),
            (HEADER_ERROR_CLASS, self.error_class),
            (HEADER_ERROR_MESSAGE, None if self.error_message is None else truncate_text(self.error_message)),
            (HEADER_ATTEMPT, None if self.attempt is None else str(self.attempt)),
            (HEADER_DLQ_REASON, None if self.dlq_reason is None else truncate_text(self.dlq_reason)),
            (HEADER_REPLAYED_FROM, self.replayed_from),
        ]
        return [(k, header_bytes(v)) for k, v in pairs if v is not None]

    @classmethod
    def from_kafka(cls, headers: Iterable[tuple[str, bytes | None]] | None) -> IntentHeaders:
        raw = {k: (v or b"").decode("utf-8", "replace") for k, v in (headers or ())}

        def number(key: str) -> int | None:
            value = raw.get(key)
            try:
                return int(value) if value is not None else None
            except ValueError:
                return None

        return cls(
            source_topic=raw.get(HEADER_SOURCE_TOPIC),
            source_partition=number(HEADER_SOURCE_PARTITION),
            source_offset=number(HEADER_SOURCE_OFFSET),
            error_class=raw.get(HEADER_ERROR_CLASS),
            error_message=raw.get(HEADER_ERROR_MESSAGE),
            attempt=number(HEADER_ATTEMPT),
            dlq_reason=raw.get(HEADER_DLQ_REASON),
            replayed_from=raw.get(HEADER_REPLAYED_FROM),
        )


def _file_facts(path: str, instant: str) -> tuple[str | None, str]:
    """(file id, file instant) of a staged file; its staging directory's instant as fallback."""
    parsed = parse_base_file_name(posixpath.basename(path))
    if parsed is None:
        return None, instant
    return parsed.file_id, parsed.instant


def intent_for_staged_file(
    table_path: str, path: str, instant: str, reason: DeletionReason, not_before: float
) -> PendingDelete:
    """The intent the coordinator sends for one staged file of ``instant``.

    The killing instant is ``instant`` itself: an UNCOMMITTED_FILE is dead once the instant
    completes without listing it, an ABORTED_INSTANT file once the instant is rolled back.
    """
    file_id, file_instant = _file_facts(path, instant)
    return PendingDelete(
        table_path=table_path.rstrip("/") or "/",
        file_path=path,
        file_id=file_id,
        file_instant=file_instant,
        reason=reason,
        killing_instant=instant,
        check_in_use=True,
        not_before=not_before,
    )
