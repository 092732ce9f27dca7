""":class:`~shared.storage.fs.FileSystem` on an object store: S3 (tested against moto's S3 server), and
GCS (``gs://``) and Azure (``az://``, ``abfs://``, ``abfss://``) through the same library,
untested.

The library is ``obstore``, the Python binding of Rust's ``object_store`` — the crate hudi-rs
reads tables with, so the sink and its reader share one notion of keys, options and
credentials. How the interface maps onto object-store requests:

- ``write_atomic`` -> one PUT (a PUT is atomic: readers see the old or the new object);
- ``create_exclusive`` -> PUT with ``If-None-Match: *`` (``mode="create"``); the store answers
  412 to every later create of the key, which is the fence. A store that ignores the header
  would let two writers win; services probe for that at start-up
  (:func:`shared.storage.backend.check_exclusive_create`). Neither answer is taken at its word: the
  key is read back and the create won exactly when it holds our bytes (every entry names its
  writer's epoch, so a rival's differs). A 412 can answer our own PUT whose reply was lost and
  that ``object_store`` retried; S3 answers ``409 ConditionalRequestConflict`` while another
  conditional write of the key is in flight, and that write may still fail: a 409 with no
  object behind it is retried (``CREATE_ATTEMPTS``), never read as fenced;
- ``rename`` -> HEAD of both, server-side COPY, DELETE of the source. Not atomic: a crash
  between COPY and DELETE leaves both, which a retry recognises (same size at the target)
  and finishes by deleting the source; a crash after the DELETE leaves only the target,
  which ``HudiTable.place_file`` recognises by the target's size (the COMMIT decision in the
  sink log records every move, so a successor finishes them). S3 has no copy-if-absent, so
  "never clobber" is a HEAD before the COPY: sound because every name a move targets is
  unique to its writer (file ids are fresh UUIDs). S3's COPY refuses a source over 5 GiB
  (``COPY_LIMIT``) and ``object_store`` offers no UploadPartCopy, so a larger object is copied
  by streaming its GET into a multipart PUT (the bytes pass through this process, a few parts
  in memory at a time; the target appears whole when the upload completes, or not at all; a
  GET that ended early completes a short upload, deleted again before the StorageError);
- ``open_read`` -> ranged GETs; ``write_file`` -> a multipart PUT streamed from the file;
- ``list_dir`` -> LIST with delimiter ``/``; ``walk_files`` -> LIST of the prefix;
- ``delete`` -> HEAD + DELETE (the HEAD tells "already gone"); ``delete_tree`` -> LIST +
  batched DELETE; ``file_info``/``exists`` -> HEAD, then a one-key LIST for a "directory";
- ``makedirs``, ``fsync_dir`` -> nothing (there are no directories); ``fsync_file`` -> HEAD
  (a completed PUT is durable; the HEAD keeps "FileNotFoundError when missing", which the
  committer relies on to notice a staged file that vanished).

Paths are full URIs (``s3://bucket/prefix/…``); one instance serves one bucket. Keys are used
literally (``%2F`` in a partition directory stays ``%2F``), except that empty segments are
dropped (``a//b`` is the key ``a/b``: S3 would hold them apart). Directories have no mtime: a
"directory" entry reports 0.0; a file's mtime is ``LastModified``, which S3 stamps when a
multipart upload *starts* (``FileInfo.mtime_is_write_start``).

Credentials: ``object_store`` reads the standard environment variables (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``,
``AWS_ALLOW_HTTP``; ``GOOGLE_*``, ``AZURE_*``), and ``table.storage_options`` (the same key
names, lower case, as hudi-rs takes them) override them; an AWS profile (``~/.aws``) fills in
where neither gives keys (``shared.storage.credentials``, which also words the error when
nothing did). Nothing here logs an option value, and errors carry object_store's summary line,
not its multi-line debug dump.
"""

from __future__ import annotations

import asyncio
import functools
import io
import re
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, TypeVar, cast

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError

