"""The orphan scan (the reconcile): storage minus everything any instant references.

``table_state.scan_orphans`` does the listing; this module turns it into a report, or (not a
dry run) into ORPHAN intents on the deletion topic, acked before it answers. Enqueued
orphans are decided like every other intent when they are due (``send_delay_s`` later), so
a file some instant started to reference in between is still kept. It runs on request
(``POST /deletions/reconcile``) and on a schedule (``schedule.ScheduledWork``).

On an object store a file's mtime is when its write *started* (S3 multipart uploads), so
there an orphan must also have been listed by an earlier scan at least ``orphan_min_age_s``
before: the first scan of a deleter records, a later one acts (sightings are in memory, so a
restart starts over, on the safe side). Local files age by mtime alone.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath

from aiokafka.errors import KafkaError

from hudi_sink.services.deleter.context import Counted, DeleterContext
from hudi_sink.services.deleter.errors import ServiceUnavailable
from hudi_sink.services.deleter.table_state import own_instant, relative_path, scan_orphans
from hudi_sink.services.deleter.views import OrphanView, ReconcileResult
from hudi_sink.shared.config.settings import DeletionConfig
from hudi_sink.shared.deletion.intent import DeletionReason, PendingDelete
from hudi_sink.shared.deletion.sender import IntentSender
from hudi_sink.shared.hudi.naming import parse_base_file_name

__all__ = ["Reconciler"]

log = logging.getLogger("hudi_sink.deleter.reconcile")

_SEND_ERRORS = (KafkaError, OSError, TimeoutError)


class Reconciler:
    def __init__(self, config: DeletionConfig, context: DeleterContext) -> None:
        self._config = config
        self._context = context
        self._first_seen: dict[str, float] = {}
        """Candidates whose mtime is a write's start → when a scan first listed them."""

    async def reconcile(self, sender: IntentSender | None, *, dry_run: bool = True) -> ReconcileResult:
        """Orphans older than ``orphan_min_age_s``; reported, or enqueued as ORPHAN intents
        (``sender`` required then)."""
        if not dry_run and sender is None:
            raise ServiceUnavailable("the deleter is not running (no producer)")
        cfg, ctx = self._config, self._context
        snapshot = await ctx.cache.refresh(ctx.table_path, max_age_s=0.0)
        now = ctx.clock()
        orphans = await asyncio.to_thread(
            scan_orphans, ctx.fs, snapshot, now=now, min_age_s=cfg.orphan_min_age_s,
            first_seen=self._first_seen,
        )
        if orphans:  # counted in GET /deletions/stats as reconcile_orphans (dry runs too)
            ctx.tally.add(Counted.ORPHAN_FOUND, len(orphans))
        enqueued = 0
        if orphans and sender is not None and not dry_run:
            intents = [self._orphan_intent(o.path, now + cfg.send_delay_s) for o in orphans]
            try:
                await sender.send_intents(intents)
            except _SEND_ERRORS as exc:
                raise ServiceUnavailable(f"orphan intents not acked: {exc}") from exc
            enqueued = len(intents)
            ctx.tally.add(Counted.ORPHAN_ENQUEUED, enqueued)
        log.info("reconcile (%s): %d orphan(s), %d enqueued", "dry run" if dry_run else "enqueue",
                 len(orphans), enqueued)
        return ReconcileResult(
            dry_run=dry_run,
            orphans=[OrphanView(path=o.path, size=o.size, age_s=round(o.age_s, 1)) for o in orphans],
            enqueued=enqueued,
        )

    def _orphan_intent(self, path: str, not_before: float) -> PendingDelete:
        table_path = self._context.table_path
        relative = relative_path(table_path, path)
        parsed = parse_base_file_name(posixpath.basename(path))
        return PendingDelete(
            table_path=table_path,
            file_path=path,
            file_id=parsed.file_id if parsed else None,
            file_instant=own_instant(relative) if relative else None,
            reason=DeletionReason.ORPHAN,
            killing_instant=None,
            check_in_use=True,
            not_before=not_before,
        )
