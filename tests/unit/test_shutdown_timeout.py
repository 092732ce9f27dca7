"""``service.shutdown_timeout_ms`` (seed ``shutdown.timeout.ms``): the service shell's graceful
shutdown — finishing the work in hand, then closing clients — is bounded as a whole; what is
still running then is cancelled and the service stops."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

import pytest
from fastapi import APIRouter

from shared.config import config_from_mapping
from shared.lifecycle import ServiceShell
from shared.states import ServicePhase


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
    await asyncio.sleep(0.1)
    asked = time.monotonic()
    service.shutdown()
    await asyncio.wait_for(task, 5)
    took = time.monotonic() - asked
    assert 0.7 < took < 1.5, took  # on_stop and close share one budget
    assert service.close_cancelled
    assert service.lifecycle.state is ServicePhase.STOPPED
    assert "closing clients did not finish within service.shutdown_timeout_ms (800 ms)" in caplog.text