from hudi_sink.shared.storage.credentials import is_credentials_lookup_failure, no_credentials
from hudi_sink.shared.storage.fs import FileInfo
from hudi_sink.shared.storage.store_uri import (
    open_store,
    parse_store_uri,
)

_R = TypeVar("_R")


class StorageError(OSError):
    """The object store failed a request (outage, timeout, permissions): an I/O failure like
    any ``OSError``, which callers retry or report — never a bug in our code."""


class MissingCredentialsError(StorageError):
    """Nothing provided credentials for the store (``shared.storage.credentials``): the message
    is one line naming what is missing. Still an ``OSError``: on a host whose metadata service
    failed for a moment a running service retries it like any outage; a command exits 2."""


_DEBUG_DUMP = "\n\nDebug source:"
"""Where object_store's message turns into a multi-line Rust ``Debug`` dump of the error."""


def storage_error(exc: BaseError, root: str, options: Mapping[str, str] | None) -> StorageError:
    """obstore's error as a :class:`StorageError` whose message is its summary (the dump stays
    on ``__cause__`` for a debug log); a failed credentials lookup as
    :class:`MissingCredentialsError`."""
    text = str(exc)
    summary = text.split(_DEBUG_DUMP, 1)[0].strip()
    if is_credentials_lookup_failure(text):
        return MissingCredentialsError(no_credentials(root, options or {}, None, summary))
    return StorageError(f"{type(exc).__name__}: {summary}")


def _storage_errors(call: Callable[..., _R]) -> Callable[..., _R]:
    """Re-raise obstore's own errors (not ``OSError`` subclasses) as :class:`StorageError`
    (:func:`storage_error`), so every caller's ``except OSError`` handles a store outage like
    a disk error."""

    @functools.wraps(call)
    def wrapped(self: ObjectStoreFileSystem, *args: Any, **kwargs: Any) -> _R:
        try:
            return call(self, *args, **kwargs)
        except AlreadyExistsError:
            raise
        except BaseError as exc:
            raise self.error(exc) from exc

    return wrapped


__all__ = ["COPY_LIMIT", "StorageError", "MissingCredentialsError", "ObjectStoreFileSystem",
           "storage_error"]

_DELETE_BATCH = 1000
"""Keys per DeleteObjects request (S3's maximum)."""

COPY_LIMIT = 5 * 1024**3
"""The largest source S3's CopyObject accepts (5 GiB); larger objects are copied in parts."""
PART_BYTES = 8 * 1024 * 1024
"""Part size of streamed uploads and copies (S3: at least 5 MiB, at most 10,000 parts)."""
_MAX_PARTS = 10_000
PART_CONCURRENCY = 4
CREATE_ATTEMPTS = 8
"""Conditional creates answered ``409 ConditionalRequestConflict`` with no object behind."""
_CONFLICT = re.compile(r"status code: 409|ConditionalRequestConflict")
_SLASHES = re.compile(r"/{2,}")


