"""The participant's Spark writer: one SparkSession per process, Parquet base files out.

Why one job per flush and not one per table partition: Spark's ``partitionBy`` drops the
partition column and names directories its own way, so the table's own partition column
cannot be used. Instead every row carries a small integer ``__hs_part`` (the index of its
planned file); Spark partitions by *that* column (the real partition column stays in the
data), and each ``__hs_part=i`` directory's single Parquet file is then renamed to its final
Hudi name in the instant's staging area. One job per flush pays Spark's ~0.25 s fixed cost
once, whatever the number of table partitions.

Every call here blocks (py4j/gRPC); services call them through ``asyncio.to_thread`` with at
most two flushes at a time (two cores: more gains nothing, see the measurements).
"""

from __future__ import annotations

import logging
import os
import posixpath
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from hudi_sink.services.participant.carried_rows import (
    StagedInputs,
    frame_with_carried_rows,
    write_empty_slices,
)
from hudi_sink.services.participant.packing import Carry
from hudi_sink.services.participant.parquet_options import (
    LEGACY_FORMAT,
    mostly_distinct_columns,
    wants_legacy_format,
)
from hudi_sink.services.participant.py4j_turns import quick_turns
from hudi_sink.services.participant.spark_connect_url import connect_url
from hudi_sink.shared.config.settings import SparkConfig
from hudi_sink.shared.errors import HudiSinkError, SparkDriverGone
from hudi_sink.shared.redaction import redact_url
from hudi_sink.shared.storage.fs import FileSystem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["PART_COLUMN", "SPARK_CODECS", "PlannedFile", "WrittenFile", "SparkWriter",
           "SparkWriteError"]

log = logging.getLogger("hudi_sink.spark")

PART_COLUMN = "__hs_part"

SPARK_CODECS = {"snappy": "snappy", "zstd": "zstd", "gzip": "gzip", "lz4": "lz4_raw",
                "none": "uncompressed"}
"""``table.parquet_codec`` → Spark's name. ``lz4`` is Parquet's LZ4_RAW: the older LZ4 codec
(Hadoop framing) is deprecated by the Parquet format and not read alike everywhere."""

_BASE_CONF = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.sources.partitionOverwriteMode": "static",
    # One open Parquet writer per planned file instead of sorting the flush by ``__hs_part``
    # first: the sort copies every row once more (measured: a third of a 1 KB-record flush's
    # CPU). Beyond this many files in one flush Spark sorts the rest (still one file per
    # directory: tests/integration/test_spark_writer.py).
    "spark.sql.optimizer.plannedWrite.enabled": "false",
    "spark.sql.maxConcurrentOutputFileWriters": "1000",
    # A carried-rows job unions single-partition buckets, one task each (carried_rows.py); by
    # default Spark 4 keeps the children's shared partitioning, one partition: all buckets ran
    # in one task (JFR: one executor busy; a full-table merge 9.6-11.4 s -> 6.9-7.9 s here).
    "spark.sql.unionOutputPartitioning": "false",
}
_CLASSIC_ONLY_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    # The serial collector: one local driver with Spark's default 1 GB heap gains nothing from
    # G1's concurrent threads and remembered sets. Measured on the bench (600k records of
    # 1 KB, one participant, idle machine, three pairs): participant CPU 72-83 -> 68-73 µs per
    # record, the JVM's peak RSS 1,490 -> 1,407 MB. An operator who gives the driver a heap of
    # several GB sets their own options (G1 keeps such pauses short).
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -Djava.net.preferIPv4Stack=true",
}


class SparkWriteError(HudiSinkError):
    """A flush failed; the session is recreated before the next one."""


@dataclass(frozen=True)
class PlannedFile:
    """One base file a flush will produce: rows with ``__hs_part == index``."""

    index: int
    file_id: str
    partition_path: str
    file_name: str
    staged_path: str
    """Absolute path in ``.hoodie/.temp/<T>/``."""
    carry: Carry | None = None
    """A new slice of an existing group: the old slice whose rows the file also holds."""


@dataclass(frozen=True)
class WrittenFile:
    planned: PlannedFile
    num_records: int
    size_bytes: int


