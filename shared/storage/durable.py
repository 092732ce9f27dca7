"""Durable local-file primitives behind :class:`shared.storage.fs.LocalFileSystem`: directory syncs,
directory creation that survives a power loss, quiet unlinks.

Kept apart from the filesystem interface so each module reads whole.
"""

from __future__ import annotations

import errno
import os

__all__ = ["fsync_dir", "fsync_and_close", "makedirs_durable", "unlink_quiet"]


# fsync errors meaning "this kind of file cannot be synced" (nothing to persist), as opposed to
# EIO/ENOSPC, which mean the data may be lost and must surface.
_NO_SYNC_ERRNOS = frozenset({errno.EINVAL, errno.EROFS, errno.ENOTSUP, errno.EOPNOTSUPP})


def fsync_dir(directory: str) -> None:
    """Make a directory's entries durable.

    A directory that is gone, or one the OS cannot open or sync (no ``O_DIRECTORY``, a
    filesystem without directory sync), has nothing this process could persist; an I/O error
    during the sync itself is raised, because then a just-created entry may not survive.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno in _NO_SYNC_ERRNOS or exc.errno in (errno.EISDIR, errno.EACCES, errno.ENOTDIR):
            return
        raise
    fsync_and_close(fd)


def fsync_and_close(fd: int) -> None:
    """``fsync`` then close; "cannot sync this kind of file" is fine, an I/O error is not."""
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _NO_SYNC_ERRNOS:
            raise
    finally:
        os.close(fd)


def makedirs_durable(directory: str) -> None:
    """``os.makedirs`` whose new directories survive a power loss: each created directory's
    parent is synced, so a file created inside it (and synced) is reachable after a crash.
    Costs nothing when the directory already exists."""
    missing: list[str] = []
    current = directory
    while current and not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    if not missing:
        return
    os.makedirs(directory, exist_ok=True)
    for created in reversed(missing):  # top-down: the parent of the outermost one first
        fsync_dir(os.path.dirname(created) or ".")


def unlink_quiet(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass

