"""Shared pytest fixtures.

One embedded tansu broker serves the whole session: it starts in ~10 ms but every test
uses its own topic names (``unique_name``), so tests never see each other's data and the
order of tests does not matter.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from s3_server import MotoS3

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


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    """moto's S3 API server for the session (tests take a bucket each: ``s3_bucket``)."""
    server = MotoS3().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(moto_s3: MotoS3) -> str:
    """A fresh bucket on the session's S3 server."""
    return moto_s3.new_bucket()
