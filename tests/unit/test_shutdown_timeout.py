"""``service.shutdown_timeout_ms`` (seed ``shutdown.timeout.ms``): the service shell's graceful
shutdown — finishing the work in hand, then closing clients — is bounded as a whole; what is
still running then is cancelled and the service stops."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from typing import Any

import pytest
from eventually import eventually_async
from fastapi import APIRouter

from hudi_sink.shared.config.settings import config_from_mapping
from hudi_sink.shared.runtime.lifecycle import CANCEL_GRACE_S, ServiceShell
from hudi_sink.shared.runtime.states import ServicePhase


class Stubborn(ServiceShell[str]):
    """A service whose work in hand and whose close both hang."""

    name = "stubborn"

    def __init__(self, timeout_ms: int) -> None:
        super().__init__(config_from_mapping({"service": {"shutdown_timeout_ms": timeout_ms}},
                                             environ={}))
        self.close_cancelled = False

    async def start(self) -> str:
        return "clients"

    def routines(self, running: str) -> dict[str, Coroutine[Any, Any, Any]]:
        return {"idle": asyncio.Event().wait()}

    async def on_stop(self, routines: list[asyncio.Task[Any]]) -> None:
        await asyncio.sleep(0.3)  # finishing a batch: takes part of the budget

    async def close(self, running: str | None) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.close_cancelled = True
            raise

    def routers(self) -> list[APIRouter]:
        return []


async def test_shutdown_is_bounded_by_the_timeout(caplog: pytest.LogCaptureFixture) -> None:
    service = Stubborn(timeout_ms=800)
    task = asyncio.create_task(service.run())
    await eventually_async(lambda: service.lifecycle.state is ServicePhase.RUNNING, 5, "running")
    asked = time.monotonic()
    service.shutdown()
    await asyncio.wait_for(task, 5)
    took = time.monotonic() - asked
    assert 0.7 < took < 1.5, took  # on_stop and close share one budget
    assert service.close_cancelled
    assert service.lifecycle.state is ServicePhase.STOPPED
    assert "closing clients did not finish within service.shutdown_timeout_ms (800 ms)" in caplog.text


class SwallowsCancellation(Stubborn):
    """A close that, like aiokafka's ``Fetcher.close`` (``with suppress(CancelledError): await
    self._fetch_task``), swallows the cancellation it gets and goes on closing."""

    async def close(self, running: str | None) -> None:
        inner = asyncio.ensure_future(asyncio.Event().wait())
        with contextlib.suppress(asyncio.CancelledError):
            await inner  # the shell's cancellation lands here and is swallowed
        self.close_cancelled = True
        await self.release.wait()  # the next close step: hangs until the test ends

    release = asyncio.Event()


async def test_a_close_that_swallows_its_cancellation_still_ends_within_the_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``asyncio.wait_for`` waits for the cancelled step without a bound: the shell used it,
    so such a close kept the service (and a SIGTERMed participant) alive for good."""
    service = SwallowsCancellation(timeout_ms=500)
    task = asyncio.create_task(service.run())
    await eventually_async(lambda: service.lifecycle.state is ServicePhase.RUNNING, 5, "running")
    asked = time.monotonic()
    service.shutdown()
    await asyncio.wait_for(task, 10)
    took = time.monotonic() - asked
    assert took < 0.5 + CANCEL_GRACE_S + 0.5, took
    assert service.close_cancelled
    assert service.lifecycle.state is ServicePhase.STOPPED
    assert "closing clients ignored its cancellation; left behind" in caplog.text
    SwallowsCancellation.release.set()  # let the abandoned close end with the test