class SparkWriter:
    """Owns the process's SparkSession (classic ``local[N]`` or Spark Connect ``sc://``)."""

    def __init__(self, config: SparkConfig, fs: FileSystem, *, codec: str = "snappy") -> None:
        self._config = config
        self._fs = fs
        self._codec = SPARK_CODECS[codec]
        self._session: SparkSession | None = None
        self._lock = threading.Lock()
        self._abandoned = False
        """The driver stopped answering: no session is built or stopped again."""
        self.warmed = False

    @property
    def is_connect(self) -> bool:
        return self._config.master.startswith("sc://")

    def _build_session(self) -> SparkSession:
        from pyspark.sql import SparkSession

        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # The JVM (a child: it inherits this) otherwise keeps a malloc arena per thread:
        # measured on the bench, a participant's peak RSS 2,160-2,200 -> 1,965-1,995 MB, with
        # throughput within the run-to-run spread. An operator's own value wins.
        os.environ.setdefault("MALLOC_ARENA_MAX", "2")
        builder: Any = SparkSession.builder.appName("hudi-sink-participant")
        if self.is_connect:
            builder = builder.remote(connect_url(self._config.master, self._config.connect_token))
            session = builder.getOrCreate()
            for key, value in {**_BASE_CONF, **self._config.conf}.items():
                try:
                    session.conf.set(key, value)
                except Exception as exc:  # noqa: BLE001 - static confs are refused remotely
                    log.warning("Spark Connect refused conf %s: %s", key, exc)
            return session
        builder = builder.master(self._config.master)
        for key, value in {**_BASE_CONF, **_CLASSIC_ONLY_CONF, **self._config.conf}.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        return session

    def start(self, warm_dir: str | None = None) -> None:
        """Create the session and run tiny jobs so the first real flush is not cold."""
        with self._lock:
            if self._session is None:
                # Spark Connect's URL carries its token (sc://host:15002/;token=…): masked.
                log.info("starting SparkSession (master=%s)", redact_url(self._config.master))
                self._session = self._build_session()
        if warm_dir is not None:
            for _ in range(2):
                target = posixpath.join(warm_dir, uuid.uuid4().hex)
                table = pa.table({"x": pa.array([1, 2, 3], pa.int64()), PART_COLUMN: [0, 0, 1]})
                self._session_or_start().createDataFrame(table).coalesce(1).write.partitionBy(
                    PART_COLUMN
                ).parquet(target)
                self._fs.delete_tree(target)
        self.warmed = True
        log.info("SparkSession ready")

    def _session_or_start(self) -> SparkSession:
        if self._abandoned:
            raise SparkWriteError("the SparkSession was abandoned (its driver stopped answering)")
        with self._lock:
            if self._session is None:
                self._session = self._build_session()
            return self._session

    def stop(self) -> None:
        if self._abandoned:  # the lock may be held by a call into the hung driver
            return
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            try:
                session.stop()
            except Exception as exc:  # noqa: BLE001 - best effort on shutdown
                log.warning("SparkSession stop failed: %s", exc)

    def abandon(self) -> None:
        """The driver stopped answering: forget the session without asking it anything and,
        in local mode, kill its JVM (``stop`` would wait for the hung call; a JVM without
        heap may not notice this process's exit either), even while a new session is being
        built (the lock may be held by that build). Never blocks. With Spark Connect the
        server's job runs on: nothing here can stop it."""
        self._abandoned = True
        self._session = None
        if self.is_connect:
            return
        from pyspark import SparkContext

        proc = getattr(SparkContext._gateway, "proc", None)
        if proc is not None and proc.poll() is None:
            log.error("killing the Spark driver JVM (pid %s)", proc.pid)
            proc.kill()

    def driver_exit_code(self) -> int | None:
        """The local driver JVM's exit code once it has exited, else None (Spark Connect:
        the server is not ours to watch; a failed call there is an ordinary failure)."""
        if self.is_connect:
            return None
        from pyspark import SparkContext

        proc = getattr(SparkContext._gateway, "proc", None)
        return None if proc is None else proc.poll()

    def _raise_if_driver_gone(self, cause: Exception) -> None:
        exit_code = self.driver_exit_code()
        if exit_code is None:
            return
        self._abandoned = True
        self._session = None
        hint = (" (Spark's exit code for a task out of heap: raise spark.driver.memory in "
                "spark.conf, or lower spark.job_bytes)") if exit_code == 52 else ""
        raise SparkDriverGone(
            f"the Spark driver JVM exited with code {exit_code}{hint}; the participant exits "
            f"so it restarts with a fresh JVM. The failed job said: {cause}") from cause

    def _discard_session(self) -> None:
        """After a failed job (e.g. driver OOM) the session may be dead: rebuild lazily."""
        if self.is_connect:
            return
        self.stop()

    def write(self, table: pa.Table, files: list[PlannedFile], work_dir: str) -> list[WrittenFile]:
        """Write ``table`` (data + meta columns + ``__hs_part``) as one file per PlannedFile.

        ``work_dir`` is a scratch directory on the same filesystem as the staging area, so
        the final renames are atomic. Returns the files with their row counts and sizes.
        """
        counts = _rows_per_index(table) if table.num_rows else {}
        expected = {p.index: counts.get(p.index, 0) + (p.carry.rows if p.carry else 0)
                    for p in files}
        if not any(expected.values()):  # nothing, or slices whose every row was deleted
            return self._empties(files, table.schema)
        scratch = posixpath.join(work_dir, f".spark-{uuid.uuid4().hex}")
        inputs = StagedInputs(self._fs, f"{scratch}-in")
        try:
            session = self._session_or_start()
            carried = [(p.index, p.file_name, p.carry) for p in files if p.carry is not None]
            with quick_turns():  # a py4j round trip per call (py4j_turns.py)
                if carried:  # each planned file's rows in one of a few tasks, side by side
                    frame = frame_with_carried_rows(session, table, carried, PART_COLUMN,
                                                    new_rows=counts, buckets=self._tasks(session),
                                                    schema_of=self._file_schema, inputs=inputs)
                else:  # one task: the session's other slot runs another flush meanwhile
                    frame = session.createDataFrame(table).coalesce(1)
                writer = frame.write.partitionBy(PART_COLUMN)
                for column in mostly_distinct_columns(table, skip=PART_COLUMN):
                    writer = writer.option(f"parquet.enable.dictionary#{column}", "false")
                if wants_legacy_format(table.schema):
                    writer = writer.option(LEGACY_FORMAT, "true")
            # One file per directory whatever the session says (a user's or a Connect
            # server's spark.sql.files.maxRecordsPerFile would split them).
            writer.option("compression", self._codec).option("maxRecordsPerFile", 0).parquet(scratch)
        except Exception as exc:  # noqa: BLE001 - py4j/grpc raise many types; all mean "failed"
            self._clean(scratch)
            self._raise_if_driver_gone(exc)
            self._discard_session()
            raise SparkWriteError(f"Spark flush failed: {exc}") from exc
        finally:  # read by the job, or of no use after its failure
            self._clean(inputs.directory)
        written: list[WrittenFile] = []
        try:
            self._refuse_strays(scratch, {p.index for p in files})
            for planned in (p for p in files if expected[p.index]):
                part_dir = posixpath.join(scratch, f"{PART_COLUMN}={planned.index}")
                outputs = [
                    info for info in self._fs.list_dir(part_dir)
                    if info.name.startswith("part-") and info.name.endswith(".parquet")
                ]
                if len(outputs) != 1:
                    raise SparkWriteError(
                        f"expected one Parquet file in {part_dir}, found {len(outputs)}"
                    )
                rows = expected[planned.index]
                self._check_rows(outputs[0].path, rows)
                self._fs.rename(outputs[0].path, planned.staged_path)
                written.append(WrittenFile(planned, rows, outputs[0].size))
            written += self._empties([p for p in files if expected[p.index] == 0], table.schema)
        finally:
            self._clean(scratch)
        return written

    def _clean(self, scratch: str) -> None:
        """Best effort: a directory left in the instant's staging area is swept with it, and
        a failure here must not hide the job's own outcome (a good job, or the driver gone)."""
        try:
            self._fs.delete_tree(scratch)
        except Exception as exc:  # noqa: BLE001 - any storage error: the sweep removes it
            log.warning("could not remove the Spark job's scratch %s: %s", scratch, exc)

    def _tasks(self, session: SparkSession) -> int:
        """Tasks a job carrying old rows is dealt into: twice the driver's cores (tasks of
        unequal length then still keep every core busy; measured on a full-table merge of 100
        slices on 2 cores: 2 tasks 11-12 s, 4 tasks 9.4-9.7 s). Spark Connect does not say its
        cores: ``spark.default.parallelism`` when the server has it, else 4."""
        if not self.is_connect:
            return max(1, 2 * int(session.sparkContext.defaultParallelism))
        try:
            return max(1, 2 * int(session.conf.get("spark.default.parallelism") or ""))
        except Exception:  # noqa: BLE001 - unset on the server (or refused): the default
            return CONNECT_TASKS

    def _file_schema(self, path: str) -> pa.Schema:
        import pyarrow.parquet as pq

        with self._fs.open_read(path) as handle:
            return pq.read_schema(handle)

    def _empties(self, planned: list[PlannedFile], schema: pa.Schema) -> list[WrittenFile]:
        size = write_empty_slices(self._fs, [p.staged_path for p in planned], schema,
                                  PART_COLUMN)
        return [WrittenFile(p, 0, size) for p in planned]

    def _refuse_strays(self, scratch: str, planned: set[int]) -> None:
        """Rows in a directory no planned file names (a carried row whose slice Spark named
        otherwise than planned gets a null ``__hs_part``) would be lost: fail the flush."""
        names = {f"{PART_COLUMN}={i}" for i in planned}
        strays = [info.name for info in self._fs.list_dir(scratch)
                  if info.name.startswith(f"{PART_COLUMN}=") and info.name not in names]
        if strays:
            raise SparkWriteError(f"the Spark job wrote rows outside the planned files: {strays}")

    def _check_rows(self, path: str, expected: int) -> None:
        """A file must hold exactly its new rows plus the rows its old slice carries (read
        from the file's footer): anything else would lose or repeat rows once it is listed."""
        import pyarrow.parquet as pq

        with self._fs.open_read(path) as handle:
            found = pq.ParquetFile(handle).metadata.num_rows
        if found != expected:
            raise SparkWriteError(f"new slice {path} holds {found} rows, not the {expected} "
                                  "of the old slice and the flush")


CONNECT_TASKS = 4
"""Tasks of a job carrying old rows over Spark Connect when the server's parallelism is unknown."""

def _rows_per_index(table: pa.Table) -> dict[int, int]:
    import pyarrow.compute as pc

    counts = pc.value_counts(table.column(PART_COLUMN))
    return {int(item["values"].as_py()): int(item["counts"].as_py()) for item in counts}
