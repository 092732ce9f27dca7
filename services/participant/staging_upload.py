"""Flushes into an object-store table: Spark writes locally, the participant uploads.

A local SparkSession has no S3 connector here (the Hadoop AWS jars come from Maven), so with an
object-store table :class:`UploadingSparkWriter` lets Spark write each flush's Parquet files
into a local scratch directory and then uploads every file to its place in the instant's
staging prefix (``.hoodie/.temp/<T>/…``), where the coordinator's commit finds it exactly as it
finds a locally staged file. The local scratch is removed whatever happens.

Uploads run in the flush's worker thread (the flusher already runs ``write`` off the event
loop), several files at once (``UPLOAD_THREADS``), each retried with back-off (tenacity) and
checked by size afterwards. A file larger than ``PART_BYTES`` goes up as a multipart upload
streamed from disk, ``PART_CONCURRENCY`` parts at a time, so memory stays bounded whatever the
file size. A failed upload fails the flush, which the flusher retries as a whole (fresh file
ids) and finally gives the instant up; whatever an attempt left in staging is never listed and
goes to deletion with the instant's staging.

With Spark Connect (``sc://``) the server writes: the plain :class:`SparkWriter` is used, and
the server needs a connector for the store (``s3a``), see the README.
"""

from __future__ import annotations

import logging
import posixpath
import shutil
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
from tenacity import retry, retry_if_not_exception_type, stop_after_attempt, wait_exponential

from hudi_sink.services.participant.packing import Carry
from hudi_sink.services.participant.spark_writer import PlannedFile, SparkWriter, WrittenFile
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.storage.fs import FileSystem, LocalFileSystem
from hudi_sink.shared.storage.object_store import ObjectStoreFileSystem

__all__ = ["UploadingSparkWriter", "upload_files", "writer_for", "UPLOAD_ATTEMPTS"]

log = logging.getLogger("hudi_sink.upload")

UPLOAD_THREADS = 4
UPLOAD_ATTEMPTS = 4


def writer_for(config: SinkConfig, fs: FileSystem, **kwargs: Any) -> SparkWriter:
    """The participant's writer: uploading for an object-store table and a local Spark."""
    if isinstance(fs, ObjectStoreFileSystem) and not config.spark.master.startswith("sc://"):
        return UploadingSparkWriter(config, fs, **kwargs)
    return SparkWriter(config.spark, fs, **kwargs)


class UploadError(OSError):
    """An uploaded object does not have the local file's size."""


@retry(stop=stop_after_attempt(UPLOAD_ATTEMPTS), wait=wait_exponential(multiplier=0.5, max=8),
       retry=retry_if_not_exception_type(FileNotFoundError), reraise=True)
def _upload_one(fs: ObjectStoreFileSystem, local: str, target: str) -> None:
    size = Path(local).stat().st_size
    fs.write_file(target, local)
    info = fs.file_info(target)
    if info is None or info.size != size:
        raise UploadError(f"uploaded {target} has {info.size if info else 'no'} bytes, not {size}")


def upload_files(fs: ObjectStoreFileSystem, pairs: list[tuple[str, str]]) -> None:
    """Upload each ``(local file, target path)``, in parallel; the first failure is raised
    after every upload has finished (no thread outlives the call)."""
    if not pairs:
        return
    with ThreadPoolExecutor(max_workers=min(UPLOAD_THREADS, len(pairs)),
                            thread_name_prefix="upload") as pool:
        futures = [pool.submit(_upload_one, fs, local, target) for local, target in pairs]
    errors = [exc for future in futures if (exc := future.exception()) is not None]
    if errors:
        raise errors[0]


class UploadingSparkWriter(SparkWriter):
    """A :class:`SparkWriter` whose Spark writes to local scratch, uploaded afterwards."""

    def __init__(self, config: SinkConfig, fs: ObjectStoreFileSystem, *,
                 scratch_dir: str | None = None, **kwargs: Any) -> None:
        super().__init__(config.spark, LocalFileSystem(), **kwargs)
        self._store = fs
        self._scratch = scratch_dir or tempfile.gettempdir()

    def _local_dir(self) -> str:
        return tempfile.mkdtemp(prefix="hudi-sink-flush-", dir=self._scratch)

    def start(self, warm_dir: str | None = None) -> None:
        """Warm-up jobs write to local scratch (Spark cannot reach the store)."""
        if warm_dir is None:
            super().start(None)
            return
        local = self._local_dir()
        try:
            super().start(posixpath.join(local, "warmup"))
        finally:
            shutil.rmtree(local, ignore_errors=True)

    def write(self, table: pa.Table, files: list[PlannedFile], work_dir: str) -> list[WrittenFile]:
        """Spark into local scratch, then each file to its ``staged_path`` in the store."""
        local = self._local_dir()
        try:
            plans = [replace(p, staged_path=posixpath.join(local, f"{p.index}-{uuid.uuid4().hex}"),
                             carry=self._fetch_carried(p, local))
                     for p in files]
            written = super().write(table, plans, local)
            by_index = {p.index: p for p in files}
            upload_files(self._store, [(w.planned.staged_path, by_index[w.planned.index].staged_path)
                                       for w in written])
            log.debug("uploaded %d files to %s", len(written), work_dir)
            return [replace(w, planned=by_index[w.planned.index]) for w in written]
        finally:
            shutil.rmtree(local, ignore_errors=True)

    def _fetch_carried(self, plan: PlannedFile, local: str) -> Carry | None:
        """An old slice whose rows the new one carries, copied from the store into local
        scratch (Spark reads it there); streamed, so memory stays bounded (a slice packed
        into is below ``table.small_file_bytes`` anyway)."""
        if plan.carry is None:
            return None
        target = posixpath.join(local, f"carried-{plan.index}.parquet")
        with self._store.open_read(plan.carry.source_path) as source, open(target, "wb") as out:
            shutil.copyfileobj(source, out, 8 << 20)
        return replace(plan.carry, source_path=target)
