"""A SIGTERM during start-up cancels the wait for Kafka even when an attempt swallows the
cancellation: Python 3.11's ``wait_for`` returns the probe's outcome when the cancel lands as
the probe finishes. The wait must end then, not retry until ``startup_timeout_s``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError

from hudi_sink.shared.config.settings import KafkaConfig
from hudi_sink.shared.kafka import connection


async def test_a_cancel_landing_as_an_attempt_fails_still_ends_the_wait(
        monkeypatch: pytest.MonkeyPatch) -> None:
    attempts = 0
    waiting: asyncio.Task[None] | None = None

    async def probe_cancelled_as_it_fails(_kafka: Any, _timeout_s: float) -> None:
        nonlocal attempts
        attempts += 1
        await asyncio.sleep(0)
        assert waiting is not None
        waiting.cancel()  # SIGTERM arrives just as the refused connection is reported
        raise KafkaConnectionError("refused")

    monkeypatch.setattr(connection, "_probe", probe_cancelled_as_it_fails)
    kafka = KafkaConfig(bootstrap_servers="127.0.0.1:1", topics=["t"], startup_timeout_s=120)
    waiting = asyncio.create_task(connection.wait_for_kafka(kafka))
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting, 5)
    assert attempts == 1  # no retry after the cancel
