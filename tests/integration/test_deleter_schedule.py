"""The deleter's scheduled work, in-process against the session broker and a real table:
the staging sweep (files nobody announced, empty staging trees), the scheduled reconcile, and
the rule that only the member holding deletion partition 0 does either.

The schedule is derived from the config as in production: sweep every ``reconsume_later_s``
(1 s here), files at least ``send_delay_s`` old.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from deleter_harness import (
    HOUR,
    T1,
    T2,
    T3,
    T4,
    RecordingFileSystem,
    Table,
    deleter,
    sink_config,
)
from eventually import eventually_async

from hudi_sink.cli.broker import EmbeddedBroker
from hudi_sink.services.deleter.service import DeleterService
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.naming import base_file_name

pytestmark = pytest.mark.timeout(120)


async def test_sweep_deletes_unannounced_staged_files_of_finished_instants_only(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    base = tmp_path / "t"
    storage = RecordingFileSystem()
    config = sink_config(broker, unique_name, base, send_delay_s=2)
    async with deleter(broker, unique_name, base, fs=storage, config=config, schedule=None) as (h, table):
        staging = table.hudi.staging_dir
        # T1 rolled back (its intents, if any, long handled) ...
        table.hudi.start_instant(T1)
        table.abort(T1)
        # T2 completed; a staged file its commit did not list stayed behind.
        live = table.commit(T2)
        leftover = table.staged(T2, "dddd-1", age_s=HOUR)
        # T3 rolled back, leaving only an empty tree.
        table.hudi.start_instant(T3)
        os.makedirs(os.path.join(staging(T3), "de"))
        table.abort(T3)
        # T4 pending: an old staged file and an empty directory, both in use.
        table.hudi.start_instant(T4)
        pending = table.staged(T4, age_s=HOUR)
        pending_dir = os.path.join(staging(T4), "fr")
        os.makedirs(pending_dir)
        # ... and then a flush of the partitions' new owner lands in T1's staging.
        late = table.staged(T1, "eeee-1")
        late_written = os.path.getmtime(late)

        async def swept() -> bool:
            return not any(os.path.exists(p) for p in (late, leftover, staging(T1), staging(T2),
                                                       staging(T3)))

        await eventually_async(swept, 30, "the sweep to clear the staging of T1, T2 and T3")
        stats = await h.stats()
        assert stats["scheduler"] is True
        assert stats["swept"] == 2 and stats["staging_dirs_removed"] == 3
        assert stats["deleted"] == 0, "no intent was sent: only the sweep may have deleted"
        assert storage.deleted_at[late] - late_written >= config.deletion.send_delay_s

        await h.wait_stat("sweeps", stats["sweeps"] + 2)  # two more whole passes
        assert os.path.exists(pending) and os.path.isdir(pending_dir), "pending staging touched"
        assert os.path.exists(live)
        assert set(storage.deleted_at) == {late, leftover}


async def test_scheduled_reconcile_deletes_an_old_orphan_and_keeps_a_young_one(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    base = tmp_path / "t"
    config = sink_config(broker, unique_name, base, reconcile_interval_s=1)
    async with deleter(broker, unique_name, base, config=config, schedule=None) as (h, table):
        referenced = table.commit(T1, age_s=2 * HOUR)
        table.hudi.start_instant(T2)
        table.abort(T2)
        orphan = Table.write(f"{h.base}/de/{base_file_name('dddd-1', '0-0-1', T2)}", 2 * HOUR)
        young = Table.write(f"{h.base}/de/{base_file_name('eeee-1', '0-0-1', T2)}")

        async def orphan_gone() -> bool:
            return not os.path.exists(orphan)

        await eventually_async(orphan_gone, 30, "the scheduled reconcile to delete the old orphan")
        stats = await h.stats()
        assert stats["deleted"] == 1 and stats["reconcile_orphans"] >= 1
        await h.wait_stat("reconciles", stats["reconciles"] + 2)  # two more scans
        assert os.path.exists(young) and os.path.exists(referenced)
        assert os.path.exists(os.path.join(h.base, layout.DELETER_SCHEDULE_FILE))
        assert (await h.stats())["deleted"] == 1


async def test_only_the_member_holding_deletion_partition_0_does_scheduled_work(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    base = tmp_path / "t"
    config = sink_config(broker, unique_name, base)
    Table(config)
    members = [DeleterService(config), DeleterService(config)]
    tasks = [asyncio.create_task(m.run()) for m in members]
    try:
        async def one_scheduler() -> bool:
            for task in tasks:
                if task.done():
                    task.result()
            assigned = [bool(m.assignment()) for m in members]
            return all(assigned) and sum(m.scheduled.active for m in members) == 1

        await eventually_async(one_scheduler, 60, "both members assigned, exactly one scheduler")
        leader = next(m for m in members if m.scheduled.active)
        other = next(m for m in members if m is not leader)
        sweeps_before = other.scheduled.sweeps
        await eventually_async(_passes(leader, leader.scheduled.sweeps + 2), 30,
                               "two sweeps by the scheduler")
        assert other.scheduled.sweeps == sweeps_before, "the other member swept too"

        leader.shutdown()  # the role moves with the partition
        await asyncio.wait_for(tasks[members.index(leader)], 20)
        await eventually_async(_passes(other, sweeps_before + 1), 60, "the remaining member to take over")
        assert other.scheduled.active
    finally:
        for member in members:
            member.shutdown()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)


def _passes(member: DeleterService, count: int) -> Callable[[], Awaitable[bool]]:
    async def reached() -> bool:
        return member.scheduled.sweeps >= count

    return reached
