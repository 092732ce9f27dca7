""":class:`~shared.fs.FileSystem` on an object store: S3 (tested against moto's S3 server), and
GCS (``gs://``) and Azure (``az://``, ``abfs://``, ``abfss://``) through the same library,
untested.

The library is ``obstore``, the Python binding of Rust's ``object_store`` — the crate hudi-rs
reads tables with, so the sink and its reader share one notion of keys, options and
credentials. How the interface maps onto object-store requests:

- ``write_atomic`` -> one PUT (a PUT is atomic: readers see the old or the new object);
- ``create_exclusive`` -> PUT with ``If-None-Match: *`` (``mode="create"``); the store answers
  412 to every later create of the key, which is the fence (``AlreadyExistsError`` -> False).
  A store that ignores the header would let two writers win; services probe for that at
  start-up (:func:`shared.storage.check_exclusive_create`). ``object_store`` retries a request
  that timed out; a create whose first attempt landed then reads as lost (412), which is the
  safe side: the sink log reports "fenced", the coordinator steps down and its successor
  rolls the recorded decision forward;
- ``rename`` -> HEAD of both, server-side COPY, DELETE of the source. Not atomic: a crash
  between COPY and DELETE leaves both, which a retry recognises (same size at the target)
  and finishes by deleting the source; a crash after the DELETE leaves only the target,
  which ``HudiTable.place_file`` recognises by the target's size (the COMMIT decision in the
  sink log records every move, so a successor finishes them). S3 has no copy-if-absent, so
  "never clobber" is a HEAD before the COPY: sound because every name a move targets is
  unique to its writer (file ids are fresh UUIDs);
- ``list_dir`` -> LIST with delimiter ``/``; ``walk_files`` -> LIST of the prefix;
- ``delete`` -> HEAD + DELETE (the HEAD tells "already gone"); ``delete_tree`` -> LIST +
  batched DELETE; ``file_info``/``exists`` -> HEAD, then a one-key LIST for a "directory";
- ``makedirs``, ``fsync_dir`` -> nothing (there are no directories); ``fsync_file`` -> HEAD
  (a completed PUT is durable; the HEAD keeps "FileNotFoundError when missing", which the
  committer relies on to notice a staged file that vanished).

Paths are full URIs (``s3://bucket/prefix/…``); one instance serves one bucket. Keys are used
literally (``%2F`` in a partition directory stays ``%2F``). Directories have no mtime: a
"directory" entry reports 0.0.

Credentials: ``object_store`` reads the standard environment variables (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``,
``AWS_ALLOW_HTTP``; ``GOOGLE_*``, ``AZURE_*``), and ``table.storage_options`` (the same key
names, lower case, as hudi-rs takes them) override them. Nothing here logs an option value.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError
from obstore.store import from_url

from shared.fs import FileInfo

_R = TypeVar("_R")


class StorageError(OSError):
    """The object store failed a request (outage, timeout, permissions): an I/O failure like
    any ``OSError``, which callers retry or report — never a bug in our code."""


def _storage_errors(call: Callable[..., _R]) -> Callable[..., _R]:
    """Re-raise obstore's own errors (not ``OSError`` subclasses) as :class:`StorageError`,
    so every caller's ``except OSError`` handles a store outage like a disk error."""

    @functools.wraps(call)
    def wrapped(*args: Any, **kwargs: Any) -> _R:
        try:
            return call(*args, **kwargs)
        except AlreadyExistsError:
            raise
        except BaseError as exc:
            raise StorageError(f"{type(exc).__name__}: {exc}") from exc

    return wrapped

__all__ = [
    "OBJECT_STORE_SCHEMES",
    "StoreLocation",
    "ObjectStoreFileSystem",
    "is_object_store_uri",
    "parse_store_uri",
    "split_storage_options",
    "reader_storage_options",
]

OBJECT_STORE_SCHEMES = ("s3", "gs", "az", "abfs", "abfss")
"""Schemes served by :class:`ObjectStoreFileSystem` (only ``s3`` is tested)."""

_OPTION_PREFIX = {"s3": "aws_", "gs": "google_", "az": "azure_", "abfs": "azure_", "abfss": "azure_"}
_ENV_PREFIX = {"s3": "AWS_", "gs": "GOOGLE_", "az": "AZURE_", "abfs": "AZURE_", "abfss": "AZURE_"}

# object_store's HTTP client keys (ClientConfigKey): passed as client options, not store config
# (the store config refuses them), with or without the scheme's prefix (``aws_allow_http``).
_CLIENT_KEYS = frozenset({
    "allow_http", "allow_invalid_certificates", "connect_timeout", "default_content_type",
    "http1_only", "http2_only", "http2_keep_alive_interval", "http2_keep_alive_timeout",
    "http2_keep_alive_while_idle", "http2_max_frame_size", "pool_idle_timeout",
    "pool_max_idle_per_host", "proxy_url", "proxy_ca_certificate", "proxy_excludes",
    "randomize_addresses", "timeout", "user_agent",
})

_DELETE_BATCH = 1000
"""Keys per DeleteObjects request (S3's maximum)."""

_SLASHES = re.compile(r"/{2,}")


