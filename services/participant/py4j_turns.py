"""A shorter GIL switch interval while a flush's thread builds a classic-PySpark job.

Every classic-PySpark DataFrame call is a py4j socket round trip, and the calling thread must
take the GIL back after each answer. Python hands the GIL over only every switch interval
(5 ms by default) while another thread runs Python (the event loop decoding records, a merge
being planned). Building a job that carries old rows takes about 130 calls. Measured (a
9-slice job, warm JVM): 0.3-0.5 s to build alone, 1.5 s beside one CPU-bound thread, 0.53 s
beside it with a 0.2 ms interval. On the upsert bench a participant builds eight such jobs per
commit, two at a time, beside decoding and planning.

Only while a job is built: the interval is process-wide, and kept short for good it costs the
event loop's decoding as much as it helps py4j (tried: the bench's p99 got worse). Builds may
overlap (two Spark slots): the interval is restored when the last one ends.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["BUILD_SWITCH_INTERVAL_S", "quick_turns"]

BUILD_SWITCH_INTERVAL_S = 0.0002

_lock = threading.Lock()
_builds = 0
_saved: float | None = None
"""The process's own interval while a shorter one is set (None: it was short enough)."""


@contextmanager
def quick_turns() -> Iterator[None]:
    """The GIL switch interval is :data:`BUILD_SWITCH_INTERVAL_S` inside (and the process's
    own value again once no thread is inside)."""
    global _builds, _saved
    with _lock:
        if _builds == 0:
            own = sys.getswitchinterval()
            _saved = own if own > BUILD_SWITCH_INTERVAL_S else None
            if _saved is not None:
                sys.setswitchinterval(BUILD_SWITCH_INTERVAL_S)
        _builds += 1
    try:
        yield
    finally:
        with _lock:
            _builds -= 1
            if _builds == 0 and _saved is not None:
                sys.setswitchinterval(_saved)
                _saved = None
