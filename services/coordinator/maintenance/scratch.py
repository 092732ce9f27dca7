"""Clustering's local scratch directories, and the removal of those a killed pass left.

A rewrite writes its group's new base file into a local scratch directory before uploading it
(up to a target file's size each, 128 MiB by default). A pass that ends in any other way
removes its directory; one killed (SIGKILL, the OOM killer, a node drained without grace)
leaves it, and every kill leaves another until the disk is full. So each directory holds a
lock (``flock`` on a file inside it) for as long as its pass uses it — the kernel releases it
when the process dies, however it dies — and each rewrite first removes every
``hudi-sink-cluster-*`` directory whose lock nobody holds. Another live process's directory
(a second coordinator on the same host) is locked and stays. A directory younger than
:data:`MIN_AGE_S` stays too: its owner may be between creating it and locking it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator

__all__ = ["scratch_dir", "remove_abandoned", "PREFIX", "MIN_AGE_S"]

log = logging.getLogger("hudi_sink.maintenance")

PREFIX = "hudi-sink-cluster-"
MIN_AGE_S = 60.0
"""Unlocked directories younger than this are left alone (an owner locks within microseconds)."""
_LOCK = ".lock"


@contextlib.contextmanager
def scratch_dir() -> Iterator[str]:
    """A fresh directory under the system's temporary directory, locked while in use and
    removed at the end."""
    path = tempfile.mkdtemp(prefix=PREFIX)
    try:
        lock = os.open(os.path.join(path, _LOCK), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield path
        finally:
            os.close(lock)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def remove_abandoned(min_age_s: float = MIN_AGE_S) -> list[str]:
    """Remove the scratch directories no live process holds; returns their paths."""
    removed = []
    root = tempfile.gettempdir()
    with os.scandir(root) as entries:
        candidates = [e.path for e in entries
                      if e.name.startswith(PREFIX) and e.is_dir(follow_symlinks=False)]
    for path in candidates:
        try:
            if time.time() - os.lstat(path).st_mtime < min_age_s:
                continue
            if _remove_unless_held(path):
                removed.append(path)
        except OSError as exc:  # gone meanwhile, or another user's: not ours to judge
            log.debug("scratch directory %s left alone: %s", path, exc)
    if removed:
        log.warning("removed %d clustering scratch director%s left by killed passes: %s",
                    len(removed), "y" if len(removed) == 1 else "ies", ", ".join(removed))
    return removed


def _remove_unless_held(path: str) -> bool:
    try:
        lock = os.open(os.path.join(path, _LOCK), os.O_RDWR)
    except FileNotFoundError:  # killed before it locked (the age check covers a live one)
        shutil.rmtree(path)
        return True
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live pass holds it
        shutil.rmtree(path)
        return True
    finally:
        os.close(lock)
