"""What the participant's admin routes show, built from its domain state.

The routes (``rest``) answer with these models; the service builds them from its partitions.
Domain modules never import ``rest``: the view types live here, beside the one place that
knows how a :class:`TransactionParticipant` reads as a view.
"""

from __future__ import annotations

from pydantic import BaseModel

from hudi_sink.services.participant.transaction import TransactionParticipant

__all__ = ["PartitionView"]


class PartitionView(BaseModel):
    """One assigned partition as ``GET /partitions`` shows it."""

    topic: str
    partition: int
    state: str
    commit_time: str | None
    coordinator_epoch: int
    start_offset: int
    buffered_records: int
    staged_files: int
    records_written: int
    records_dlq: int
    last_written_offset: int | None
    committed_offset: int | None
    fetched_offset: int | None
    lag: int | None
    failed: str | None
    unknown_fields: list[str] = []
    """Fields of this partition's values that are not columns (ignored, counted), at most 50."""
    schema_pending: str | None = None
    """The table schema a writer schema needs (schema evolution): applied at the next instant."""

    @classmethod
    def of(cls, state: TransactionParticipant) -> PartitionView:
        return cls(
            topic=state.topic,
            partition=state.partition,
            state=state.phase.value,
            commit_time=state.instant,
            coordinator_epoch=state.epoch,
            start_offset=state.start_offset,
            buffered_records=len(state.rows),
            staged_files=len(state.staged),
            records_written=state.counters.records_written,
            records_dlq=state.counters.records_dlq,
            last_written_offset=state.next_offset - 1 if state.instant else None,
            committed_offset=state.committed_offset,
            fetched_offset=state.fetched_offset,
            lag=state.lag(),
            failed=state.failure,
            unknown_fields=sorted(state.decoder.unknown_names),
            schema_pending=state.proposed_schema,
        )
