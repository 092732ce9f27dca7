"""A fetched Kafka record as ``TransactionParticipant.accept`` reads it (offset, value, key,
timestamp), and a participant fed with values, for tests without a broker."""

from __future__ import annotations

from dataclasses import dataclass

from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.transaction import TransactionParticipant


@dataclass(frozen=True)
class Rec:
    offset: int
    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = 0


def accept_values(decoder: RecordDecoder, values: list[bytes]) -> TransactionParticipant:
    """A participant of ``t-0`` in an open instant that accepted ``values`` at offsets 0, 1, …"""
    p = TransactionParticipant(topic="t", partition=0, flush_records=100, fail_on_error=False,
                               decoder=decoder)
    p.begin("20250101000000001", 1, 0)
    p.accept([Rec(i, v) for i, v in enumerate(values)])
    return p
