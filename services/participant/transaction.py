"""TransactionParticipant: the state of one assigned Kafka partition (RFC-32's participant).

No I/O here: the service feeds it records and control decisions and performs what it asks
(flush, send, seek, pause). That keeps the exactly-once rules in one testable place:

- ``begin`` resets to the coordinator's offset (the coordinator is the source of truth);
- records below ``next_offset`` were already written in this instant and are skipped;
  later offsets are accepted in order, gaps are normal;
- every accepted offset ends as exactly one row, one dead letter, or one skipped tombstone;
- a flush that fails for good (or any other loss of buffered rows) *gives up* the instant:
  the partition then reports nothing of it (no files, ``next_offset == start_offset``), so
  the coordinator carries its offset and the next instant writes the same records again.
  Reporting the offsets of rows that no listed file holds would be silent data loss.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hudi_sink.services.participant.dead_letters import DeadLetter
from hudi_sink.services.participant.decoded import Deferred, Rejected, Row, Skipped, add_kafka_metadata
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.keyed.changes import KeyedDecoder
from hudi_sink.services.participant.keyed.fold import Change, Folded, KeyedFold, Outcome
from hudi_sink.services.participant.read_ahead import ReadAhead
from hudi_sink.shared.kafka.partition_key import PartitionKey
from hudi_sink.shared.kafka.protocol import StagedFile, WriteCounts, WriteStatus
from hudi_sink.shared.runtime.states import PARTITION_TRANSITIONS, PartitionPhase, StateMachine
from hudi_sink.shared.schema.table_schema import TableSchema

__all__ = ["TransactionParticipant", "PendingBuffer", "DRAIN_MIN_S", "DRAIN_MAX_S"]

DRAIN_MIN_S = 0.05
DRAIN_MAX_S = 2.0
_AHEAD_PHASES = (PartitionPhase.ENDING, PartitionPhase.REPORTED, PartitionPhase.WAITING)


@dataclass
class PendingBuffer:
    """Rows taken out of the buffer for one flush."""

    rows: list[Row]
    offsets: list[int]
    flush_no: int
    instant: str
    final: bool = False
    """The instant's last flush (END asked for it), not one of a full buffer: only it may
    pack into a small file group (``services.participant.packing``)."""
    changes: dict[str, Folded] | None = None
    """Upsert mode: the instant's changes folded per record key (``rows`` stay empty)."""
    schema: TableSchema | None = None
    """The instant's table schema the rows were decoded with (and are written with)."""


