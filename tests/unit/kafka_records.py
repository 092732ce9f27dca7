"""A fetched Kafka record as ``TransactionParticipant.accept`` reads it (offset, value, key,
timestamp), for tests that feed a participant without a broker."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rec:
    offset: int
    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = 0
