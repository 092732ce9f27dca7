"""The leadership loop: what an elected coordinator does around its transactions.

``run`` is one short script, one pass at a time:
  not leader (or fenced in this group generation) → stand by, keep the sink log folded and
  the stall metric fed | just elected → claim an epoch, recover the table, take over |
  leading → apply the control messages that arrived, then one protocol step
  (``TransactionDriver.step``).
Failures are sorted here, once: fenced → stand by until the group hands out a new assignment;
Kafka trouble → keep leading and retry (every message heals by re-sending); any other
runtime failure → restart leadership (the recovery path is the one way out of a half-done
state); a config error or a :class:`~shared.errors.HudiSinkBug` → the routine ends and the
service exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from aiokafka.errors import KafkaError

from hudi_sink.services.coordinator.election import LeaderElection
from hudi_sink.services.coordinator.transaction import DriverContext, TransactionDriver
from hudi_sink.shared.errors import ConfigError, FencedError, HudiSinkError, TableFormatError
from hudi_sink.shared.hudi.offsets import offsets_from_metadata
from hudi_sink.shared.kafka.channel import ControlEndpoint
from hudi_sink.shared.kafka.partition_key import PartitionKey
from hudi_sink.shared.kafka.protocol import Envelope, Role
from hudi_sink.shared.runtime.states import CoordinatorPhase

__all__ = ["Leadership"]

log = logging.getLogger("hudi_sink.coordinator")

STEP_S = 0.05
RETRY_AFTER_FAILURE_S = 1.0
STANDBY_TABLE_CHECK_S = 15.0
"""How often a standby reads the table's latest commit time (for the stall metric)."""


class Leadership:
    """Wins, keeps and loses leadership for one coordinator process; the transactions
    themselves are the driver's."""

    def __init__(self, context: DriverContext, driver: TransactionDriver, *,
                 member: dict[str, Any]) -> None:
        """``context`` is the driver's own: leadership and transactions work with the same
        config, table, committer, metrics and clock. ``member`` is what the sink log records
        about this leader (id, host, admin URL)."""
        self._ctx = context
        self._driver = driver
        self._member = member
        self._inbox: asyncio.Queue[Envelope] = asyncio.Queue()
        self._table_checked_at: float | None = None
        self._fenced_at_generation: int | None = None
        self._led_generation: int | None = None

    async def receive(self, channel: ControlEndpoint) -> None:
        """The control routine: participants' messages into the inbox, applied between steps."""
        while True:
            for envelope in await channel.receive(timeout_ms=200):
                # A standby drops messages (its inbox would grow for as long as it waits);
                # participants re-announce, so a new leader learns what it needs.
                if envelope.sender.role is Role.PARTICIPANT and self._driver.is_leader:
                    self._inbox.put_nowait(envelope)

    async def run(self, election: LeaderElection) -> None:
        """The leadership loop (module docstring)."""
        driver = self._driver
        while True:
            fenced_here = self._fenced_at_generation == election.generation
            if not election.is_leader or fenced_here:
                if driver.is_leader:
                    self._step_down("lost group leadership")
                election.changed.clear()
                with contextlib.suppress(TimeoutError):  # not wait_for: see wait_for_kafka
                    async with asyncio.timeout(1):
                        await election.changed.wait()
                await asyncio.to_thread(self._ctx.committer.refresh)
                await self._observe_table_commit(every_s=STANDBY_TABLE_CHECK_S)
                continue
            try:
                if driver.is_leader and self._led_generation != election.generation:
                    await self._revalidate(election)
                if driver.phase.state is CoordinatorPhase.STANDBY:
                    await self._become_leader(election)
                while not self._inbox.empty():
                    for payload, instant in driver.receive(self._inbox.get_nowait()):
                        await driver.send(payload, instant)
                await driver.step()
            except FencedError as exc:
                log.error("fenced: %s", exc)
                # A newer epoch owns the table: our group view is stale. Wait for a new
                # assignment before claiming again, or two leaders would fence each other.
                self._fenced_at_generation = election.generation
                self._step_down("fenced by a newer epoch")
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)
                continue
            except ConfigError:
                # A config no leader can work with: exit 2 naming the key, never retried.
                raise
            except KafkaError as exc:
                # Kafka trouble (admin metadata, a send): nothing in the table changed, and
                # every message heals by re-sending, so keep leading and try again.
                log.warning("Kafka error in transaction step, retrying: %r", exc)
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)
            except (HudiSinkError, OSError, ValueError) as exc:
                log.exception("transaction step failed: %s", exc)
                self.restart(f"error: {exc}")
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)
            if self._inbox.empty():
                await asyncio.sleep(STEP_S)

    def restart(self, reason: str) -> None:
        """After a failed step, start over as a fresh leader: the recovery path (new epoch,
        roll decided commits forward, roll the rest back) is the one way out of any
        half-done state, so there is no second, special-case repair path."""
        log.error("restarting leadership after failure: %s", reason)
        if self._driver.phase.state is not CoordinatorPhase.STANDBY:
            self._step_down(reason)

    def _step_down(self, reason: str) -> None:
        log.warning("stepping down: %s", reason)
        self._driver.stand_by(reason)
        self._ctx.metrics.leadership(False, self._ctx.committer.epoch)

    async def _revalidate(self, election: LeaderElection) -> None:
        """A new group assignment while we lead (e.g. we were frozen, then rejoined and won
        again): if another epoch was claimed meanwhile, our state is stale — start over."""
        self._led_generation = election.generation
        state = await asyncio.to_thread(self._ctx.committer.refresh)
        if state.epoch != self._ctx.committer.epoch:
            self._step_down(f"epoch {state.epoch} was claimed while we led with "
                            f"{self._ctx.committer.epoch}")

    async def _become_leader(self, election: LeaderElection) -> None:
        self._led_generation = election.generation
        self._driver.begin_recovery()
        epoch = await asyncio.to_thread(self._ctx.committer.claim_epoch, dict(self._member))
        report = await asyncio.to_thread(self._ctx.committer.recover)
        metadata = await asyncio.to_thread(self._ctx.table.latest_commit_metadata)
        committed: dict[PartitionKey, int] = {}
        if metadata is not None:
            try:
                committed = offsets_from_metadata(
                    metadata.get("extraMetadata") or {}, list(self._ctx.config.kafka.topics))
            except TableFormatError as exc:  # the topic set cannot be matched to the table
                raise ConfigError(str(exc), key="kafka.topics") from exc
        self._driver.schemas.adopt(metadata.get("extraMetadata") if metadata is not None else None)
        latest = await asyncio.to_thread(self._ctx.table.latest_instant_time)
        await self._observe_table_commit(every_s=0)
        self._ctx.metrics.leadership(True, epoch)
        self._driver.take_over(epoch, report, committed, latest)

    async def _observe_table_commit(self, every_s: float) -> None:
        """Feed ``seconds_since_last_commit`` from the table's newest commit file, so the
        stall alarm tells the truth after a restart or a failover (not time since start)."""
        now = self._ctx.clock()
        if self._table_checked_at is not None and now - self._table_checked_at < every_s:
            return
        self._table_checked_at = now
        committed_at = await asyncio.to_thread(self._latest_commit_unix)
        if committed_at is not None:
            self._ctx.metrics.table_committed_at(committed_at)

    def _latest_commit_unix(self) -> float | None:
        completed = self._ctx.table.completed_commits()
        if not completed:
            return None
        info = self._ctx.table.fs.file_info(self._ctx.table.commit_path(completed[-1]))
        return info.mtime if info is not None else None
