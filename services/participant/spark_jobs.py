"""The process's Spark slots, shared by its flushes: several flushes per Spark job.

Why: every Spark job pays a fixed cost whatever its size (planning, serialising the rows into
the task, the output committer: about 0.25 s of an idle 2-core machine, several times that
under load), and with ``transaction.buffer_bytes`` bounding a flush, 1 KB records make flushes
of ~32k rows, where that fixed cost is as large as the writing itself. When flushes of
several partitions wait for a slot, one job now writes them all: their tables are
concatenated with their ``__hs_part`` indices shifted apart, so every planned file is still
its own directory in the job's output, and each flush gets back exactly its own files.

Nothing changes for exactly-once: a job of several flushes that fails puts each of them
back to run alone, so only a flush that fails by itself fails (and then retries on its own
with fresh file names, ``Flusher``): one bad flush cannot take healthy partitions down with
it. A flush whose instant ended while it waited is refused when its job starts
(``still_wanted``), as it was when it took a slot. Only flushes of one staging directory (one
instant) share a job, and a job holds at most ``max_job_bytes`` of Arrow data (a larger
flush runs alone), so with two slots the driver's heap holds what two flushes did before.

A job that has not returned after ``job_timeout_s`` means the driver stopped answering (a JVM
out of heap never answers the py4j call; no retry can help, and the slot would be lost for
good). Then every flush, waiting or running, fails, the session is abandoned (its local JVM
killed) and :meth:`SparkJobs.watch` raises :class:`SparkHungError`: the participant exits
and its partitions move on, as after a kill, instead of stalling forever. The same when the
local driver JVM has exited under a job (:class:`SparkDriverGone`, e.g. a task out of heap):
PySpark would keep its dead gateway and every retry would fail with "Connection refused".
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from hudi_sink.services.participant.spark_writer import (
    PART_COLUMN,
    PlannedFile,
    SparkWriteError,
    SparkWriter,
    WrittenFile,
)
from hudi_sink.shared.errors import SparkHungError
from hudi_sink.shared.runtime.threads import in_daemon_thread

__all__ = ["SparkJobs"]

log = logging.getLogger("hudi_sink.participant")


@dataclass(eq=False)
class _Request:
    table: pa.Table
    plans: list[PlannedFile]
    work_dir: str
    still_wanted: Callable[[], bool]
    done: asyncio.Future[list[WrittenFile] | None] = field(repr=False)
    alone: bool = False
    """Its shared job failed: it runs by itself, so its own outcome is known."""


class SparkJobs:
    """At most ``slots`` Spark jobs at once; waiting flushes are batched into the next."""

    def __init__(self, writer: SparkWriter, slots: int, max_job_bytes: int,
                 job_timeout_s: float | None = None) -> None:
        self._writer = writer
        self._slots = slots
        self._max_job_bytes = max_job_bytes
        self._job_timeout_s = job_timeout_s
        self._waiting: list[_Request] = []
        self._jobs: set[asyncio.Task[None]] = set()
        self._hung: SparkHungError | None = None
        self._hung_event = asyncio.Event()
        self.jobs_run = 0
        """Spark jobs started (observability and tests)."""

    async def watch(self) -> None:
        """Returns never; raises :class:`SparkHungError` once a job is found hung."""
        await self._hung_event.wait()
        assert self._hung is not None
        raise self._hung

    async def write(self, table: pa.Table, plans: list[PlannedFile], work_dir: str,
                    still_wanted: Callable[[], bool]) -> list[WrittenFile] | None:
        """Write one flush (see ``SparkWriter.write``); None when ``still_wanted`` said no
        before its job started. Cancelling the await withdraws a flush that has not started
        (one that has runs on: Python cannot interrupt a Spark call)."""
        if self._hung is not None:
            raise self._hung
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
        while self._waiting and len(self._jobs) < self._slots and self._hung is None:
            batch = self._take_batch()
            if not batch:
                continue
            task = asyncio.get_running_loop().create_task(self._run(batch))
            self._jobs.add(task)
            task.add_done_callback(self._job_done)

    def _take_batch(self) -> list[_Request]:
        """The waiting flushes that still matter, oldest first: of one staging directory, up
        to ``max_job_bytes``; a flush whose shared job failed goes alone."""
        batch: list[_Request] = []
        size = 0
        while self._waiting:
            request = self._waiting[0]
            if _refused(request):
                self._waiting.pop(0)
                continue
            if batch and (request.alone or request.work_dir != batch[0].work_dir
                          or size + request.table.nbytes > self._max_job_bytes):
                break
            batch.append(self._waiting.pop(0))
            size += request.table.nbytes
            if request.alone:
                break
        return batch

    def _job_done(self, task: asyncio.Task[None]) -> None:
        self._jobs.discard(task)
        if not task.cancelled():
            self._dispatch()

    async def _run(self, batch: list[_Request]) -> None:
        try:
            batch = [request for request in batch if not _refused(request)]  # again, at start
            if not batch:
                return
            table, plans = _combine(batch)
            self.jobs_run += 1
            started = time.monotonic()
            call = in_daemon_thread(self._writer.write, table, plans, batch[0].work_dir)
            try:
                written = await asyncio.wait_for(call, self._job_timeout_s)
                log.debug("Spark job of %d flush(es): %d files, %d rows carried, %.2f s", len(batch),
                          len(plans), sum(p.carry.rows for p in plans if p.carry),
                          time.monotonic() - started)
            except TimeoutError:
                self._lose(batch, SparkHungError(
                    f"a Spark job of {len(batch)} flush(es) did not return within "
                    f"spark.job_timeout_ms ({self._job_timeout_s:g} s): the Spark driver is not "
                    "answering (out of heap?); the participant exits so its partitions move on"))
                return
            for request, files in zip(batch, _split(batch, written), strict=True):
                if not request.done.done():
                    request.done.set_result(files)
        except asyncio.CancelledError:  # the service is stopping: so are its flushes
            for request in batch:
                request.done.cancel()
            raise
        except SparkHungError as exc:  # the driver JVM died under the job
            self._lose(batch, exc)
        except BaseException as exc:  # noqa: BLE001 - every flush is told, none waits forever
            self._failed(batch, exc)

    def _lose(self, batch: list[_Request], hung: SparkHungError) -> None:
        """The driver is hung or gone: every flush fails, nothing more is dispatched, the
        session is abandoned, and ``watch`` raises. A hung call's thread is left to the exit."""
        if self._hung is not None:  # the other slot's job, failing as the JVM went
            _fail_all(batch, self._hung)
            return
        self._hung = hung
        self._hung_event.set()  # first: whatever happens below, the participant stops
        _fail_all([*batch, *self._waiting], hung)
        self._waiting.clear()
        try:
            self._writer.abandon()
        except Exception:  # noqa: BLE001 - the exit goes on; the JVM ends with the process
            log.exception("abandoning the hung SparkSession failed")

    def _failed(self, batch: list[_Request], exc: BaseException) -> None:
        """A flush that failed alone fails; flushes that failed together try again alone,
        ahead of the others (``_job_done`` dispatches them). Once the driver is hung nothing
        runs again: they fail too (the other slot's job fails when its JVM is killed)."""
        if self._hung is not None:
            _fail_all(batch, self._hung)
            return
        if len(batch) == 1:
            if not batch[0].done.done():
                batch[0].done.set_exception(exc)
            return
        for request in batch:
            request.alone = True
        self._waiting[:0] = [request for request in batch if not request.done.done()]


def _fail_all(requests: list[_Request], error: SparkHungError) -> None:
    for request in requests:
        if not request.done.done():
            request.done.set_exception(error)


def _refused(request: _Request) -> bool:
    """A flush no longer wanted (its instant ended while it waited) is answered None."""
    if request.still_wanted():
        return False
    if not request.done.done():
        request.done.set_result(None)
    return True


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
    """Each flush's own files back, with its own (unshifted) plans. A planned file the job
    did not write would leave rows whose offsets are reported in no file: refused."""
    by_index = {file.planned.index: file for file in written}
    result, shift = [], 0
    for request in batch:
        missing = [plan.file_name for plan in request.plans if plan.index + shift not in by_index]
        if missing:
            raise SparkWriteError(f"the Spark job wrote no file for {missing}")
        result.append([dataclasses.replace(by_index[plan.index + shift], planned=plan)
                       for plan in request.plans])
        shift += len(request.plans)
    return result
