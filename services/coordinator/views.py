"""What the coordinator's admin routes show: transactions and the open one's progress.

The domain (``transaction``, ``history``) records and builds these; the routes (``rest``)
return them. Domain modules never import ``rest``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from hudi_sink.services.coordinator.commit_state import CommitState
from hudi_sink.shared.kafka.partition_key import key_text
from hudi_sink.shared.runtime.states import CoordinatorPhase

__all__ = ["TransactionView", "CurrentTransaction", "current_transaction", "OffsetsView",
           "OffsetsRequest", "OffsetsAccepted"]


class TransactionView(BaseModel):
    commit_time: str
    state: Literal["committed", "aborted", "inflight"]
    epoch: int | None = None
    records: int | None = None
    files: int | None = None
    bytes: int | None = None
    offsets: dict[str, int] = {}
    duration_s: float | None = None
    reason: str | None = None
    carried: list[str] | None = None
    """Partitions (``topic:p``) whose offsets a partial commit carried forward."""


class CurrentTransaction(BaseModel):
    role: Literal["leader", "standby"]
    phase: str
    commit_time: str | None
    epoch: int
    partitions_expected: int
    partitions_answered: list[str]
    partitions_pending: list[str]
    age_s: float | None
    leader: dict[str, Any]


def current_transaction(*, leading: bool, phase: CoordinatorPhase, txn: CommitState | None,
                        epoch: int, leader: dict[str, Any], now: float) -> CurrentTransaction:
    """``GET /transactions/current``: ``txn`` is the open transaction (if any), ``now`` on
    the monotonic clock it was started with."""
    return CurrentTransaction(
        role="leader" if leading else "standby",
        phase=phase.value,
        commit_time=txn.instant if txn else None,
        epoch=epoch,
        partitions_expected=len(txn.expected) if txn else 0,
        partitions_answered=sorted(key_text(k) for k in txn.statuses) if txn else [],
        partitions_pending=[key_text(k) for k in txn.pending()] if txn else [],
        age_s=round(now - txn.started_at, 3) if txn else None,
        leader=leader,
    )


class OffsetsView(BaseModel):
    """``GET /offsets``: the offsets the latest commit stores (where every partition resumes)
    and the outcome of the latest ``POST /offsets`` this coordinator took."""

    commit_time: str | None
    offsets: dict[str, int]
    last_request: dict[str, Any] | None = None


class OffsetsRequest(BaseModel):
    """``POST /offsets``: ``{"offsets": {"<topic>:<p>": <offset>}, "reason": "…"}`` (the
    entries are checked by the service, so an error names the bad one)."""

    offsets: dict[str, Any]
    reason: str = ""


class OffsetsAccepted(BaseModel):
    accepted: bool
    request_id: str
    offsets: dict[str, int]
    detail: str
