"""Run one service and its admin app in the same event loop, with one signal policy.

SIGTERM/SIGINT ask the service to shut down (it stops intake, finishes or abandons its work
cleanly and returns); the admin server stops after the service. Exit codes follow the CLI
contract: 0 clean stop, 1 runtime failure, 2 bad config/usage.
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

from shared.errors import ConfigError

__all__ = ["RunnableService", "serve_service", "configure_logging"]

log = logging.getLogger("hudi_sink.runner")

T = TypeVar("T")


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


def configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("aiokafka", "kafka", "py4j", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


async def serve_service(service: RunnableService, host: str, port: int) -> int:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, service.shutdown)
    server = _QuietServer(
        uvicorn.Config(
            service.admin_app(), host=host, port=port, log_level="warning", lifespan="off"
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
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(admin_task, timeout=5)
    log.info("%s stopped (exit code %d)", service.name, code)
    return code
