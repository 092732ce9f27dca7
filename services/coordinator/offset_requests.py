"""``POST /offsets`` on the leader: one pending change, carried out at an instant boundary.

Why at a boundary, as a commit of its own (``shared.hudi.offset_change``): offsets are what a
commit stores, and the next instant's START tells every participant where to begin. Carried
out between two instants, the change is

- *fenced and decided once*: a COMMIT entry in the sink log at the leader's next number; a
  zombie leader cannot make it, and a crash after it is rolled forward by the next leader
  (before it, the pending instant is rolled back: the change did not happen). Either way it
  applies exactly once;
- *clean for the participants*: the instant before it is committed or rolled back first (the
  request ends the open instant at once), and the next START carries the new offsets. A
  participant that begins an instant drops whatever it buffered and seeks to the START's
  offset; a flush of the old instant still running is not part of the new one (its files are
  in the old instant's staging, never listed), and a status that did not start at the new
  offset is refused (``CommitState.record_status``). So no record below a new offset is
  written after the change.

A request belongs to one leadership: when leadership ends before it was carried out it is
dropped, never applied later by surprise, and ``GET /offsets`` says so (``last_request``);
whether a change interrupted by a crash applied is what the committed offsets show.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.instants import reserve_instant
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.errors import HudiSinkError
from hudi_sink.shared.hudi.offset_change import OffsetChange, change_metadata
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.kafka.partition_key import PartitionKey, offsets_by_text, offsets_text
from hudi_sink.shared.schema.evolution import DDL_KEY

__all__ = ["OffsetRequests", "new_request_id"]

log = logging.getLogger("hudi_sink.coordinator")


def new_request_id() -> str:
    return uuid.uuid4().hex


class _Open(Protocol):
    @property
    def instant(self) -> str: ...


class _Driver(Protocol):
    """What ``TransactionDriver`` offers here (its instant picker and committed offsets)."""

    latest_instant: str | None
    starting: str | None
    committed_offsets: dict[PartitionKey, int]

    @property
    def current(self) -> _Open | None: ...


class OffsetRequests:
    """The pending offset change of this leadership (at most one) and the last outcome."""

    def __init__(self, config: SinkConfig, table: HudiTable, committer: TableCommitter,
                 schema_json: Callable[[], str]) -> None:
        self._config = config
        self._table = table
        self._committer = committer
        self._schema_json = schema_json
        self.pending: OffsetChange | None = None
        self._epoch: int | None = None  # the committer epoch the pending change was accepted in
        self.last: dict[str, Any] | None = None
        """The outcome of the latest request: ``state`` (pending, applied, dropped), its id,
        offsets and reason, and the commit that carried it."""

    def submit(self, change: OffsetChange, leading: bool = True) -> None:
        """Queue ``change`` for the next boundary; HudiSinkError (409 at REST) while another
        one is pending (two changes in one boundary would hide one from the audit) or when
        this coordinator no longer leads (``leading``: checked after the caller's awaits, so
        a request accepted as leadership ends is refused, never applied by a later leader).
        The change belongs to the committer's current epoch: ``apply`` drops it under any
        other."""
        if not leading:
            raise HudiSinkError("this coordinator stopped leading while the request was "
                                "checked; nothing was changed, retry on the leader")
        if self.pending is not None:
            raise HudiSinkError(f"offset change {self.pending.request_id} is still pending; "
                                "retry once GET /offsets shows it applied")
        self.pending = change
        self._epoch = self._committer.epoch
        self.last = self._outcome(change, "pending")

    def drop(self, why: str) -> None:
        """Leadership ended before the change was carried out: forget it (module docstring)."""
        if self.pending is not None:
            log.warning("offset change %s dropped: %s", self.pending.request_id, why)
            self.last = {**self._outcome(self.pending, "dropped"), "detail": why}
            self.pending = None

    async def apply(self, driver: _Driver) -> str | None:
        """Carry out the pending change as a commit of its own (call while no instant is
        open); returns its instant, None when nothing is pending."""
        change = self.pending
        if change is None:
            return None
        if self._epoch != self._committer.epoch:  # accepted under another leadership
            self.drop(f"accepted under epoch {self._epoch}, now {self._committer.epoch}")
            return None
        committed = dict(driver.committed_offsets)
        latest = await asyncio.to_thread(self._table.latest_commit_metadata)
        extra = (latest or {}).get("extraMetadata") or {}
        instant = driver.starting = reserve_instant(driver)  # before any await: one picker
        try:
            await asyncio.to_thread(self._committer.abort_foreign, None)
            await asyncio.to_thread(self._committer.start, instant)
            metadata = change_metadata(
                change, committed, topics=list(self._config.kafka.topics),
                schema_json=str(extra.get("schema") or self._schema_json()),
                epoch=self._committer.epoch, sink_name=self._config.name,
                operation="UPSERT" if self._config.table.write_mode == "upsert" else "INSERT")
            if isinstance(extra.get(DDL_KEY), str):  # the evolved table schema stays the table's
                metadata["extraMetadata"][DDL_KEY] = extra[DDL_KEY]
            await asyncio.to_thread(self._committer.commit, instant, metadata, [])
        finally:
            driver.starting = None
        driver.committed_offsets = change.applied_to(committed)
        self.pending = None
        self.last = {**self._outcome(change, "applied"), "commit_time": instant}
        log.warning("offsets set by %s in commit %s: %s (was %s); reason: %s", change.set_by,
                    instant, offsets_text(change.offsets),
                    offsets_text({k: committed[k] for k in change.offsets if k in committed}),
                    change.reason)
        return instant

    @staticmethod
    def _outcome(change: OffsetChange, state: str) -> dict[str, Any]:
        return {"state": state, "request_id": change.request_id, "reason": change.reason,
                "offsets": offsets_by_text(change.offsets)}

