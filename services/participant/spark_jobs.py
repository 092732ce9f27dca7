"""The process's Spark slots, shared by its flushes: several flushes per Spark job.

Why: every Spark job pays a fixed cost whatever its size (planning, serialising the rows into
the task, the output committer: about 0.25 s of an idle 2-core machine, several times that
under load), and with ``transaction.flush_bytes`` bounding a flush, 1 KB records make flushes
of ~32k rows, where that fixed cost is as large as the writing itself. When flushes of
several partitions wait for a slot, one job now writes them all: their tables are
concatenated with their ``__hs_part`` indices shifted apart, so every planned file is still
its own directory in the job's output, and each flush gets back exactly its own files.

Nothing changes for exactly-once: a job that fails fails every flush in it, and each flush
retries on its own with fresh file names (``Flusher``); a flush whose instant ended while it
waited is refused before its job starts (``still_wanted``), as it was before it took a slot.
A job holds at most ``max_job_bytes`` of Arrow data (a single larger flush runs alone), so
the driver's heap needs stay what two flushes needed.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from shared.spark_writer import PART_COLUMN, PlannedFile, SparkWriter, WrittenFile
from shared.threads import in_daemon_thread

__all__ = ["SparkJobs"]


@dataclass
class _Request:
    table: pa.Table
    plans: list[PlannedFile]
    work_dir: str
    still_wanted: Callable[[], bool]
    done: asyncio.Future[list[WrittenFile] | None] = field(repr=False)


class SparkJobs:
    """At most ``slots`` Spark jobs at once; waiting flushes are batched into the next."""

    def __init__(self, writer: SparkWriter, slots: int, max_job_bytes: int) -> None:
        self._writer = writer
        self._slots = slots
        self._max_job_bytes = max_job_bytes
        self._waiting: list[_Request] = []
        self._jobs: set[asyncio.Task[None]] = set()
        self.jobs_run = 0
        """Spark jobs started (observability and tests)."""

    async def write(self, table: pa.Table, plans: list[PlannedFile], work_dir: str,
                    still_wanted: Callable[[], bool]) -> list[WrittenFile] | None:
        """Write one flush (see ``SparkWriter.write``); None when ``still_wanted`` said no
        before its job started. Cancelling the await withdraws a flush that has not started
        (one that has runs on: Python cannot interrupt a Spark call)."""
        request = _Request(table, plans, work_dir, still_wanted,
                           asyncio.get_running_loop().create_future())
        self._waiting.append(request)
        self._dispatch()
        try:
            return await asyncio.shield(request.done)
        except asyncio.CancelledError:
            if request in self._waiting:
                self._waiting.remove(request)
            # A job already running still settles it: nobody reads that outcome any more.
            request.done.add_done_callback(lambda done: done.cancelled() or done.exception())
            raise

    def _dispatch(self) -> None:
        while self._waiting and len(self._jobs) < self._slots:
            batch = self._take_batch()
            if not batch:
                continue
            task = asyncio.get_running_loop().create_task(self._run(batch))
            self._jobs.add(task)
            task.add_done_callback(self._job_done)

    def _take_batch(self) -> list[_Request]:
        """The waiting flushes that still matter, oldest first, up to ``max_job_bytes``."""
        batch: list[_Request] = []
        size = 0
        while self._waiting:
            request = self._waiting[0]
            if not request.still_wanted():
                self._waiting.pop(0)
                request.done.set_result(None)
                continue
            nbytes = request.table.nbytes
            if batch and size + nbytes > self._max_job_bytes:
                break
            batch.append(self._waiting.pop(0))
            size += nbytes
        return batch

    def _job_done(self, task: asyncio.Task[None]) -> None:
        self._jobs.discard(task)
        if not task.cancelled():
            self._dispatch()

    async def _run(self, batch: list[_Request]) -> None:
        table, plans = _combine(batch)
        self.jobs_run += 1
        try:
            written = await in_daemon_thread(self._writer.write, table, plans, batch[0].work_dir)
        except asyncio.CancelledError:  # the service is stopping: so are its flushes
            for request in batch:
                request.done.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - every flush of the job failed alike
            for request in batch:
                if not request.done.done():
                    request.done.set_exception(exc)
            return
        for request, files in zip(batch, _split(batch, written), strict=True):
            if not request.done.done():
                request.done.set_result(files)


def _combine(batch: list[_Request]) -> tuple[pa.Table, list[PlannedFile]]:
    """One table and plan for the batch: each flush's file indices shifted past the ones
    before it, so no two flushes share a ``__hs_part`` directory."""
    if len(batch) == 1:
        return batch[0].table, batch[0].plans
    tables, plans, shift = [], [], 0
    for request in batch:
        index = request.table.column(PART_COLUMN)
        shifted = pc.add(index, pa.scalar(shift, index.type))
        position = request.table.schema.get_field_index(PART_COLUMN)
        tables.append(request.table.set_column(position, PART_COLUMN, shifted))
        plans += [dataclasses.replace(plan, index=plan.index + shift) for plan in request.plans]
        shift += len(request.plans)
    return pa.concat_tables(tables), plans


def _split(batch: list[_Request], written: list[WrittenFile]) -> list[list[WrittenFile]]:
    """Each flush's own files back, with its own (unshifted) plans."""
    by_index = {file.planned.index: file for file in written}
    result, shift = [], 0
    for request in batch:
        files = [dataclasses.replace(by_index[plan.index + shift], planned=plan)
                 for plan in request.plans if plan.index + shift in by_index]
        result.append(files)
        shift += len(request.plans)
    return result
