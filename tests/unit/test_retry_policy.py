"""``service.retry_backoff_ms`` / ``service.retry_timeout_ms`` (seed ``retry.backoff.ms``,
``write.retry.timeout``): the one tenacity policy storage and Kafka operations retry with."""

from __future__ import annotations

import time

import pytest

from hudi_sink.shared.config.sections import ServiceConfig
from hudi_sink.shared.errors import ConfigError, HudiSinkBug
from hudi_sink.shared.runtime.retry import retrying


async def _run(config: ServiceConfig, fail_times: int, error: Exception,
               attempts: int | None = None) -> tuple[list[float], list[BaseException]]:
    started: list[float] = []
    failures: list[BaseException] = []
    async for attempt in retrying(config, "op", attempts=attempts, on_failure=failures.append):
        with attempt:
            started.append(time.monotonic())
            if len(started) <= fail_times:
                raise error
    return started, failures


async def test_backoff_doubles_from_retry_backoff_ms() -> None:
    config = ServiceConfig(retry_backoff_ms=50, retry_timeout_ms=10_000)
    started, failures = await _run(config, 3, OSError("disk"))
    waits = [b - a for a, b in zip(started, started[1:], strict=False)]
    assert len(started) == 4 and len(failures) == 3
    for wait, expected in zip(waits, (0.05, 0.1, 0.2), strict=True):
        assert expected * 0.9 <= wait < expected + 0.1, waits


async def test_gives_up_after_retry_timeout_with_the_last_error() -> None:
    config = ServiceConfig(retry_backoff_ms=50, retry_timeout_ms=300)
    began = time.monotonic()
    with pytest.raises(OSError, match="still down"):
        await _run(config, 1000, OSError("still down"))
    assert time.monotonic() - began < 1.0


async def test_attempt_cap_and_no_retry_of_our_own_bugs() -> None:
    config = ServiceConfig(retry_backoff_ms=1, retry_timeout_ms=60_000)
    with pytest.raises(OSError):
        await _run(config, 1000, OSError("x"), attempts=4)
    started: list[float] = []
    with pytest.raises(HudiSinkBug):
        async for attempt in retrying(config, "op"):
            with attempt:
                started.append(time.monotonic())
                raise HudiSinkBug("invariant broken")
    assert len(started) == 1

    with pytest.raises(ConfigError):
        async for attempt in retrying(config, "op"):
            with attempt:
                started.append(time.monotonic())
                raise ConfigError("control topic has 3 partitions", "kafka.control_topic")
    assert len(started) == 2
