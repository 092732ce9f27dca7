"""How ``pytest -n N`` (``scripts/test.sh``) spreads the suite over its workers.

Test by test, so one long file cannot become the run's tail (``test_failures.py`` alone is
about six of the suite's longest tests; sent whole to one worker it took 15 minutes while the
others had finished) — except a file with a module-, class- or package-scoped fixture, which
goes whole to one worker so that fixture (a running pipeline, SparkSessions) starts once.
Whole files first (the larger first), then single tests in collection order: integration
tests, then the short unit tests, which fill in at the end. A worker gets its next test as it
finishes one.

Session fixtures are per worker: each has its own embedded broker, S3 server and, if one of its
tests asks, Kafka node, all on free ports, so tests on different workers share nothing but
the file system, where each writes below its own ``tmp_path``.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

SHARED_FIXTURE = re.compile(r"""scope\s*=\s*["'](module|class|package)["']""")


@cache
def _has_shared_fixture(path: Path) -> bool:
    try:
        return SHARED_FIXTURE.search(path.read_text(encoding="utf-8")) is not None
    except OSError:
        return False


class PerTestScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with a scope per test, or per file where the file shares a
    fixture between its tests."""

    def __init__(self, config: pytest.Config, log: object = None) -> None:
        super().__init__(config, log)  # type: ignore[arg-type]
        self._root = config.rootpath

    def _split_scope(self, nodeid: str) -> str:
        file = nodeid.split("::", 1)[0]
        return file if _has_shared_fixture(self._root / file) else nodeid