class ObjectStoreFileSystem:
    """:class:`~shared.storage.fs.FileSystem` over one bucket (see the module docstring).

    ``store`` is a seam for tests (any obstore-compatible store, e.g. one that ignores
    ``If-None-Match``); by default it is built from ``uri`` and ``storage_options``.
    ``copy_limit``: objects above it are copied in parts (tests lower it; S3's is 5 GiB).
    """

    def __init__(self, uri: str, storage_options: Mapping[str, str] | None = None, *,
                 store: Any = None, copy_limit: int = COPY_LIMIT) -> None:
        self.location = parse_store_uri(uri)
        self._root = self.location.root
        self._store = store if store is not None else open_store(self.location, storage_options or {})
        self._options = dict(storage_options or {})
        self.copy_limit = copy_limit

    def error(self, exc: BaseError) -> StorageError:
        """obstore's ``exc`` as raised to callers (:func:`storage_error`)."""
        return storage_error(exc, self._root, self._options)

    def __repr__(self) -> str:  # never the options: they may hold credentials
        return f"ObjectStoreFileSystem({self._root!r})"

    @property
    def store(self) -> Any:
        """The obstore store (uploads use it for multipart PUTs)."""
        return self._store

    def key(self, path: str) -> str:
        """The object key of a full path; ValueError for a path outside this bucket."""
        scheme, sep, rest = path.partition("://")
        if not sep or scheme.lower() != self.location.scheme:
            raise ValueError(f"{path!r} is not in {self._root}")
        bucket, _, key = rest.partition("/")
        if bucket != self.location.bucket:
            raise ValueError(f"{path!r} is not in {self._root}")
        return _SLASHES.sub("/", key).strip("/")

    # --- reading --------------------------------------------------------------------------
    @_storage_errors
    def read_bytes(self, path: str) -> bytes:
        return bytes(obstore.get(self._store, self.key(path)).bytes())

    @_storage_errors
    def _head(self, key: str) -> dict[str, Any] | None:
        if not key:
            return None
        try:
            return dict(obstore.head(self._store, key))
        except FileNotFoundError:
            return None

    @_storage_errors
    def _has_children(self, key: str) -> bool:
        prefix = f"{key}/" if key else None
        for chunk in obstore.list(self._store, prefix, chunk_size=1):
            if chunk:
                return True
        return False

    def exists(self, path: str) -> bool:
        key = self.key(path)
        return self._head(key) is not None or self._has_children(key)

    def file_info(self, path: str) -> FileInfo | None:
        key = self.key(path)
        name = path.rstrip("/").rsplit("/", 1)[-1]
        meta = self._head(key)
        if meta is not None:
            return _file(path, name, meta)
        if self._has_children(key):
            return FileInfo(path, name, 0, 0.0, True)
        return None

    @_storage_errors
    def list_dir(self, path: str) -> list[FileInfo]:
        key = self.key(path)
        listing = obstore.list_with_delimiter(self._store, f"{key}/" if key else None)
        base = path.rstrip("/")
        found = [FileInfo(f"{base}/{name}", name, 0, 0.0, True)
                 for prefix in listing["common_prefixes"]
                 if (name := prefix.rstrip("/").rsplit("/", 1)[-1])]
        found += [_file(f"{base}/{name}", name, meta)
                  for meta in listing["objects"]
                  if (name := meta["path"].rsplit("/", 1)[-1])]
        found.sort(key=lambda info: info.name)
        return found

    def walk_files(self, path: str) -> Iterator[FileInfo]:
        key = self.key(path)
        base = path.rstrip("/")
        try:
            chunks = list(obstore.list(self._store, f"{key}/" if key else None, chunk_size=1000))
        except BaseError as exc:
            raise self.error(exc) from exc
        for chunk in chunks:
            for meta in chunk:
                relative = meta["path"][len(key) + 1:] if key else meta["path"]
                yield _file(f"{base}/{relative}", relative.rsplit("/", 1)[-1], meta)

    # --- writing --------------------------------------------------------------------------
    @_storage_errors
    def write_atomic(self, path: str, data: bytes) -> None:
        obstore.put(self._store, self.key(path), data, use_multipart=False)

    @_storage_errors
    def write_file(self, path: str, local_path: str) -> None:
        obstore.put(self._store, self.key(path), Path(local_path), chunk_size=PART_BYTES,
                    max_concurrency=PART_CONCURRENCY)

    @_storage_errors
    def open_read(self, path: str) -> BinaryIO:
        key = self.key(path)
        size = self._head(key)
        if size is None:
            raise FileNotFoundError(2, "no such object", path)
        return cast(BinaryIO, _RangedReader(obstore.open_reader(self._store, key,
                                                                size=int(size["size"])), self.error))

    @_storage_errors
    def create_exclusive(self, path: str, data: bytes) -> bool:
        """Won exactly when the key ends up holding ``data`` (see the module docstring)."""
        key = self.key(path)
        for attempt in range(CREATE_ATTEMPTS):
            try:
                obstore.put(self._store, key, data, mode="create")
                return True
            except AlreadyExistsError as exc:
                conflict = _CONFLICT.search(str(exc)) is not None
            try:
                return bytes(obstore.get(self._store, key).bytes()) == data
            except FileNotFoundError:
                if not conflict:
                    return False  # 412: the key existed, and was removed since
            time.sleep(min(0.05 * 2**attempt, 2.0))  # 409: the rival write may still fail
        raise StorageError(f"creating {key}: the store answered 409 ConditionalRequestConflict "
                           f"{CREATE_ATTEMPTS} times and no object appeared; outcome unknown")

    @_storage_errors
    def rename(self, src: str, dst: str) -> None:
        """COPY then DELETE, never onto another object (see the module docstring)."""
        source, target = self.key(src), self.key(dst)
        source_meta = self._head(source)
        if source_meta is None:
            raise FileNotFoundError(2, "rename source missing", src)
        target_meta = self._head(target)
        if target_meta is not None:
            if target_meta["size"] != source_meta["size"]:
                raise FileExistsError(17, "rename target exists", dst)
            # A copy that a crash interrupted before its delete: finish the move.
        elif int(source_meta["size"]) > self.copy_limit:
            self._copy_in_parts(source, target, int(source_meta["size"]))
        else:
            obstore.copy(self._store, source, target)
        obstore.delete(self._store, source)

    def _copy_in_parts(self, source: str, target: str, size: int) -> None:
        """A copy too large for CopyObject: GET streamed into a multipart PUT, which is only
        completed (the target appears) once every part is in; a failure aborts it. Async
        calls (an event loop of this worker thread's own): the blocking ``put`` cannot pull
        from a stream that itself blocks on the store's runtime."""
        part = max(PART_BYTES, -(-size // _MAX_PARTS))

        async def copy() -> None:
            got = await obstore.get_async(self._store, source)
            await obstore.put_async(self._store, target, got.stream(min_chunk_size=part),
                                    chunk_size=part, max_concurrency=PART_CONCURRENCY)

        asyncio.run(copy())
        copied = self._head(target)
        if copied is None or int(copied["size"]) != size:
            if copied is not None:
                # The GET ended early without an error. Left there, the wrong-size target
                # makes every retry of this move fail (FileExistsError: never clobbered);
                # its name is this move's alone, so removing it lets the retry copy again.
                obstore.delete(self._store, target)
            raise StorageError(f"copy of {source} to {target}: {copied and copied['size']} "
                               f"bytes, not {size} (removed; the source stays)")

    @_storage_errors
    def delete(self, path: str) -> bool:
        key = self.key(path)
        if self._head(key) is None:
            return False
        obstore.delete(self._store, key)
        return True

    @_storage_errors
    def delete_tree(self, path: str) -> None:
        key = self.key(path)
        keys = [meta["path"] for chunk in obstore.list(self._store, f"{key}/" if key else None,
                                                       chunk_size=1000) for meta in chunk]
        if self._head(key) is not None:
            keys.append(key)
        for start in range(0, len(keys), _DELETE_BATCH):
            obstore.delete(self._store, keys[start:start + _DELETE_BATCH])

    def makedirs(self, path: str) -> None:
        self.key(path)  # there are no directories; only check the path is ours

    def fsync_file(self, path: str) -> None:
        if self._head(self.key(path)) is None:
            raise FileNotFoundError(2, "no such object", path)

    def fsync_dir(self, path: str) -> None:
        self.key(path)


def _file(path: str, name: str, meta: Mapping[str, Any]) -> FileInfo:
    return FileInfo(path, name, int(meta["size"]), meta["last_modified"].timestamp(), False,
                    mtime_is_write_start=True)


class _RangedReader(io.RawIOBase):
    """obstore's buffered reader as a standard binary file (pyarrow wants ``closed``,
    ``readinto``): ranged GETs of ``buffer_size`` bytes, nothing more held in memory."""

    def __init__(self, reader: Any, error: Callable[[BaseError], StorageError]) -> None:
        super().__init__()
        self._reader = reader
        self._error = error

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return int(self._reader.seek(offset, whence))

    def tell(self) -> int:
        return int(self._reader.tell())

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._reader.read(len(buffer))
        except BaseError as exc:
            raise self._error(exc) from exc
        count = len(data)
        memoryview(buffer).cast("B")[:count] = memoryview(data)
        return count
