"""One flush: a buffer of decoded rows → Parquet base files in the instant's staging area.

Spark runs in worker threads (never on the event loop), at most ``MAX_CONCURRENT_FLUSHES``
jobs at once; flushes that wait for one share the next (:mod:`.spark_jobs`). Each flush is
retried with back-off, since its rows exist only in memory; the
caller decides what a flush that failed for good means for the partition (it gives the
instant up). The back-off is the process's retry policy (``shared.runtime.retry``: first wait
``service.retry_backoff_ms``, doubling; given up after ``FLUSH_ATTEMPTS`` attempts or
``service.retry_timeout_ms``, whichever comes first). A flush for an instant its partition
no longer holds is refused before it writes anything: nothing would ever list its files.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from hudi_sink.services.participant.flush_plan import (
    FlushInput,
    PreparedFlush,
    name_flush,
    prepare_flush,
)
from hudi_sink.services.participant.keyed.fold import Folded
from hudi_sink.services.participant.keyed.merge import MergePlan, plan_merge
from hudi_sink.services.participant.packing import Carry, choose_carries, may_pack
from hudi_sink.services.participant.spark_jobs import SparkJobs
from hudi_sink.services.participant.spark_writer import SparkWriteError, SparkWriter, WrittenFile
from hudi_sink.services.participant.transaction import PendingBuffer, TransactionParticipant
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.hudi.slices import GroupKey, SliceCache, source_index
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.kafka.protocol import StagedFile
from hudi_sink.shared.runtime.faults import ENV as FAULTS_ENV
from hudi_sink.shared.runtime.faults import Faults
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.runtime.retry import retrying
from hudi_sink.shared.schema.table_schema import TableSchema

__all__ = ["Flusher", "FlushResult", "MAX_CONCURRENT_FLUSHES", "FLUSH_ATTEMPTS"]

log = logging.getLogger("hudi_sink.participant.flush")

MAX_CONCURRENT_FLUSHES = 2
FLUSH_ATTEMPTS = 4
"""At most this many attempts; the waits between them (a Spark Connect restart or a driver
rebuild takes seconds) are 2, 4, 8 s with the default ``service.retry_backoff_ms``."""


@dataclass(frozen=True)
class FlushResult:
    files: list[StagedFile] | None
    """The staged files; None when nothing was written (refused or failed)."""
    failure: str | None = None
    """Why the flush failed for good (None when it succeeded or was refused)."""
    outcomes: Mapping[str, int] | None = None
    """Upsert mode: offsets per ``keyed.fold.Outcome`` (written ones included)."""


class Flusher:
    def __init__(self, config: SinkConfig, schema: TableSchema, table: HudiTable,
                 writer: SparkWriter, metrics: Metrics, faults: Faults, writer_nonce: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._schema = schema
        self._table = table
        self._writer = writer
        self._metrics = metrics
        self._faults = faults
        self._writer_nonce = writer_nonce
        self._clock = clock
        self._jobs = SparkJobs(writer, MAX_CONCURRENT_FLUSHES,
                               max_job_bytes=config.spark_job_bytes,
                               job_timeout_s=config.spark.job_timeout_ms / 1000)
        self._flush_seq = 0
        """Flushes started by this process (fault injection counts them from 1)."""
        self._attempts = 0
        """Flush attempts of this process: the write token's middle number (unique per attempt)."""
        self._slices = SliceCache(table)
        self._packed: dict[tuple[str, int, str], set[GroupKey]] = {}
        """(topic, partition, instant) → groups it wrote a slice of in that instant."""
        self._planning = asyncio.Lock()
        """Merges are planned one at a time, in the order their partitions ended (see
        :meth:`_merge`)."""

    async def flush(self, state: TransactionParticipant, buffer: PendingBuffer) -> FlushResult:
        self._flush_seq += 1
        flush_seq = self._flush_seq
        try:
            written = await self._write_with_retries(state, buffer, flush_seq)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure means the rows are lost here
            return FlushResult(None, f"flush of {state.topic}-{state.partition} for "
                                     f"{buffer.instant} failed for good: {exc}")
        if written is None:
            return FlushResult(None)
        files, seconds, outcomes = written
        log.debug("%s-%d: flush for %s wrote %d files, %d rows, in %.2f s", state.topic,
                  state.partition, buffer.instant, len(files), sum(w.num_records for w in files),
                  seconds)
        self._metrics.flush_completed(seconds)
        base = self._config.table.base_path
        return FlushResult([
            StagedFile(
                staged_path=posixpath.relpath(w.planned.staged_path, base),
                final_path=posixpath.join(w.planned.partition_path, w.planned.file_name)
                if w.planned.partition_path
                else w.planned.file_name,
                file_id=w.planned.file_id,
                partition_path=w.planned.partition_path,
                num_records=w.num_records,
                size_bytes=w.size_bytes,
                prev_commit=w.planned.carry.prev_commit if w.planned.carry else None,
                num_inserts=w.num_records - w.planned.carry.rows if w.planned.carry else None,
                num_updates=w.planned.carry.updates if w.planned.carry else 0,
                num_deletes=w.planned.carry.deletes if w.planned.carry else 0,
            )
            for w in files
        ], outcomes=outcomes)

    async def watch_spark(self) -> None:
        """Raises once a Spark job is found hung (``SparkJobs.watch``): a routine of the
        service, so the participant stops with an error instead of stalling."""
        await self._jobs.watch()

    async def _carries(self, state: TransactionParticipant, buffer: PendingBuffer,
                       prepared: PreparedFlush, spec: FlushInput) -> dict[int, Carry]:
        """The instant's last flush packs a trickle into the partition's own small groups
        (``services.participant.packing``); the timeline is read in a worker thread. A
        table that cannot be read now only means new groups."""
        small = self._config.table.small_file_bytes
        if small <= 0:
            return {}
        for old in [k for k in self._packed if k[:2] == state.key and k[2] != buffer.instant]:
            del self._packed[old]
        used = self._packed.setdefault((*state.key, buffer.instant), set())
        try:
            latest = await asyncio.to_thread(self._slices.latest)
        except Exception as exc:  # noqa: BLE001 - packing is best-effort: new groups then
            log.warning("%s-%d: table view unreadable, writing new file groups: %s",
                        state.topic, state.partition, exc)
            return {}
        carries = choose_carries(prepared.paths, prepared.bytes_per_path(), latest,
                                 owner=spec.source_index, small_file_bytes=small, used=used,
                                 base_path=self._config.table.base_path,
                                 budget_bytes=self._config.spark_job_bytes)
        used.update((prepared.paths[i], c.file_id) for i, c in carries.items())
        return carries

    async def _merge(self, changes: dict[str, Folded], spec: FlushInput, schema: TableSchema,
                     what: str, still_wanted: Callable[[], bool]) -> MergePlan | None:
        """Upsert mode: the merge of the instant's changes, planned against the latest
        committed slices of the groups this partition owns (worker thread: it reads them).
        Unlike packing it is not optional: a touched group must get its new slice, so any
        failure here fails the flush (the partition then redoes the instant).

        One plan at a time: planning is Python work (key lookups, the per-key decisions,
        the winners' Arrow form) that holds the GIL, so the plans of partitions ending
        together, run side by side, all finished at about the same moment and the Spark
        driver sat idle until then (bench, 8 partitions: 2-6 s of every update commit).
        Planned one after the other, the first partition's job starts after its own plan
        and the others' plans run while Spark writes. None: the instant ended while the plan
        waited for its turn (``still_wanted``), so it is not planned at all."""
        cfg = self._config

        def plan() -> MergePlan:
            return plan_merge(changes, self._slices.latest(), owner=spec.source_index,
                              schema=schema, spec=spec, fs=self._table.fs,
                              base_path=cfg.table.base_path,
                              small_file_bytes=cfg.table.small_file_bytes,
                              precombine=cfg.table.precombine_field)

        queued = self._clock()
        async with self._planning:
            if not still_wanted():
                return None
            planning = self._clock()
            work = asyncio.ensure_future(asyncio.to_thread(plan))
            try:
                merge = await asyncio.shield(work)
            except asyncio.CancelledError:
                # The thread plans on whatever happens to this task: the turn is kept until it
                # ends, so two plans never run side by side.
                await asyncio.wait([work])
                if not work.cancelled():
                    work.exception()  # retrieved: this flush reports its cancellation
                raise
        log.debug("%s: merge of %d keys planned in %.2f s (%.2f s waiting for another's plan)",
                  what, len(changes), self._clock() - planning, planning - queued)
        return merge

    @staticmethod
    def refuses(state: TransactionParticipant, instant: str) -> bool:
        """A flush for an instant this partition no longer holds must not write: nothing
        will ever list its files (a late flush into a finished instant)."""
        return state.abandoned or state.instant != instant

    async def _write_with_retries(
        self, state: TransactionParticipant, buffer: PendingBuffer, flush_seq: int
    ) -> tuple[list[WrittenFile], float, Mapping[str, int] | None] | None:
        """(written files, seconds, upsert outcomes) of the first attempt that succeeds; None
        if refused."""
        cfg = self._config
        staging = self._table.staging_dir(buffer.instant)
        spec = FlushInput(
            topic=state.topic,
            partition=state.partition,
            source_index=source_index(cfg.kafka.topics, state.topic, state.partition),
            instant=buffer.instant,
            flush_no=buffer.flush_no,
            writer_nonce=self._writer_nonce,
            staging_dir=staging,
            hive_style=cfg.table.hive_style_partitioning,
        )
        what = f"flush of {state.topic}-{state.partition} for {buffer.instant}"
        # The rows' Arrow form is built once, before the flush waits for a Spark slot, and
        # the Python rows are dropped: a waiting flush holds its data once, compactly.
        outcomes: Mapping[str, int] | None = None
        if buffer.changes is not None:
            merge = await self._merge(buffer.changes, spec, buffer.schema or self._schema, what,
                                      lambda: not self.refuses(state, buffer.instant))
            if merge is None:
                _log_refused(state, buffer.instant)
                return None
            buffer.changes = None
            outcomes = merge.outcomes
            if merge.prepared is None:  # nothing to write: every key superseded or absent
                return [], 0.0, outcomes
            prepared, carries, best_effort = merge.prepared, merge.carries, False
        else:
            prepared = await asyncio.to_thread(
                prepare_flush, buffer.rows, buffer.offsets, buffer.schema or self._schema, spec
            )
            buffer.rows, buffer.offsets = [], []
            packs = may_pack(final=buffer.final, flush_no=buffer.flush_no)
            carries = await self._carries(state, buffer, prepared, spec) if packs else {}
            best_effort = True
        tries = 0
        async for attempt in retrying(cfg.service, what, attempts=FLUSH_ATTEMPTS,
                                      on_failure=lambda _exc: self._metrics.flush_failed()):
            with attempt:
                if self.refuses(state, buffer.instant):
                    _log_refused(state, buffer.instant)
                    return None
                if tries and carries and best_effort:
                    # Packing is best-effort: an old slice Spark cannot read or union (gone,
                    # another schema) must never stop the partition: new groups instead.
                    log.warning("%s: writing new file groups instead of packing after a failed "
                                "attempt", what)
                    carries = {}
                tries += 1
                self._attempts += 1
                started = self._clock()
                # Named anew on every attempt: fresh file ids and a fresh attempt number in
                # the write token, so a file an earlier attempt left behind (a packed slice
                # keeps its file id) can never collide with this one.
                table, plans = name_flush(prepared, replace(spec, flush_no=self._attempts), carries)
                if self._faults.flush_fails(flush_seq):
                    raise SparkWriteError(f"injected failure of flush {flush_seq} ({FAULTS_ENV})")
                # Refused when the instant ended while the flush waited for its job.
                written = await self._jobs.write(
                    table, plans, staging, lambda: not self.refuses(state, buffer.instant))
                if written is None:
                    return None
                return written, self._clock() - started, outcomes
        raise AssertionError("unreachable")


def _log_refused(state: TransactionParticipant, instant: str) -> None:
    """A flush refused because its instant ended (``Flusher.refuses``): before its plan, or
    before a write attempt."""
    log.info("%s-%d: flush for finished instant %s refused", state.topic, state.partition, instant)
