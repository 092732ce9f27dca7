"""One filesystem interface for all table I/O.

Every byte the sink puts into (or reads from) a Hudi table goes through :class:`FileSystem`:
:class:`LocalFileSystem` here, ``shared.storage.object_store.ObjectStoreFileSystem`` for S3 (GCS, ABFS
untested), picked by ``shared.storage.backend.filesystem_for``. The interface is deliberately small and
maps onto object-store primitives:

- ``write_atomic``  -> one PUT (readers never see a partial object); ``write_file`` the same
  from a local file, streamed (a multipart upload),
- ``open_read`` -> ranged GETs (a large file is read in parts),
- ``create_exclusive`` -> PUT with ``If-None-Match: *`` (the fencing primitive: the second
  writer of the same path loses, and nobody ever sees partial content),
- ``rename`` -> copy + delete (not atomic on object stores; callers must make it idempotent,
  which is why the table code tolerates "already moved"),
- ``fsync_file`` / ``fsync_dir`` -> no-ops on object stores (a completed PUT is durable).

Durability: ``write_atomic`` and ``create_exclusive`` are durable when they return (content and
directory entry). ``rename`` is *not* by itself: a caller that moves many files makes them
durable once, with one ``fsync_file`` per file and one ``fsync_dir`` per distinct directory,
instead of paying two directory syncs per move.

All methods are synchronous: callers in asyncio code run them in worker threads
(``asyncio.to_thread``), which keeps the implementations simple and blocking-safe.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat as stat_module
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol, runtime_checkable

from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.storage.durable import fsync_and_close, fsync_dir, makedirs_durable, unlink_quiet

__all__ = ["FileInfo", "FileSystem", "LocalFileSystem", "filesystem_for"]

_FILE_SCHEME = "file://"

# errno values meaning "this filesystem cannot hard-link here" (FAT, some FUSE/SMB mounts, dirs).
_NO_LINK_ERRNOS = frozenset(
    {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS}
)


@dataclass(frozen=True)
class FileInfo:
    """What a listing returns about one entry.

    ``path`` is the full path, spelled from the path the caller passed in.
    """

    path: str
    name: str
    size: int
    mtime: float
    is_dir: bool
    mtime_is_write_start: bool = False
    """The store stamps a write's *start* (S3: a multipart upload's ``LastModified`` is when
    the upload began), so a file uploaded slowly looks old the moment it lands: an age guard
    must also count from when it first saw the file. Local files: False (``st_mtime`` moves
    with every write)."""


@runtime_checkable
class FileSystem(Protocol):
    """Table storage. Paths are plain strings (local paths or, later, URIs)."""

    def read_bytes(self, path: str) -> bytes:
        """Whole content of a file; FileNotFoundError when missing."""
        ...

    def open_read(self, path: str) -> BinaryIO:
        """A seekable reader of a file (ranged GETs on object stores), so a large file is
        read in parts instead of whole; FileNotFoundError when missing. Caller closes it."""
        ...

    def write_file(self, path: str, local_path: str) -> None:
        """``write_atomic`` with the content of the local file ``local_path``, streamed
        (a multipart upload on object stores): memory stays bounded whatever its size."""
        ...

    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace ``path`` with ``data`` so readers see either the old or the new content."""
        ...

    def create_exclusive(self, path: str, data: bytes) -> bool:
        """Create ``path`` with complete content only if it does not exist; False if it did."""
        ...

    def rename(self, src: str, dst: str) -> None:
        """Move a file; FileExistsError if ``dst`` is another existing file (never clobbers)."""
        ...

    def delete(self, path: str) -> bool:
        """Delete one file; False when it was already gone."""
        ...

    def delete_tree(self, path: str) -> None:
        """Delete a directory (or file) recursively; missing is fine."""
        ...

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists at ``path``."""
        ...

    def file_info(self, path: str) -> FileInfo | None:
        """Metadata of one entry, None when missing (HEAD on object stores)."""
        ...

    def list_dir(self, path: str) -> list[FileInfo]:
        """Direct children of a directory, sorted by name; [] when missing."""
        ...

    def walk_files(self, path: str) -> Iterator[FileInfo]:
        """Every file below ``path`` recursively (no directories), in a stable order."""
        ...

    def makedirs(self, path: str) -> None:
        """Create a directory and its parents; a no-op where directories do not exist."""
        ...

    def fsync_file(self, path: str) -> None:
        """Make a file's content durable (its directory entry needs ``fsync_dir``).

        FileNotFoundError when missing; a no-op where every completed write is durable."""
        ...

    def fsync_dir(self, path: str) -> None:
        """Make a directory's entries (creations, renames, removals) durable; a missing
        directory is fine (nothing to persist), a no-op where directories do not exist."""
        ...


def _local(path: str) -> str:
    """Local path for ``path`` or a ``file://`` URI.

    The URI is taken literally, without percent-decoding: partition directory names legitimately
    contain ``%2F`` and decoding it would turn an encoded value back into a path separator.
    """
    if path.startswith(_FILE_SCHEME):
        rest = path[len(_FILE_SCHEME):]
        if rest.startswith("localhost/"):
            rest = rest[len("localhost"):]
        if not rest.startswith("/"):
            raise ValueError(f"file URI must be absolute (file:///...): {path!r}")
        return rest
    if "\x00" in path:
        raise ValueError("path contains a NUL byte")
    return path


_COPY_CHUNK = 1024 * 1024


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _info(path: str, name: str, st: os.stat_result) -> FileInfo:
    return FileInfo(
        path=path,
        name=name,
        size=st.st_size,
        mtime=st.st_mtime,
        is_dir=stat_module.S_ISDIR(st.st_mode),
    )


class LocalFileSystem:
    """:class:`FileSystem` on a POSIX filesystem.

    Temp files are created next to their target (same directory, so ``os.replace``/``os.link``
    stay on one filesystem) and named ``.<name>.<random>.tmp``: the leading dot keeps them out of
    Hudi's timeline parsing and its base-file listing if a crash leaves one behind.
    """

    def _write_temp(self, target: str, data: bytes | Callable[[int], None]) -> str:
        """Write ``data`` (or let ``data(fd)`` write) to a fresh fsynced temp file beside
        ``target``; return its path."""
        parent = os.path.dirname(target) or "."
        makedirs_durable(parent)
        tmp = os.path.join(parent, f".{os.path.basename(target)}.{secrets.token_hex(8)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            if callable(data):
                data(fd)
            else:
                _write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            unlink_quiet(tmp)
            raise
        os.close(fd)
        return tmp

    def read_bytes(self, path: str) -> bytes:
        with open(_local(path), "rb") as handle:
            return handle.read()

    def open_read(self, path: str) -> BinaryIO:
        return open(_local(path), "rb")

    def write_atomic(self, path: str, data: bytes) -> None:
        """Temp file + fsync + ``os.replace`` + directory fsync: all-or-nothing and durable."""
        self._replace(_local(path), data)

    def _replace(self, target: str, data: bytes | Callable[[int], None]) -> None:
        tmp = self._write_temp(target, data)
        try:
            os.replace(tmp, target)
        except BaseException:
            unlink_quiet(tmp)
            raise
        fsync_dir(os.path.dirname(target) or ".")

    def write_file(self, path: str, local_path: str) -> None:
        """Copied in 1 MiB chunks into a temp file, then put in place as ``write_atomic`` does."""

        def copy(fd: int) -> None:
            with open(local_path, "rb") as source:
                while chunk := source.read(_COPY_CHUNK):
                    _write_all(fd, chunk)

        self._replace(_local(path), copy)

    def create_exclusive(self, path: str, data: bytes) -> bool:
        """Temp file + fsync + ``os.link(tmp, path)``.

        ``link`` fails atomically with EEXIST when ``path`` exists, and the linked file already
        holds the complete content, so no reader can observe a half-written winner (an
        ``O_CREAT|O_EXCL`` open followed by writes could). There is deliberately no fallback for
        filesystems without hard links: fencing must not silently degrade.
        """
        target = _local(path)
        tmp = self._write_temp(target, data)
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
        finally:
            unlink_quiet(tmp)
        fsync_dir(os.path.dirname(target) or ".")
        return True

    def rename(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst`` without ever replacing another file.

        Implemented as ``os.link(src, dst)`` + ``os.unlink(src)`` rather than "check, then
        os.rename": the link is an atomic "create if absent", so there is no window in which a
        concurrent writer's ``dst`` could be clobbered. If a crash struck between link and
        unlink, ``dst`` and ``src`` are the same inode; a retry sees that and just removes
        ``src``, so the operation is idempotent. Where hard links are unavailable (directories,
        some mounts) it falls back to an existence check plus ``os.rename``, which is only racy
        against concurrent writers of the same ``dst``.

        Not durable by itself (see the module docstring): callers that need the move to
        survive a power loss sync both parent directories, once per directory.
        """
        source, target = _local(src), _local(dst)
        parent = os.path.dirname(target) or "."
        os.makedirs(parent, exist_ok=True)
        try:
            os.link(source, target, follow_symlinks=False)
        except FileExistsError:
            if os.path.samefile(source, target):
                os.unlink(source)
                return
            raise FileExistsError(errno.EEXIST, "rename target exists", dst) from None
        except OSError as exc:
            if exc.errno not in _NO_LINK_ERRNOS:
                raise
            if os.path.lexists(target):
                raise FileExistsError(errno.EEXIST, "rename target exists", dst) from None
            os.rename(source, target)
        else:
            os.unlink(source)

    def delete(self, path: str) -> bool:
        try:
            os.unlink(_local(path))
        except FileNotFoundError:
            return False
        return True

    def delete_tree(self, path: str) -> None:
        target = _local(path)
        if os.path.islink(target) or os.path.isfile(target):
            unlink_quiet(target)
            return
        try:
            shutil.rmtree(target)
        except FileNotFoundError:
            pass  # missing (or removed concurrently): the goal state is reached either way

    def exists(self, path: str) -> bool:
        return os.path.lexists(_local(path))

    def file_info(self, path: str) -> FileInfo | None:
        try:
            st = os.stat(_local(path))
        except FileNotFoundError:
            return None
        return _info(path, os.path.basename(path.rstrip("/")), st)

    def list_dir(self, path: str) -> list[FileInfo]:
        found: list[tuple[str, os.stat_result]] = []
        try:
            with os.scandir(_local(path)) as entries:
                for entry in entries:
                    try:
                        found.append((entry.name, entry.stat(follow_symlinks=False)))
                    except FileNotFoundError:
                        continue  # deleted while listing; the rest of the listing still counts
        except (FileNotFoundError, NotADirectoryError):
            return []  # the directory itself is missing
        found.sort(key=lambda item: item[0])
        return [_info(os.path.join(path, name), name, st) for name, st in found]

    def walk_files(self, path: str) -> Iterator[FileInfo]:
        root = _local(path)
        for directory, dirs, files in os.walk(root):
            dirs.sort()
            relative = os.path.relpath(directory, root)
            shown = path if relative == "." else os.path.join(path, relative)
            for name in sorted(files):
                try:
                    st = os.stat(os.path.join(directory, name), follow_symlinks=False)
                except FileNotFoundError:
                    continue  # deleted while walking
                yield _info(os.path.join(shown, name), name, st)

    def makedirs(self, path: str) -> None:
        os.makedirs(_local(path), exist_ok=True)

    def fsync_file(self, path: str) -> None:
        """``fsync`` through a read-only descriptor: on POSIX it flushes every dirty page of the
        inode, whoever wrote them (Spark's Parquet writer never syncs its output)."""
        fsync_and_close(os.open(_local(path), os.O_RDONLY))

    def fsync_dir(self, path: str) -> None:
        fsync_dir(_local(path))


def filesystem_for(base_path: str) -> FileSystem:
    """The LocalFileSystem for a local path or ``file://`` (object stores:
    ``shared.storage.backend.filesystem_for``).

    Any other scheme fails at start with a ConfigError naming the config key, instead of
    writing a table into a local directory literally called ``hdfs:``.
    """
    if not base_path:
        raise ConfigError("must not be empty", "table.base_path")
    if base_path.startswith(_FILE_SCHEME):
        try:
            _local(base_path)
        except ValueError as exc:
            raise ConfigError(str(exc), "table.base_path") from None
        return LocalFileSystem()
    if "://" in base_path:
        scheme = base_path.split("://", 1)[0]
        raise ConfigError(
            f"unsupported storage scheme {scheme!r} (supported: local paths, file://, s3://; "
            "gs://, az://, abfs:// untested)",
            "table.base_path",
        )
    return LocalFileSystem()
