"""Instants in which no offset moved: not committed, and withdrawn without a trace.

Such an instant has nothing to store: no row, no dead letter, no offset. Committing it anyway
(an *empty commit*, Hudi's ``hoodie.allow.empty.commit``) leaves a newest commit without a
file, and readers that take the table's schema from the newest commit's first file then read
nothing at all (daft 0.7.26 returns no rows); an idle sink would also add an instant to the
timeline every interval. So unless ``transaction.allow_empty_commit`` asks for empty commits,
such an instant ends one of two ways (``IdleInstants.withdraw``):

- *withdrawn* — every partition answered and its staging holds no file: its
  ``.commit.requested`` and ``.inflight`` are deleted and its empty staging directory
  pruned. No sink log entry is written: there is no decision to fence (nothing can ever commit
  it: completing needs the ``.inflight`` file) and no file for the deleter to settle. Nothing
  is left for a reader, the deleter or the next leader; counted in
  ``hudi_sink_instants_skipped_total``, and left out of ``GET /transactions`` (an idle sink
  would push every real transaction out of it).
- *rolled back* — some partition was carried (no answer by the deadline, or a flush that gave
  up) or a staged file no status lists is in its staging: an abort through the sink log, as
  before, so the stall shows (``GET /transactions``, ``hudi_sink_aborts_total``) and the
  deleter may delete the file.

Why the instant is started on the timeline at all before anything is known to move: its
``.inflight`` is what keeps its staged files safe while participants write them (the
deleter never touches files of a pending instant) and what a new leader's recovery rolls
back; see docs/design.md §2.2. Exactly once is untouched: offsets only ever come from a
commit, and the next instant starts from the same committed offsets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from hudi_sink.services.coordinator.commit_metadata import PlannedCommit
from hudi_sink.services.coordinator.phase import PhaseMachine
from hudi_sink.shared.config.settings import TransactionConfig
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.kafka.partition_key import PartitionKey, keys_text
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.runtime.states import CoordinatorPhase

__all__ = ["IdleInstants", "withdraw_instant"]

log = logging.getLogger("hudi_sink.coordinator")


def withdraw_instant(table: HudiTable, instant: str) -> bool:
    """Delete ``instant``'s pending timeline files and its staging directory if that holds no
    file; False (nothing done) when it does. Blocking: call from a worker thread.

    The staging directory goes first and the timeline files last, so a crash part-way leaves
    the instant pending, and the next leader rolls it back like any other."""
    staging = table.staging_dir(instant)
    if any(True for _ in table.fs.walk_files(staging)):
        return False
    table.fs.delete_tree(staging)
    table.rollback_instant(instant, delete_staging=False)
    return True


class IdleInstants:
    """The driver's rule for instants in which no offset moved, and the withdrawal: it closes
    the driver's open instant (``phase``) when it withdrew it."""

    def __init__(self, table: HudiTable, metrics: Metrics, config: TransactionConfig,
                 phase: PhaseMachine) -> None:
        self._table = table
        self._metrics = metrics
        self._phase = phase
        self._allow_empty_commit = config.allow_empty_commit
        self._run = 0
        """Instants withdrawn in a row (the first of a run is logged at INFO, the rest DEBUG)."""

    def nothing_moved(self, planned: PlannedCommit, committed: Mapping[PartitionKey, int]) -> bool:
        """Whether ``planned`` is not to be committed: nothing moved since ``committed``
        (a dead letter or a skipped tombstone moves its offset, so it is committed) and
        empty commits are not asked for."""
        if self._allow_empty_commit or not planned.is_empty(committed):
            self._run = 0
            return False
        return True

    async def withdraw(self, instant: str, carried: list[PartitionKey]) -> str | None:
        """Withdraw the open ``instant`` (see the module docstring) and close it (IDLE): None.
        Else, nothing done: why it must be rolled back instead (an abort the caller makes)."""
        if carried:
            return f"partitions carried: {keys_text(carried)}"
        if not await asyncio.to_thread(withdraw_instant, self._table, instant):
            return "its staging holds files no status lists"
        self._phase.close(CoordinatorPhase.IDLE, f"withdrew {instant}: no offset moved")
        self._metrics.instant_skipped()
        self._run += 1
        level = logging.INFO if self._run == 1 else logging.DEBUG
        log.log(level, "no offset moved in %s: withdrawn, nothing committed%s", instant,
                " (further idle instants are logged at DEBUG)" if self._run == 1 else "")
        return None
