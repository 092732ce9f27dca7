"""SparkJobs: flushes waiting for a Spark slot share the next job, and each gets back exactly
its own files. The writer is a stand-in that records what each job was given and answers as
``SparkWriter.write`` does (one file per planned file with that index's rows); the real
writer's side is in tests/integration/test_spark_writer.py."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable

import pyarrow as pa
import pytest
from eventually import eventually_async

from hudi_sink.services.participant.spark_jobs import SparkJobs
from hudi_sink.services.participant.spark_writer import PART_COLUMN, PlannedFile, SparkWriteError, WrittenFile


class GatedWriter:
    """Each job blocks (in its thread) until the test opens the gate."""

    def __init__(self) -> None:
        self.jobs: list[tuple[list[str], list[int]]] = []
        self.gate = threading.Event()
        self.poison: set[str] = set()
        """A job holding one of these files fails (bad data, an out-of-memory batch)."""

    def write(self, table: pa.Table, files: list[PlannedFile], work_dir: str) -> list[WrittenFile]:
        self.jobs.append(([p.file_name for p in files], [p.index for p in files]))
        self.gate.wait(10)
        if self.poison & {p.file_name for p in files}:
            raise SparkWriteError("injected")
        counts = Counter(table.column(PART_COLUMN).to_pylist())
        names = table.column("name").to_pylist()
        for planned in files:  # every row sits in the file its index names
            rows = [n for n, i in zip(names, table.column(PART_COLUMN).to_pylist(), strict=True)
                    if i == planned.index]
            assert all(n.startswith(planned.file_name) for n in rows), (planned, rows)
        return [WrittenFile(p, counts[p.index], 100 + p.index) for p in files]


def _flush(tag: str, files: int, rows_per_file: int = 3) -> tuple[pa.Table, list[PlannedFile]]:
    plans = [PlannedFile(index=i, file_id=f"{tag}{i}", partition_path="", file_name=f"{tag}{i}",
                         staged_path=f"/s/{tag}{i}") for i in range(files)]
    index = [i for i in range(files) for _ in range(rows_per_file)]
    table = pa.table({"name": [f"{tag}{i}/row" for i in index],
                      PART_COLUMN: pa.array(index, pa.int32())})
    return table, plans


def _waiting(jobs: SparkJobs, count: int) -> Callable[[], bool]:
    """``count`` flushes queued for a slot (what a flush does at once when none is free)."""
    return lambda: len(jobs._waiting) == count


async def test_flushes_waiting_for_a_slot_share_one_job_and_get_their_own_files() -> None:
    writer = GatedWriter()
    jobs = SparkJobs(writer, slots=1, max_job_bytes=1 << 30)  # type: ignore[arg-type]
    first = asyncio.create_task(jobs.write(*_flush("a", 2), "/w", lambda: True))
    await eventually_async(lambda: len(writer.jobs) == 1, 5, "the first job")
    waiting = [asyncio.create_task(jobs.write(*_flush(tag, n), "/w", lambda: True))
               for tag, n in (("b", 1), ("c", 3))]
    await eventually_async(_waiting(jobs, 2), 5, "b and c queued for the slot")
    assert len(writer.jobs) == 1  # one slot: b and c wait
    writer.gate.set()
    a_files = await first
    b_files, c_files = await asyncio.gather(*waiting)
    assert writer.jobs[1] == (["b0", "c0", "c1", "c2"], [0, 1, 2, 3])  # one job, shifted
    assert [(f.planned.file_name, f.planned.index, f.num_records) for f in b_files] == [("b0", 0, 3)]
    assert [(f.planned.file_name, f.planned.index) for f in c_files] == [
        ("c0", 0), ("c1", 1), ("c2", 2)]
    assert [f.size_bytes for f in c_files] == [101, 102, 103]
    assert [f.planned.file_name for f in a_files] == ["a0", "a1"] and jobs.jobs_run == 2


async def test_a_job_holds_at_most_max_job_bytes_unless_one_flush_is_larger() -> None:
    writer = GatedWriter()
    one = _flush("x", 1)[0].nbytes
    jobs = SparkJobs(writer, slots=1, max_job_bytes=2 * one)  # type: ignore[arg-type]
    tasks = [asyncio.create_task(jobs.write(*_flush(tag, 1), "/w", lambda: True))
             for tag in "pqrst"]
    writer.gate.set()
    await asyncio.gather(*tasks)
    assert [names for names, _ in writer.jobs] == [["p0"], ["q0", "r0"], ["s0", "t0"]]


async def test_a_failed_shared_job_retries_each_flush_alone_so_only_the_bad_one_fails() -> None:
    """One bad flush must not make the healthy partitions batched with it give up."""
    writer = GatedWriter()
    writer.poison = {"p0"}
    jobs = SparkJobs(writer, slots=1, max_job_bytes=1 << 30)  # type: ignore[arg-type]
    blocker = asyncio.create_task(jobs.write(*_flush("a", 1), "/w", lambda: True))
    await eventually_async(lambda: len(writer.jobs) == 1, 5, "the first job")
    tasks = {tag: asyncio.create_task(jobs.write(*_flush(tag, 1), "/w", lambda: True))
             for tag in "bpc"}
    later = asyncio.create_task(jobs.write(*_flush("d", 1), "/w", lambda: True))
    await eventually_async(_waiting(jobs, 4), 5, "b, p, c and d queued for the slot")
    writer.gate.set()
    await blocker
    with pytest.raises(SparkWriteError):
        await tasks["p"]
    assert [f.planned.file_name for f in await tasks["b"]] == ["b0"]
    assert [f.planned.file_name for f in await tasks["c"]] == ["c0"]
    assert [f.planned.file_name for f in await later] == ["d0"]
    assert [names for names, _ in writer.jobs] == [
        ["a0"], ["b0", "p0", "c0", "d0"], ["b0"], ["p0"], ["c0"], ["d0"]]


async def test_only_flushes_of_one_staging_directory_share_a_job() -> None:
    writer = GatedWriter()
    jobs = SparkJobs(writer, slots=1, max_job_bytes=1 << 30)  # type: ignore[arg-type]
    blocker = asyncio.create_task(jobs.write(*_flush("a", 1), "/t1", lambda: True))
    await eventually_async(lambda: len(writer.jobs) == 1, 5, "the first job")
    tasks = [asyncio.create_task(jobs.write(*_flush(tag, 1), work_dir, lambda: True))
             for tag, work_dir in (("b", "/t1"), ("c", "/t1"), ("d", "/t2"), ("e", "/t2"))]
    await eventually_async(_waiting(jobs, 4), 5, "b, c, d and e queued for the slot")
    writer.gate.set()
    await asyncio.gather(blocker, *tasks)
    assert [names for names, _ in writer.jobs] == [["a0"], ["b0", "c0"], ["d0", "e0"]]


async def test_a_flush_no_longer_wanted_is_refused_and_a_cancelled_one_withdrawn() -> None:
    writer = GatedWriter()
    jobs = SparkJobs(writer, slots=1, max_job_bytes=1 << 30)  # type: ignore[arg-type]
    blocker = asyncio.create_task(jobs.write(*_flush("a", 1), "/w", lambda: True))
    await eventually_async(lambda: len(writer.jobs) == 1, 5, "the first job")
    wanted = {"b": True}
    refused = asyncio.create_task(jobs.write(*_flush("b", 1), "/w", lambda: wanted["b"]))
    withdrawn = asyncio.create_task(jobs.write(*_flush("c", 1), "/w", lambda: True))
    kept = asyncio.create_task(jobs.write(*_flush("d", 1), "/w", lambda: True))
    await eventually_async(_waiting(jobs, 3), 5, "b, c and d queued for the slot")
    wanted["b"] = False  # its instant ended while it waited
    withdrawn.cancel()
    writer.gate.set()
    await blocker
    assert await refused is None
    with pytest.raises(asyncio.CancelledError):
        await withdrawn
    assert [f.planned.file_name for f in await kept] == ["d0"]
    assert [names for names, _ in writer.jobs] == [["a0"], ["d0"]]


async def test_a_planned_file_the_job_did_not_write_fails_the_flush() -> None:
    """Its rows' offsets would be reported with no file holding them."""

    class ForgetfulWriter(GatedWriter):
        def write(self, table: pa.Table, files: list[PlannedFile],
                  work_dir: str) -> list[WrittenFile]:
            return super().write(table, files, work_dir)[:-1]

    writer = ForgetfulWriter()
    writer.gate.set()
    jobs = SparkJobs(writer, slots=1, max_job_bytes=1 << 30)  # type: ignore[arg-type]
    with pytest.raises(SparkWriteError, match="no file for"):
        await jobs.write(*_flush("a", 2), "/w", lambda: True)