@dataclass
class TransactionParticipant:
    topic: str
    partition: int
    decoder: RecordDecoder
    flush_records: int
    fail_on_error: bool
    buffer_bytes: int = 24 << 20
    """A flush starts at ``flush_records`` rows or this many value bytes, whichever is first."""
    keyed: KeyedDecoder | None = None
    """Upsert mode: records become changes of their keys, folded until END (one merge per
    instant: a full buffer pauses the partition instead of flushing)."""
    decoder_for: Callable[[str | None, bool | None], RecordDecoder] | None = field(
        default=None, repr=False)
    """A decoder for an instant's table schema and whether writer schemas evolve it (START's;
    None: the config's)."""
    schema_key: tuple[str | None, bool | None] = (None, None)
    """What ``decoder`` was built for (``decoder_for``'s arguments)."""
    proposed_schema: str | None = None
    """The table schema (DDL) a record's writer schema needs: reported, applied next instant."""
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    """Monotonic seconds for ``last_signal_at`` (the service's clock, injectable in tests)."""
    phase_machine: StateMachine[PartitionPhase] = field(init=False)
    instant: str | None = None
    epoch: int = 0
    start_offset: int = 0
    next_offset: int = 0
    """Next offset to write: every offset below it (from start_offset) is handled."""
    committed_offset: int | None = None
    fetched_offset: int | None = None  # highest offset fetched + 1
    highwater: int | None = None
    """The partition's high watermark as the last fetch response reported it (never
    ``end_offsets``, which the development broker gets wrong for multi-record batches)."""
    rows: list[Row] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    buffered_bytes: int = 0  # value bytes of ``rows``
    flush_no: int = 0
    changes: KeyedFold = field(default_factory=KeyedFold)
    """Upsert mode: this instant's changes so far."""
    staged: list[StagedFile] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    counters: WriteCounts = field(default_factory=WriteCounts)  # this instant's, for WriteStatus
    failure: str | None = None
    deferred: str | None = None
    """Why intake stopped before ``next_offset`` for now (a registry out of reach); the intake
    seeks back there, pauses, and clears it when it tries again."""
    flushes: set[asyncio.Task[Any]] = field(default_factory=set)
    last_status: WriteStatus | None = None
    drain_started: float | None = None
    drain_target: int | None = None
    """The high watermark when END came: drained once fetched up to it."""
    abandoned: bool = False
    """The partition moved to another member: nothing more is written for this state."""
    gave_up: str | None = None
    """Why this instant's rows cannot all be written (a failed flush): report nothing."""
    last_signal_at: float = field(init=False)
    """When we last heard from / spoke to the coordinator about this partition."""
    last_announced_at: float = 0.0  # when a status re-send last announced it (rate limit)
    ahead: ReadAhead | None = None
    """Records decoded past the reported instant's end, for the next START to adopt
    (``services.participant.read_ahead``)."""

    def __post_init__(self) -> None:
        self.phase_machine = StateMachine(
            f"{self.topic}-{self.partition}", PartitionPhase.WAITING, PARTITION_TRANSITIONS
        )
        self.last_signal_at = self.clock()

    @property
    def phase(self) -> PartitionPhase:
        return self.phase_machine.state

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.partition)

    # --- decisions --------------------------------------------------------------------
    def should_begin(self, instant: str, epoch: int) -> bool:
        """A START for a newer (epoch, instant) than ours restarts us; repeats are ignored."""
        if self.instant is None:
            return True
        return (epoch, instant) > (self.epoch, self.instant)

    def should_flush(self) -> bool:
        held = len(self.changes) if self.keyed is not None else len(self.rows)
        return self.accepting and (held >= self.flush_records
                                   or self.buffered_bytes >= self.buffer_bytes)

    @property
    def accepting(self) -> bool:
        return self.phase in (PartitionPhase.WRITING, PartitionPhase.DRAINING)

    @property
    def reading_ahead(self) -> bool:
        return self.ahead is not None and self.phase in _AHEAD_PHASES

    @property
    def ahead_blocked(self) -> bool:
        return self.reading_ahead and self.ahead is not None and self.ahead.blocked

    def start_ahead(self) -> int | None:
        """The instant's records are all taken (its report runs): hold what follows for the
        next START. Returns the offset to fetch from, or None when the next instant will not
        start where this one ends (it gave up or failed)."""
        if self.phase is not PartitionPhase.ENDING or self.gave_up is not None or self.failure:
            return None
        if self.ahead is not None and self.ahead.start == self.next_offset:
            return self.ahead.next_offset  # a report tried again: keep what it holds
        self.ahead = ReadAhead(self.next_offset, self.decoder, self.keyed is not None,
                               self.flush_records, self.buffer_bytes)
        return self.next_offset

    def is_drained(self, now: float, fetched_now: bool) -> bool:
        """END asks for what was fetched: a partition is drained once a fetch round brings
        nothing new for it or it has fetched up to the high watermark END found (records
        produced just before END still make it; later ones are read ahead), or after
        DRAIN_MAX_S whatever arrives."""
        if self.phase is not PartitionPhase.DRAINING or self.drain_started is None:
            return False
        waited = now - self.drain_started
        caught_up = self.drain_target is not None and (self.fetched_offset or 0) >= self.drain_target
        return ((not fetched_now or caught_up) and waited >= DRAIN_MIN_S) or waited >= DRAIN_MAX_S

    # --- transitions ------------------------------------------------------------------
    def begin(self, instant: str, epoch: int, offset: int, schema: str | None = None,
              follow: bool | None = None) -> None:
        """Start instant ``instant`` from ``offset`` with the instant's table ``schema`` (DDL)
        and ``follow`` (whether writer schemas evolve it; None: the config's for both);
        anything of an older instant is dropped (its staged files never become visible and
        are cleaned up by the coordinator)."""
        self.phase_machine.transition_to(PartitionPhase.WRITING, f"start {instant} @ {offset}")
        ahead, self.ahead = self.ahead, None
        if (schema, follow) != self.schema_key and self.decoder_for is not None:
            self.decoder, self.schema_key = self.decoder_for(schema, follow), (schema, follow)
        self.proposed_schema = None
        self.instant, self.epoch = instant, epoch
        self.start_offset = self.next_offset = offset
        self._empty_buffer()
        self.flush_no = 0
        self.staged = []
        self.dead_letters = []
        self.counters = WriteCounts()
        self.failure = None
        self.gave_up = None
        self.drain_started = None
        self.flushes = set()
        self.last_status = None
        self.last_signal_at = self.clock()
        if ahead is not None and ahead.start == offset and ahead.decoder is self.decoder:
            self._adopt(ahead)

    def _adopt(self, ahead: ReadAhead) -> None:
        """The instant starts exactly where the read-ahead did, with its decoder: its records
        are this instant's first (the intake fetches on from ``next_offset``)."""
        self.rows, self.offsets, self.changes = ahead.rows, ahead.offsets, ahead.changes
        self.buffered_bytes = ahead.buffered_bytes
        self.counters.records_skipped = ahead.records_skipped
        self.counters.unknown_fields = ahead.unknown_fields
        self.next_offset = ahead.next_offset

    def accept(self, records: Iterable[Any]) -> None:
        """Decode fetched records (``offset``, ``value``, ``key``, ``timestamp``) in order."""
        records = list(records)
        if records:
            self.fetched_offset = max(self.fetched_offset or 0, records[-1].offset + 1)
        if self.reading_ahead:
            assert self.ahead is not None
            self.ahead.accept(records, self._decoded)
            return
        for record in records:
            offset = record.offset
            if not self.accepting:
                return
            if offset < self.next_offset:
                continue  # already handled in this instant (re-fetch after a seek)
            result = self._decoded(record)
            if isinstance(result, Change):
                self.changes.add(result)
                self.buffered_bytes += len(record.value or b"") + len(record.key or b"")
            elif isinstance(result, Row):
                self.rows.append(result)
                self.offsets.append(offset)
                self.buffered_bytes += len(record.value)
                if result.unknown_fields:  # spares the usual row a model attribute set (~0.6 µs)
                    self.counters.unknown_fields += result.unknown_fields
            elif isinstance(result, Skipped):
                self.counters.records_skipped += 1
            elif isinstance(result, Deferred):
                # Good data that cannot be decoded now: stop before it (the intake seeks back
                # and pauses the partition); nothing past it is accepted or committed.
                self.deferred = result.reason
                if result.schema is not None:
                    self.proposed_schema = result.schema
                return
            elif isinstance(result, Rejected):
                if self.fail_on_error:
                    self.failure = (
                        f"{self.topic}-{self.partition} offset {offset}: "
                        f"{result.error_class}: {result.message}"
                    )
                    self.phase_machine.transition_to(PartitionPhase.FAILED, self.failure)
                    return  # next_offset stays at the bad record: nothing past it commits
                self.dead_letters.append(
                    DeadLetter.from_rejected(
                        result,
                        topic=self.topic,
                        partition=self.partition,
                        offset=offset,
                        timestamp_ms=record.timestamp,
                        key=record.key,
                        value=record.value,
                        headers=getattr(record, "headers", None),
                    )
                )
                self.counters.records_dlq += 1
            self.next_offset = offset + 1

    def _decoded(self, record: Any) -> object:
        """One record decoded (upsert mode: as a change of its key), Kafka metadata added."""
        offset = record.offset
        if self.keyed is None:
            result = self.decoder.decode(record.value)
            if isinstance(result, Row) and self.decoder.schema.kafka_metadata:
                add_kafka_metadata(result, self.topic, self.partition, offset, record.timestamp,
                                   record.key)
            return result
        change = self.keyed.change(self.decoder, record.value, record.key, self.partition, offset)
        if (isinstance(change, Change) and change.row is not None
                and self.decoder.schema.kafka_metadata):
            add_kafka_metadata(change.row, self.topic, self.partition, offset,  # type: ignore[arg-type]
                               record.timestamp, record.key)
        return change

    def _empty_buffer(self) -> None:
        self.rows, self.offsets, self.buffered_bytes = [], [], 0
        self.changes = KeyedFold()

    def take_dead_letters(self) -> list[DeadLetter]:
        """Dead letters decoded since the last call (sent at once, not held until END)."""
        letters, self.dead_letters = self.dead_letters, []
        return letters

    def take_buffer(self, final: bool = False) -> PendingBuffer | None:
        if self.instant is None or self.gave_up is not None:
            return None
        if self.keyed is not None:
            # One merge per instant, at END: every key is decided once against the table.
            if not final or not len(self.changes):
                return None
            taken = PendingBuffer([], [], self.flush_no, self.instant, final,
                                  changes=self.changes.result(), schema=self.decoder.schema)
        elif not self.rows:
            return None
        else:
            taken = PendingBuffer(self.rows, self.offsets, self.flush_no, self.instant, final,
                                  schema=self.decoder.schema)
        self._empty_buffer()
        self.flush_no += 1
        return taken

    def add_staged(self, instant: str, files: list[StagedFile],
                   outcomes: Mapping[str, int] | None = None) -> bool:
        """Record a finished flush (upsert mode: with what became of its changes' offsets
        besides being written); False if it belongs to an instant we already left."""
        if instant != self.instant:
            return False
        self.staged.extend(files)
        self.counters.records_written += sum(f.new_records for f in files)
        outcomes = outcomes or {}
        self.counters.records_deleted += outcomes.get(Outcome.DELETED, 0)
        self.counters.records_delete_noop += outcomes.get(Outcome.DELETE_NOOP, 0)
        self.counters.records_superseded += outcomes.get(Outcome.SUPERSEDED, 0)
        return True

    def give_up(self, instant: str, reason: str) -> bool:
        """Rows of ``instant`` were lost before reaching a staged file (a flush failed for
        good): stop intake and report nothing of this instant. False when the partition
        already moved on to another instant (then nothing of ``instant`` will be reported)."""
        if instant != self.instant:
            return False
        if self.gave_up is None:
            self.gave_up = reason
            self.failure = reason
        self._empty_buffer()
        self.ahead = None  # the next instant starts where this one did, not where it ended
        if self.phase in (PartitionPhase.WRITING, PartitionPhase.DRAINING):
            self.phase_machine.transition_to(PartitionPhase.FAILED, reason)
        return True

    def drain(self, now: float) -> None:
        self.phase_machine.transition_to(PartitionPhase.DRAINING, f"end {self.instant}")
        self.drain_started, self.drain_target = now, self.highwater

    def end(self) -> None:
        self.phase_machine.transition_to(PartitionPhase.ENDING, f"drained {self.instant}")

    def build_status(self) -> WriteStatus:
        if self.gave_up is not None:
            # Nothing of this instant: the coordinator carries our start offset, and every
            # file we staged for it is unlisted, so it goes to deletion.
            return WriteStatus(
                topic=self.topic,
                partition=self.partition,
                start_offset=self.start_offset,
                next_offset=self.start_offset,
                files=[],
                failed=self.gave_up,
                table_schema=self.proposed_schema,
            )
        return WriteStatus(
            topic=self.topic,
            partition=self.partition,
            start_offset=self.start_offset,
            next_offset=self.next_offset,
            files=list(self.staged),
            failed=self.failure,
            table_schema=self.proposed_schema,
            **self.counters.model_dump(),
        )

    def reported(self, status: WriteStatus) -> None:
        self.phase_machine.transition_to(PartitionPhase.REPORTED, f"status {self.instant}")
        self.last_status = status
        self.dead_letters = []
        self.last_signal_at = self.clock()

    def acked(self, offset: int) -> None:
        self.phase_machine.transition_to(PartitionPhase.WAITING, f"ack {self.instant}")
        self.committed_offset = offset
        self.last_signal_at = self.clock()

    def lag(self) -> int | None:
        """Records in Kafka not yet in the table: high watermark minus the table's offset
        (the last acked commit's, or before any ACK the offset the coordinator started us
        at, which is the latest commit's)."""
        table_offset = self.committed_offset
        if table_offset is None and self.instant is not None:
            table_offset = self.start_offset
        end = self.highwater if self.highwater is not None else self.fetched_offset
        if end is None or table_offset is None:
            return None
        return max(0, end - table_offset)
