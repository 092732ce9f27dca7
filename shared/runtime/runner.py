"""Run one service and its admin app in the same event loop, with one signal policy.

SIGTERM/SIGINT ask the service to shut down (it stops intake, finishes or abandons its work
cleanly and returns); the admin server stops after the service. Exit codes follow the CLI
contract: 0 clean stop, 1 runtime failure, 2 bad config/usage.

The first signal (or the service's return) also arms an :class:`~shared.runtime.exit_watchdog.ExitWatchdog`:
the process ends within ``service.shutdown_timeout_ms`` plus ``EXIT_MARGIN_S`` whatever is
still running. The signal handler is a plain ``signal.signal`` one, not the loop's: it runs
in the main thread even while the event loop is stuck, so the bound holds then too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator
from typing import Protocol, TypeVar

import uvicorn
from fastapi import FastAPI

from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.runtime.exit_watchdog import ExitWatchdog

__all__ = ["RunnableService", "serve_service", "EXIT_MARGIN_S"]

log = logging.getLogger("hudi_sink.runner")

T = TypeVar("T")

EXIT_MARGIN_S = 10.0
"""Beyond the graceful budget: the admin server's stop (up to 5 s) and the loop's close."""


class RunnableService(Protocol):
    name: str

    async def run(self) -> None:
        """Return when fully stopped; raise on a fatal error."""

    def shutdown(self) -> None:
        """Ask the service to stop; idempotent and safe before start."""

    def admin_app(self) -> FastAPI: ...


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handling (the runner owns signals)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_service(service: RunnableService, host: str, port: int, *,
                        shutdown_timeout_s: float, exit_margin_s: float = EXIT_MARGIN_S) -> int:
    """Run ``service`` and its admin app; the exit code. Once stop is asked or the service
    returns, the process exits within ``shutdown_timeout_s + exit_margin_s`` (module doc)."""
    loop = asyncio.get_running_loop()
    watchdog = ExitWatchdog(service.name, shutdown_timeout_s + exit_margin_s)

    def stop_requested(signum: int, _frame: object) -> None:
        watchdog.arm(signal.Signals(signum).name)
        with contextlib.suppress(RuntimeError):  # the loop has closed: already stopping
            loop.call_soon_threadsafe(service.shutdown)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop_requested)
    server = _QuietServer(
        uvicorn.Config(
            service.admin_app(), host=host, port=port, log_level="warning", lifespan="off",
            log_config=None,  # its lines go through the root logger, in log.format
        )
    )
    admin_task = asyncio.create_task(server.serve(), name=f"{service.name}-admin")
    while not server.started and not admin_task.done():  # noqa: ASYNC110 - uvicorn has no event
        await asyncio.sleep(0.05)
    if admin_task.done():
        exc = admin_task.exception()
        log.error("admin server could not start on %s:%d: %s", host, port, exc)
        return 2
    bound = port
    for srv in server.servers:
        for sock in srv.sockets:
            bound = sock.getsockname()[1]
    log.info("%s admin listening on http://%s:%d", service.name, host, bound)
    code = 0
    try:
        await service.run()
    except ConfigError as exc:
        log.error("%s: configuration error: %s", service.name, exc)
        code = 2
    except Exception:
        log.exception("%s failed", service.name)
        code = 1
    finally:
        watchdog.settle(code)
        watchdog.arm("the service's return")
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(admin_task, timeout=5)
    log.info("%s stopped (exit code %d)", service.name, code)
    return code
