"""Read-ahead: a partition keeps decoding while its instant's report runs.

Why: a report waits for the instant's last flush, and in upsert mode that flush is the merge,
which on a large table takes many seconds. A partition paused for all of that time meets its
next instant with a backlog it must first fetch and decode, so records wait one more instant
(and one more merge) than they need to; under a steady load the backlog grows from instant to
instant. Measured on ``hudi-sink bench --mode upsert`` (1M-row table, 10,000 updates/s, 2
cores): the participant drained only a fraction of each instant's records before the END
after it.

What keeps it exactly-once: the held records are nothing but "the records from offset
``start`` on, decoded by ``decoder``", which no instant owns yet. The next START adopts them
only when it starts the partition at exactly ``start`` and its schema leaves the decoder as it
was; otherwise they are dropped and the records are fetched again from START's offset, as
without read-ahead. Read-ahead stops (and the partition pauses) before any record that needs
an instant to be handled (a dead letter, a record that cannot be decoded yet, a failure under
``errors.tolerance: fail``) and when it holds a full buffer: the instant decodes those once it
has started. Dead letters, the DLQ and the counters of the reported instant are never touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from hudi_sink.services.participant.decoded import Row, Skipped
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.keyed.fold import Change, KeyedFold

__all__ = ["ReadAhead"]


@dataclass
class ReadAhead:
    """Records decoded from ``start`` on, past the end of a reported instant."""

    start: int
    decoder: RecordDecoder
    """The decoder they were decoded by: START adopts them only if it keeps this one."""
    keyed: bool
    max_records: int
    max_bytes: int
    next_offset: int = field(init=False)
    rows: list[Row] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    changes: KeyedFold = field(default_factory=KeyedFold)
    buffered_bytes: int = 0
    records_skipped: int = 0
    unknown_fields: int = 0
    stopped: bool = False
    """A record only an instant may handle came: nothing more is held (it is decoded again
    once the next instant starts)."""

    def __post_init__(self) -> None:
        self.next_offset = self.start

    @property
    def blocked(self) -> bool:
        """Takes no more records: the partition may as well pause until START."""
        held = len(self.changes) if self.keyed else len(self.rows)
        return self.stopped or held >= self.max_records or self.buffered_bytes >= self.max_bytes

    def accept(self, records: Iterable[Any], decode: Callable[[Any], object]) -> None:
        """Decode fetched records in order (``decode``: the partition's own, which adds Kafka
        metadata to rows); stop before the first one an instant must handle."""
        for record in records:
            if self.blocked:
                return
            if record.offset < self.next_offset:
                continue
            result = decode(record)
            if isinstance(result, Change):
                self.changes.add(result)
                self.buffered_bytes += len(record.value or b"") + len(record.key or b"")
            elif isinstance(result, Row):
                self.rows.append(result)
                self.offsets.append(record.offset)
                self.buffered_bytes += len(record.value)
                self.unknown_fields += result.unknown_fields or 0
            elif isinstance(result, Skipped):
                self.records_skipped += 1
            else:  # Deferred, Rejected: for the instant to handle, with its DLQ and rules
                self.stopped = True
                return
            self.next_offset = record.offset + 1