async def test_a_job_that_never_returns_fails_every_flush_abandons_the_session_and_is_raised() -> None:
    """A driver out of heap never answers: after ``job_timeout_s`` the running and the
    waiting flushes fail, nothing more is dispatched, the session is abandoned (its JVM
    killed), and ``watch`` raises so the participant exits instead of stalling."""
    from hudi_sink.shared.errors import SparkHungError

    class HungWriter(GatedWriter):
        abandoned = 0

        def abandon(self) -> None:
            self.abandoned += 1
            self.gate.set()  # what killing the JVM does to the hung call

    writer = HungWriter()
    jobs = SparkJobs(writer, slots=1, max_job_bytes=1 << 30, job_timeout_s=0.3)  # type: ignore[arg-type]
    watcher = asyncio.create_task(jobs.watch())
    running = asyncio.create_task(jobs.write(*_flush("a", 1), "/w", lambda: True))
    await eventually_async(lambda: len(writer.jobs) == 1, 5, "the first job")
    waiting = asyncio.create_task(jobs.write(*_flush("b", 1), "/w", lambda: True))
    with pytest.raises(SparkHungError, match="spark.job_timeout_ms"):
        await running
    with pytest.raises(SparkHungError):
        await waiting
    with pytest.raises(SparkHungError):
        await asyncio.wait_for(watcher, 1)
    with pytest.raises(SparkHungError):  # a later flush is refused at once, no new job
        await jobs.write(*_flush("c", 1), "/w", lambda: True)
    assert writer.abandoned == 1 and len(writer.jobs) == 1


