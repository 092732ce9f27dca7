"""Blocking calls that must never hold up the process's exit.

``asyncio.to_thread`` runs a call on the loop's default executor, whose threads are joined
when the loop closes (``asyncio.run`` waits for them without a bound on Python 3.11) and
again at interpreter exit. A call that cannot be interrupted — a py4j call inside a Spark
job, a SparkSession still starting — then keeps a stopped service alive for as long as the
call runs: a participant SIGTERMed while Spark warmed up took 35–47 s to exit on a busy
2-core machine (its shutdown budget is 30 s).

:func:`in_daemon_thread` runs such a call on a daemon thread of its own. Awaiting it is like
awaiting ``to_thread`` (cancelling the await abandons the call, which runs on: Python cannot
interrupt a thread), but the process exits without waiting for it. Only for calls whose
abandonment loses nothing: a flush's staged files that no status lists are swept by the
existing rules, and a SparkSession's JVM ends with the Python process.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["in_daemon_thread"]

P = ParamSpec("P")
T = TypeVar("T")


async def in_daemon_thread(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` on a new daemon thread; its result or exception."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():  # the await was cancelled: nobody wants the outcome
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result = context.run(fn, *args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            outcome: tuple[T | None, BaseException | None] = (None, exc)
        else:
            outcome = (result, None)
        with contextlib.suppress(RuntimeError):  # the loop has closed: the process is ending
            loop.call_soon_threadsafe(settle, *outcome)

    name = f"daemon-{getattr(fn, '__qualname__', 'call')}"
    threading.Thread(target=run, name=name, daemon=True).start()
    return await future
