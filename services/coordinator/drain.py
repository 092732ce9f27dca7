"""A leader's graceful stop: end the open instant and commit what was reported.

A rolling update SIGTERMs the leading coordinator while an instant is open. Rolling that
instant back (what stopping used to do) throws away work every participant already did and
shows as an aborted transaction. Instead, while the leadership loop still runs (the shell's
``on_stop`` comes before the routines are cancelled), the stopping leader:

1. starts no new instant (``TransactionDriver.draining``);
2. ends the open instant at once, as ``POST /transactions/commit`` does
   (``TransactionDriver.request_commit``);
3. lets the normal path decide it: every partition answered → commit; the write-status
   timeout rules unchanged (a partial commit, waiting, or a roll back);
4. gives up after its share of ``service.shutdown_timeout_ms``: the rest of the budget is
   kept for the roll back ``CoordinatorService.close`` does then (``SHUTDOWN_ABORT_S``) and
   for leaving the group and closing clients (``CLOSE_RESERVE_S``).

Then ``close`` leaves the group, so a standby takes over at once and starts the next instant
from the offsets just committed.
"""

from __future__ import annotations

import asyncio
import logging

from hudi_sink.services.coordinator.transaction import TransactionDriver
from hudi_sink.shared.runtime.states import CoordinatorPhase

__all__ = ["drain", "drain_budget_s", "SHUTDOWN_ABORT_S", "CLOSE_RESERVE_S"]

log = logging.getLogger("hudi_sink.coordinator")

SHUTDOWN_ABORT_S = 5.0
"""How long stopping waits to roll the open instant back (then the next leader does). A roll
back writes a few small files (~40 ms on local disk, a few PUTs on an object store); taking
more of the budget from the drain would make rollbacks, the thing the drain avoids, likelier:
with the default 30 s budget the drain gets 22 s."""
CLOSE_RESERVE_S = 3.0
"""Kept for leaving the group and closing the clients after the roll back."""
POLL_S = 0.05
"""How often the drain looks at the driver's phase (the leadership loop's own step)."""


def drain_budget_s(shutdown_timeout_s: float) -> float:
    """The drain's share of the shutdown budget (0 when the budget leaves no room: then
    stopping rolls back at once, as before)."""
    return max(0.0, shutdown_timeout_s - SHUTDOWN_ABORT_S - CLOSE_RESERVE_S)


async def drain(driver: TransactionDriver, budget_s: float) -> bool:
    """End the open instant and wait, at most ``budget_s``, until it is decided; start no
    new one. True when no instant is left open (or we no longer lead: the next leader
    decides), False when the budget ran out (the caller rolls back)."""
    driver.draining = True
    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget_s
    ended: str | None = None
    seen: str | None = None
    while driver.is_leader and (driver.current is not None or driver.starting is not None
                                or driver.offsets.pending is not None):  # accepted: applied
        state = driver.current
        seen = state.instant if state is not None else seen
        if state is not None and state.instant != ended \
                and driver.phase.state is CoordinatorPhase.STARTED:
            ended = state.instant
            driver.request_commit()  # the next step sends END, as a REST commit does
            log.info("stopping: ended %s; committing what the participants report", ended)
        if loop.time() >= deadline:
            log.warning("stopping: %s not decided within %.1f s of the shutdown budget",
                        seen or driver.starting, budget_s)
            return False
        await asyncio.sleep(POLL_S)
    if seen is not None:
        view = driver.history.get(seen)  # none for an instant withdrawn (nothing moved)
        log.info("stopping: %s %s; no new instant started", seen,
                 view.state if view is not None else "withdrawn")
    return True