@dataclass(frozen=True)
class StoreLocation:
    """``scheme://bucket/prefix`` split up; ``root`` is ``scheme://bucket``."""

    scheme: str
    bucket: str
    prefix: str

    @property
    def root(self) -> str:
        return f"{self.scheme}://{self.bucket}"


def is_object_store_uri(path: str) -> bool:
    return "://" in path and path.split("://", 1)[0].lower() in OBJECT_STORE_SCHEMES


def parse_store_uri(uri: str) -> StoreLocation:
    """ValueError unless ``uri`` is ``scheme://bucket[/prefix]`` with a known scheme."""
    if "://" not in uri:
        raise ValueError(f"not an object-store URI: {uri!r}")
    scheme, rest = uri.split("://", 1)
    scheme = scheme.lower()
    if scheme not in OBJECT_STORE_SCHEMES:
        raise ValueError(f"unsupported storage scheme {scheme!r} (supported: file://, "
                         f"{', '.join(s + '://' for s in OBJECT_STORE_SCHEMES)})")
    bucket, _, prefix = rest.partition("/")
    if not bucket or "\x00" in uri or "\\" in bucket:
        raise ValueError(f"object-store URI needs a bucket: {uri!r}")
    prefix = _SLASHES.sub("/", prefix).strip("/")
    if any(part in (".", "..") for part in prefix.split("/")):
        raise ValueError(f"object-store URI must not hold '.' or '..' segments: {uri!r}")
    return StoreLocation(scheme, bucket, prefix)


def split_storage_options(scheme: str, options: Mapping[str, str]
                          ) -> tuple[dict[str, str], dict[str, str]]:
    """``(store config, client options)`` from ``table.storage_options``.

    Keys are lower-cased; HTTP client keys (``aws_allow_http``, ``timeout``, …) go to the client
    options without their prefix, everything else to the store config, where ``object_store``
    validates the key (an unknown key is an error at start).
    """
    prefix = _OPTION_PREFIX[scheme]
    config: dict[str, str] = {}
    client: dict[str, str] = {}
    for raw_key, value in options.items():
        key = raw_key.lower()
        bare = key.removeprefix(prefix)
        if bare in _CLIENT_KEYS:
            client[bare] = str(value)
        else:
            config[key] = str(value)
    return config, client


def reader_storage_options(scheme: str, options: Mapping[str, str],
                           environ: Mapping[str, str]) -> dict[str, str]:
    """Options for hudi-rs: the scheme's environment variables (lower-cased, as object_store
    reads them) overridden by ``table.storage_options`` — what the sink itself uses."""
    env_prefix = _ENV_PREFIX[scheme]
    merged = {k.lower(): v for k, v in environ.items() if k.startswith(env_prefix)}
    merged.update({k.lower(): str(v) for k, v in options.items()})
    return merged


def _open_store(location: StoreLocation, options: Mapping[str, str]) -> Any:
    config, client = split_storage_options(location.scheme, options)
    make: Any = from_url  # its overloads type each scheme's config; ours is checked at runtime
    return make(location.root, config=config or None, client_options=client or None)


class ObjectStoreFileSystem:
    """:class:`~shared.fs.FileSystem` over one bucket (see the module docstring).

    ``store`` is a seam for tests (any obstore-compatible store, e.g. one that ignores
    ``If-None-Match``); by default it is built from ``uri`` and ``storage_options``.
    """

    def __init__(self, uri: str, storage_options: Mapping[str, str] | None = None, *,
                 store: Any = None) -> None:
        self.location = parse_store_uri(uri)
        self._root = self.location.root
        self._store = store if store is not None else _open_store(self.location, storage_options or {})

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
            return FileInfo(path, name, int(meta["size"]), meta["last_modified"].timestamp(), False)
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
        found += [FileInfo(f"{base}/{name}", name, int(meta["size"]),
                           meta["last_modified"].timestamp(), False)
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
            raise StorageError(f"{type(exc).__name__}: {exc}") from exc
        for chunk in chunks:
            for meta in chunk:
                relative = meta["path"][len(key) + 1:] if key else meta["path"]
                yield FileInfo(f"{base}/{relative}", relative.rsplit("/", 1)[-1],
                               int(meta["size"]), meta["last_modified"].timestamp(), False)

    # --- writing --------------------------------------------------------------------------
    @_storage_errors
    def write_atomic(self, path: str, data: bytes) -> None:
        obstore.put(self._store, self.key(path), data, use_multipart=False)

    @_storage_errors
    def create_exclusive(self, path: str, data: bytes) -> bool:
        key = self.key(path)
        try:
            obstore.put(self._store, key, data, mode="create")
        except AlreadyExistsError:
            # The store's client retries a PUT whose response was lost; the retry then reads
            # "already exists" although the first attempt created the object. The object
            # holding exactly our bytes means we created it (a rival's entry differs: it
            # names another epoch or leader), so that is a win, not a lost race.
            try:
                return bytes(obstore.get(self._store, key).bytes()) == data
            except FileNotFoundError:
                return False
        return True

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
        else:
            obstore.copy(self._store, source, target)
        obstore.delete(self._store, source)

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
