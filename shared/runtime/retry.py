"""Retries of storage and Kafka operations, one policy for the whole process (tenacity).

``service.retry_backoff_ms`` (seed ``retry.backoff.ms``) is the first wait, doubling per attempt
up to ten times that; ``service.retry_timeout_ms`` (seed ``write.retry.timeout``) is how long an
operation is retried before its last error is raised. A caller may also cap the attempts.
``HudiSinkBug`` (our own invariant broken), ``ConfigError``, ``SparkHungError`` and cancellation
are never retried.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_exponential,
)
from tenacity.stop import stop_base

from hudi_sink.shared.config.sections import ServiceConfig
from hudi_sink.shared.errors import ConfigError, HudiSinkBug, SparkHungError

__all__ = ["retrying"]

log = logging.getLogger("hudi_sink.retry")


def _retryable(exc: BaseException) -> bool:
    """Not our own bug, not a configuration error, not a hung Spark driver (none of them goes
    away by waiting)."""
    return isinstance(exc, Exception) and not isinstance(
        exc, HudiSinkBug | ConfigError | SparkHungError)


def retrying(config: ServiceConfig, what: str, *, attempts: int | None = None,
             on_failure: Callable[[BaseException], None] | None = None) -> AsyncRetrying:
    """``async for attempt in retrying(...): with attempt: ...`` — retried as the module says;
    every failed attempt is passed to ``on_failure`` (the last one too), each one followed by
    another attempt is logged with the wait."""

    def after(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        if error is not None and on_failure is not None:
            on_failure(error)

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        log.warning("%s: attempt %d failed, retrying in %.1f s: %s", what, state.attempt_number,
                    state.upcoming_sleep, error)

    # Never sleep into a next attempt that would start past the timeout.
    stop: stop_base = stop_before_delay(config.retry_timeout_ms / 1000)
    if attempts is not None:
        stop = stop | stop_after_attempt(attempts)
    first = config.retry_backoff_ms / 1000
    return AsyncRetrying(
        stop=stop,
        wait=wait_exponential(multiplier=first, min=first, max=10 * first),
        retry=retry_if_exception(_retryable),
        after=after,
        before_sleep=before_sleep,
        reraise=True,
    )
