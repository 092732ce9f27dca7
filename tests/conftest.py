"""Shared pytest fixtures.

One embedded tansu broker serves the whole session: it starts in ~10 ms but every test
uses its own topic names (``unique_name``), so tests never see each other's data and the
order of tests does not matter.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from shared.broker import EmbeddedBroker


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """A running broker for the session; its log is kept in the pytest temp dir."""
    log_path = tmp_path_factory.mktemp("tansu") / "broker.log"
    embedded = EmbeddedBroker(log_path=log_path)
    embedded.start()
    try:
        yield embedded
    finally:
        embedded.stop()


@pytest.fixture
def unique_name() -> str:
    """A short name unique to this test (``t`` + 8 hex), to build topic and sink names."""
    return f"t{uuid.uuid4().hex[:8]}"
