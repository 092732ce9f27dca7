"""Settling one intent: decide from the table's state (``decision.decide``) and act on it.

The intent loop (``intents``) and the staging sweep (``staging``) both come here, so a file
goes through the same rules whoever found it: a file listed by a completed commit is never
deleted, a missing file is success, and a "not yet" answer is re-taken on a fresh snapshot
before it counts. A delete that leaves a finished instant's staging directory without files
removes the directory too.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from enum import StrEnum

from hudi_sink.services.deleter.context import Counted, DeleterContext
from hudi_sink.services.deleter.decision import Decision, Outcome, decide
from hudi_sink.services.deleter.staging import finished_reason, remove_if_empty, staging_dir_of
from hudi_sink.services.deleter.table_state import TableSnapshot, own_instant, relative_path
from hudi_sink.shared.deletion.intent import PendingDelete
from hudi_sink.shared.errors import HudiSinkError
from hudi_sink.shared.storage.fs import FileInfo

__all__ = ["Effect", "Verdict", "Settler"]

log = logging.getLogger("hudi_sink.deleter")

_RUNTIME_ERRORS = (HudiSinkError, OSError, ValueError, TimeoutError)
"""What one attempt may fail with (storage, table metadata); anything else is a bug (a
:class:`shared.errors.HudiSinkBug` is outside these, so it ends the service)."""


class Effect(StrEnum):
    """What handling one intent did (each is a metrics outcome too)."""

    DELETED = "deleted"
    MISSING_ALREADY = "missing_already"
    KEPT_IN_USE = "kept_in_use"
    RETRIED = "retried"
    DLQ = "dlq"


@dataclass(frozen=True)
class Verdict:
    """What settling one intent did."""

    effect: Effect | None
    """None: not settled — not yet decidable, or the attempt failed (``error``)."""
    rule: str
    """The deciding rule, or the failure (``<error class>: <message>``)."""
    error: Exception | None = None


class Settler:
    """Decides and deletes; counts what it did in the context's tally."""

    def __init__(self, context: DeleterContext, *, orphan_min_age_s: float) -> None:
        self.context = context
        self._orphan_min_age_s = orphan_min_age_s

    async def settle(self, intent: PendingDelete) -> Verdict:
        """Decide (re-deciding "not yet" answers on a fresh snapshot) and act on it; a runtime
        failure (storage, table metadata) is the verdict's ``error``, a bug is raised."""
        try:
            return await self._settle(intent)
        except _RUNTIME_ERRORS as exc:
            return Verdict(None, f"{type(exc).__name__}: {exc}", error=exc)

    async def _settle(self, intent: PendingDelete) -> Verdict:
        ctx = self.context
        snapshot = await ctx.cache.get(ctx.table_path, self._named_instants(intent))
        inside = relative_path(ctx.table_path, intent.file_path) is not None
        info = await asyncio.to_thread(ctx.fs.file_info, intent.file_path) if inside else None
        decision = self._decide(intent, snapshot, info)
        if decision.recheck:
            snapshot = await ctx.cache.refresh(ctx.table_path)
            decision = self._decide(intent, snapshot, info)
        match decision.outcome:
            case Outcome.DELETE:
                if await asyncio.to_thread(ctx.fs.delete, intent.file_path):
                    return Verdict(Effect.DELETED, decision.rule)
                return Verdict(Effect.MISSING_ALREADY, "gone before the delete")
            case Outcome.ALREADY_GONE:
                return Verdict(Effect.MISSING_ALREADY, decision.rule)
            case Outcome.KEEP:
                return Verdict(Effect.KEPT_IN_USE, decision.rule)
            case Outcome.RETRY_LATER:
                return Verdict(None, decision.rule)

    async def prune_staging(self, path: str, effect: Effect) -> None:
        """After ``path`` went away: remove its staging directory when that now holds no file
        and its instant is finished. Best effort — a failure leaves it to the sweep."""
        if effect not in (Effect.DELETED, Effect.MISSING_ALREADY):
            return
        ctx = self.context
        located = staging_dir_of(ctx.table_path, path)
        if located is None:
            return
        instant, directory = located
        try:
            snapshot = await ctx.cache.get(ctx.table_path, [instant])
            if finished_reason(snapshot, instant) is None:
                return
            if await asyncio.to_thread(remove_if_empty, ctx.fs, directory):
                ctx.tally.add(Counted.STAGING_DIR_REMOVED)
                log.info("removed the empty staging directory of finished instant %s", instant)
        except _RUNTIME_ERRORS as exc:
            log.warning("could not remove staging directory %s: %s: %s", directory,
                        type(exc).__name__, exc)

    async def sweep_one(self, intent: PendingDelete) -> bool:
        """The sweep's step for one file: the same decision and delete as an intent from the
        topic, without the topic (a failure is retried by the next pass). True when gone.
        Counted apart from intents (``swept``), so the intent counters stay about intents."""
        tally = self.context.tally
        verdict = await self.settle(intent)
        if verdict.error is not None:
            tally.add(Counted.SWEEP_FAILED)
            log.warning("sweep: deleting %s failed: %s", intent.file_path, verdict.rule)
            return False
        if verdict.effect is Effect.DELETED:
            tally.add(Counted.SWEPT)
            log.info("sweep: deleted %s (%s)", intent.file_path, verdict.rule)
        elif verdict.effect is not Effect.MISSING_ALREADY:
            log.info("sweep: kept %s (%s)", intent.file_path, verdict.rule)
            return False
        await self.prune_staging(intent.file_path, verdict.effect)
        return True

    def _decide(
        self, intent: PendingDelete, snapshot: TableSnapshot, info: FileInfo | None
    ) -> Decision:
        return decide(intent, snapshot, info, now=self.context.clock(),
                      orphan_min_age_s=self._orphan_min_age_s)

    def _named_instants(self, intent: PendingDelete) -> list[str]:
        """Instants for the staleness guard: the intent's, plus the one its path names."""
        instants = intent.instants()
        relative = relative_path(self.context.table_path, intent.file_path)
        owner = own_instant(relative) if relative is not None else None
        if owner is not None:
            instants.append(owner)
        return instants