async def test_jobs_within_the_timeout_are_not_touched() -> None:
    writer = GatedWriter()
    writer.gate.set()
    jobs = SparkJobs(writer, slots=2, max_job_bytes=1 << 30, job_timeout_s=5)  # type: ignore[arg-type]
    watcher = asyncio.create_task(jobs.watch())
    files = await jobs.write(*_flush("a", 2), "/w", lambda: True)
    assert files is not None and len(files) == 2
    assert not watcher.done()
    watcher.cancel()


async def test_a_shared_job_failing_because_the_hung_driver_was_killed_fails_its_flushes() -> None:
    """Two slots: A hangs; B1 and B2 share the other slot's next job, which fails when the
    hung JVM is killed. They must fail, not wait for a retry that will never be dispatched."""
    from hudi_sink.shared.errors import SparkHungError

    class KilledWriter:
        def __init__(self) -> None:
            self.jobs: list[list[str]] = []
            self.release_c = threading.Event()
            self.killed = threading.Event()

        def write(self, table: pa.Table, files: list[PlannedFile], work_dir: str) -> list[WrittenFile]:
            names = [p.file_name for p in files]
            self.jobs.append(names)
            if names == ["c0"]:
                self.release_c.wait(10)
                return [WrittenFile(p, 3, 1) for p in files]
            self.killed.wait(10)  # A, and then B1+B2, hang until the JVM is killed
            raise SparkWriteError("the JVM was killed")

        def abandon(self) -> None:
            self.killed.set()

    writer = KilledWriter()
    jobs = SparkJobs(writer, slots=2, max_job_bytes=1 << 30, job_timeout_s=0.5)  # type: ignore[arg-type]
    a = asyncio.create_task(jobs.write(*_flush("a", 1), "/w", lambda: True))
    c = asyncio.create_task(jobs.write(*_flush("c", 1), "/w", lambda: True))
    await eventually_async(lambda: len(writer.jobs) == 2, 5, "A and C running")
    b = [asyncio.create_task(jobs.write(*_flush(tag, 1), "/w", lambda: True)) for tag in ("b", "d")]
    await eventually_async(_waiting(jobs, 2), 5, "B1 and B2 queued behind A and C")
    writer.release_c.set()
    assert await c is not None
    await eventually_async(lambda: ["b0", "d0"] in writer.jobs, 5, "B1 and B2 sharing a job")
    for task in (a, *b):
        with pytest.raises(SparkHungError):
            await asyncio.wait_for(task, 3)


async def test_a_driver_gone_under_a_shared_job_fails_every_flush_and_is_raised() -> None:
    """The JVM exited under a job of two flushes (out of heap): unlike an ordinary failure,
    the flushes are not put back to run alone on the dead gateway; they and the waiting ones
    fail, the session is abandoned and ``watch`` raises, so the participant exits."""
    from hudi_sink.shared.errors import SparkDriverGone

    class GoneWriter(GatedWriter):
        abandoned = 0

        def write(self, table: pa.Table, files: list[PlannedFile], work_dir: str) -> list[WrittenFile]:
            self.jobs.append(([p.file_name for p in files], [p.index for p in files]))
            self.gate.wait(10)
            raise SparkDriverGone("the Spark driver JVM exited with code 52")

        def abandon(self) -> None:
            self.abandoned += 1

    writer = GoneWriter()
    jobs = SparkJobs(writer, slots=1, max_job_bytes=1 << 30)  # type: ignore[arg-type]
    watcher = asyncio.create_task(jobs.watch())
    first = asyncio.create_task(jobs.write(*_flush("a", 1), "/w", lambda: True))
    await eventually_async(lambda: len(writer.jobs) == 1, 5, "the first job")
    shared = [asyncio.create_task(jobs.write(*_flush(tag, 1), "/w", lambda: True)) for tag in "bc"]
    await eventually_async(_waiting(jobs, 2), 5, "b and c queued to share the next job")
    writer.gate.set()
    for task in (first, *shared):
        with pytest.raises(SparkDriverGone, match="code 52"):
            await asyncio.wait_for(task, 3)
    with pytest.raises(SparkDriverGone):
        await asyncio.wait_for(watcher, 1)
    assert writer.abandoned == 1 and len(writer.jobs) == 1  # b and c never ran on it
