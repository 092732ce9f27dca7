"""Which :class:`~shared.storage.fs.FileSystem` serves a table, and the start-up check of its fence.

``filesystem_for`` picks local files (a path or ``file://``) or an object store
(``s3://``; ``gs://``, ``az://``, ``abfs://`` untested) from ``table.base_path``, which must be
spelled without empty segments (``check_base_path``, which the config loader runs too: every
service and ``hudi-sink config check`` see the canonical spelling).

``check_exclusive_create`` is the start-up probe every service runs on an object-store table:
the sink log's fence is a create-only PUT (``If-None-Match: *``), and a store that accepts a
second create of the same key (an old MinIO, a proxy that drops the header, an S3-compatible
store without conditional writes) would let a zombie coordinator commit. Such a store is
refused (``ConfigError``, exit 2) instead of running with a fence that does not fence.
"""

from __future__ import annotations

import logging
import posixpath
import re
import uuid
from collections.abc import Mapping

from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.storage.credentials import half_pair
from hudi_sink.shared.storage.fs import FileSystem, LocalFileSystem
from hudi_sink.shared.storage.fs import filesystem_for as local_filesystem_for
from hudi_sink.shared.storage.object_store import ObjectStoreFileSystem
from hudi_sink.shared.storage.store_uri import is_object_store_uri

__all__ = ["filesystem_for", "is_object_store", "check_base_path", "check_exclusive_create"]

log = logging.getLogger("hudi_sink.storage")

_EMPTY_SEGMENTS = re.compile(r"/{2,}")



def is_object_store(base_path: str) -> bool:
    """Whether ``base_path`` names an object store (``s3://`` …) rather than local files."""
    return is_object_store_uri(base_path)


def check_base_path(base_path: str) -> str:
    """``base_path`` as the sink spells it; ConfigError naming ``table.base_path`` when it
    holds an empty segment (``a//b``). An object store keeps ``a//b`` and ``a/b`` as
    different keys: the sink writes its keys without empty segments, so a reader (hudi-rs,
    Spark) or a listing given the path as spelled could look elsewhere and miss files, or find
    them and call them orphans — refused with the spelling to use rather than silently
    rewritten. One trailing ``/`` is only a spelling (``s3://b/t/`` names the table
    ``s3://b/t``, as every reader takes it, and configs written so ran before this check):
    dropped, with a warning once per spelling."""
    scheme, sep, rest = base_path.partition("://")
    head, path = (f"{scheme}{sep}", rest) if sep else ("", base_path)
    in_bucket = is_object_store_uri(base_path)
    if in_bucket:
        bucket, slash, path = rest.partition("/")
        head, path = f"{head}{bucket}", f"{slash}{path}"
    root = "" if in_bucket else "/"  # a local root stays "/"
    trimmed = path[:-1] if path.endswith("/") and path != root else path
    if "//" in trimmed or (trimmed.endswith("/") and trimmed != root):
        canonical = _EMPTY_SEGMENTS.sub("/", path)
        canonical = canonical if canonical == root else canonical.rstrip("/")
        raise ConfigError(
            f"{base_path!r} has an empty path segment ('//'); write {head + canonical!r} (on "
            "an object store 'a//b' and 'a/b' are different keys, so readers given this "
            "spelling would miss the table's files)", "table.base_path")
    if trimmed != path and base_path not in _TRIMMED:
        _TRIMMED.add(base_path)
        log.warning("table.base_path %r: trailing '/' dropped; the table is %r", base_path,
                    head + trimmed)
    return head + trimmed


_TRIMMED: set[str] = set()
"""Spellings already warned about (each once per process)."""


def filesystem_for(base_path: str, storage_options: Mapping[str, str] | None = None) -> FileSystem:
    """The FileSystem for a table location (ConfigError naming the key when it cannot be)."""
    base_path = check_base_path(base_path)
    if not is_object_store_uri(base_path):
        if storage_options:
            raise ConfigError("only applies to object-store base paths (s3://, gs://, az://)",
                              "table.storage_options")
        return local_filesystem_for(base_path)
    try:
        return ObjectStoreFileSystem(base_path, storage_options)
    except ValueError as exc:
        raise ConfigError(str(exc), "table.base_path") from None
    except ConfigError:  # an AWS profile named but unusable (shared.storage.credentials)
        raise
    except Exception as exc:  # noqa: BLE001 - obstore raises its own types for bad options
        half = half_pair(storage_options or {})
        if half is not None:
            raise ConfigError(f"{base_path}: {half}") from None
        # object_store's message may quote the refused value (a secret, say): name only
        # the keys that were given and the kind of error.
        keys = ", ".join(sorted(storage_options or {})) or "none"
        raise ConfigError(f"{type(exc).__name__} while opening the store (options given: "
                          f"{keys}); check each option's name and format",
                          "table.storage_options") from None


def check_exclusive_create(fs: FileSystem, base_path: str) -> None:
    """Create a fresh probe key twice: the second create must be refused.

    ConfigError (exit 2) when the store accepts both or cannot be written at all; the probe
    key is removed either way.
    """
    if isinstance(fs, LocalFileSystem):
        return  # link(2) is the fence; nothing a local filesystem could get wrong silently
    probe = posixpath.join(base_path.rstrip("/"), layout.SINK_PROBE_DIR, f"{uuid.uuid4().hex}.json")
    try:
        if not fs.create_exclusive(probe, b'{"probe": 1}'):
            raise ConfigError(f"the store refused to create a fresh key {probe}",
                              "table.base_path")
        second = fs.create_exclusive(probe, b'{"probe": 2}')
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - unreachable store, bad credentials, no bucket
        raise ConfigError(f"cannot write the table's store ({type(exc).__name__}: {exc})",
                          "table.base_path") from None
    finally:
        try:
            fs.delete(probe)
        except Exception as exc:  # noqa: BLE001 - a leftover probe key is harmless
            log.warning("could not remove the start-up probe key %s: %s", probe, exc)
    if second:
        raise ConfigError(
            "the object store accepted a second create of the same key: it ignores "
            "'If-None-Match: *' (conditional PUT), so the sink log cannot fence a zombie "
            "coordinator. Use a store with conditional writes (AWS S3, GCS, Azure Blob, "
            "a recent MinIO)", "table.base_path")
    log.info("%s refuses a second create of the same key: the fence holds", base_path)
