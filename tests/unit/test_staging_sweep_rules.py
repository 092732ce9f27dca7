"""The deleter's scheduled work as logic: which staging is finished, when a staging tree may go,
what one sweep pass hands to the decision rules, how the schedule derives from the config, and
when the reconcile is due (persisted across restarts). Real files; the decision step and the
passes are stand-ins here (the service tests run the real ones)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from eventually import eventually_async
from manual_clock import ManualClock
from table_files import FS, abort, complete, write_file

from hudi_sink.services.deleter.context import DeleterContext, Tally
from hudi_sink.services.deleter.schedule import Schedule, ScheduledWork
from hudi_sink.services.deleter.staging import (
    StagingSweeper,
    finished_reason,
    finished_staging,
    remove_if_empty,
    staging_dir_of,
)
from hudi_sink.services.deleter.table_state import TableSnapshot, TableStateCache
from hudi_sink.shared.config.settings import DeletionConfig
from hudi_sink.shared.deletion.intent import DeletionReason, PendingDelete
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.runtime.metrics import Metrics

C, R, P, MID, UNKNOWN = (f"2025010100000000{i}" for i in (1, 2, 3, 4, 5))


def context(base: Path, clock: Callable[[], float]) -> DeleterContext:
    """The deleter's parts on the table at ``base``, with ``clock`` for time."""
    metrics = Metrics("deleter")
    return DeleterContext(fs=FS, table_path=str(base), cache=TableStateCache(FS, 600), clock=clock,
                          metrics=metrics, tally=Tally(metrics))


def snapshot(base: str) -> TableSnapshot:
    """C completed, R rolled back, P pending, MID decided ABORT with its rollback unfinished."""
    return TableSnapshot(table_path=base, completed=frozenset({C}), pending=frozenset({P, MID}),
                         rolled_back=frozenset({R, MID}), listed_files=frozenset(),
                         latest_instant=UNKNOWN, loaded_at=0.0)


def test_finished_means_completed_or_rolled_back_for_good() -> None:
    snap = snapshot("/t")
    assert finished_reason(snap, C) is DeletionReason.UNCOMMITTED_FILE
    assert finished_reason(snap, R) is DeletionReason.ABORTED_INSTANT
    for instant in (P, MID, UNKNOWN):
        assert finished_reason(snap, instant) is None


@pytest.mark.parametrize("path,expected", [
    (f"/t/.hoodie/.temp/{R}/de/x.parquet", (R, f"/t/.hoodie/.temp/{R}")),
    (f"/t/.hoodie/.temp/{R}", (R, f"/t/.hoodie/.temp/{R}")),
    ("/t/.hoodie/.temp/notaninstant/x.parquet", None),
    (f"/t/de/x_0-0-1_{R}.parquet", None),
    (f"/other/.hoodie/.temp/{R}/x.parquet", None),
    (f"/t/.hoodie/.temp/{R}/../../../etc/passwd", None),
])
def test_staging_dir_of(path: str, expected: tuple[str, str] | None) -> None:
    assert staging_dir_of("/t", path) == expected


def test_finished_staging_lists_only_finished_instants(tmp_path: Path) -> None:
    base = tmp_path / "t"
    temp = base / ".hoodie/.temp"
    write_file(temp / C / "de/a.parquet")
    write_file(temp / R / ".spark-1/_temporary/part-0.parquet")
    (temp / R / "empty").mkdir(parents=True)
    write_file(temp / P / "de/b.parquet")
    write_file(temp / MID / "de/c.parquet")
    write_file(temp / UNKNOWN / "de/d.parquet")
    (temp / "not-an-instant").mkdir()
    found = {t.instant: t for t in finished_staging(FS, snapshot(str(base)))}
    assert set(found) == {C, R}
    assert found[C].reason is DeletionReason.UNCOMMITTED_FILE
    assert [f.name for f in found[R].files] == ["part-0.parquet"]


def test_remove_if_empty_keeps_files_and_recent_directories(tmp_path: Path) -> None:
    root = tmp_path / "staging"
    held = write_file(root / "de/a.parquet")
    assert not remove_if_empty(FS, str(root)), "a tree holding a file was removed"
    os.unlink(held)
    now = time.time()
    assert not remove_if_empty(FS, str(root), quiet_before=now - 60), "a just-touched tree went"
    assert remove_if_empty(FS, str(root), quiet_before=now + 1)
    assert not root.exists()
    assert not remove_if_empty(FS, str(root)), "a missing tree is nothing to remove"


async def test_a_sweep_pass_hands_old_files_of_finished_instants_to_the_rules(tmp_path: Path) -> None:
    base = tmp_path / "t"
    table = HudiTable(FS, str(base))
    complete(table, C, "aaaa-1")
    table.start_instant(R)
    abort(table, R)
    table.start_instant(P)
    temp = base / ".hoodie/.temp"
    old_c = write_file(temp / C / "de/a.parquet", age_s=120)
    old_r = write_file(temp / R / "de/b.parquet", age_s=120)
    young_r = write_file(temp / R / "de/c.parquet")
    pending = write_file(temp / P / "de/d.parquet", age_s=120)
    seen: list[PendingDelete] = []

    async def settle(intent: PendingDelete) -> bool:
        seen.append(intent)
        os.unlink(intent.file_path)
        return True

    later = [0.0]
    start, live = time.time(), [False]

    def clock() -> float:
        """Frozen at ``start`` plus ``later`` for the boundary (59 s vs 60 s after the first
        sighting, whatever the machine's load); live plus ``later`` for the last pass, whose
        own deletions age the directories it then judges."""
        return (time.time() if live[0] else start) + later[0]

    sweeper = StagingSweeper(context(base, clock), settle, min_age_s=60)
    first = await sweeper.sweep()
    assert seen == [] and first.young == 3, "a file must have been seen min_age_s before"
    later[0] = 59.0
    assert (await sweeper.sweep()).young == 3 and seen == []
    later[0], live[0] = 60.0, True
    rewritten = time.time() + 60  # c.parquet is written again "now": too young, seen or not
    os.utime(young_r, (rewritten, rewritten))
    result = await sweeper.sweep()

    assert {(i.file_path, i.reason, i.killing_instant) for i in seen} == {
        (old_c, DeletionReason.UNCOMMITTED_FILE, C), (old_r, DeletionReason.ABORTED_INSTANT, R)}
    assert (sorted(result.instants), result.settled, result.young, result.kept) == ([C, R], 2, 1, 0)
    assert os.path.exists(young_r) and os.path.exists(pending)
    # C's tree is empty now and (by this clock) has been quiet long enough; R's is not empty.
    assert not (temp / C).exists() and (temp / R).is_dir() and result.dirs_removed == 1


def test_schedule_derives_from_the_deletion_settings() -> None:
    default = Schedule.from_config(DeletionConfig())
    assert (default.sweep_interval_s, default.sweep_min_age_s, default.reconcile_interval_s) == (
        300.0, 60.0, 3600.0)
    fast = Schedule.from_config(DeletionConfig(reconsume_later_s=0, send_delay_s=1, reconcile_interval_s=0))
    assert (fast.sweep_interval_s, fast.sweep_min_age_s, fast.reconcile_interval_s) == (1.0, 1.0, 0.0)
    assert Schedule.from_config(DeletionConfig(reconsume_later_s=30)).sweep_interval_s == 30.0


class Work:
    """Stand-ins for the passes, with a switchable failure."""

    def __init__(self) -> None:
        self.sweeps = self.reconciles = 0
        self.fail_sweep = False

    async def sweep(self) -> None:
        if self.fail_sweep:
            raise OSError("storage unreachable")
        self.sweeps += 1

    async def reconcile(self) -> None:
        self.reconciles += 1


def scheduled(base: Path, work: Work, clock: ManualClock, *, reconcile_s: float = 100.0,
              active: bool = True, role_checks: list[bool] | None = None) -> ScheduledWork:
    """Scheduled work on ``work``'s passes; each look at the role is appended to ``role_checks``."""
    checks = role_checks if role_checks is not None else []

    def is_scheduler() -> bool:
        checks.append(active)
        return active

    return ScheduledWork(
        Schedule(sweep_interval_s=0.01, sweep_min_age_s=0, reconcile_interval_s=reconcile_s),
        context(base, clock), is_scheduler=is_scheduler, sweep=work.sweep,
        reconcile=work.reconcile,
    )


async def test_reconcile_runs_when_due_and_its_last_run_survives_a_restart(tmp_path: Path) -> None:
    base = tmp_path / "t"
    work, clock = Work(), ManualClock(1000.0)
    first = scheduled(base, work, clock)
    await first.tick()
    assert (work.sweeps, work.reconciles) == (1, 1), "never run before: due at once"
    assert (base / layout.DELETER_SCHEDULE_FILE).exists()
    clock.now = 1099.0
    await first.tick()
    assert (work.sweeps, work.reconciles) == (2, 1)

    restarted = scheduled(base, work, clock)  # another pod, or this one after a restart
    await restarted.tick()
    assert work.reconciles == 1, "a restart must not reset the schedule"
    clock.now = 1100.0
    await restarted.tick()
    assert work.reconciles == 2 and restarted.reconciles == 1


async def test_a_failing_sweep_does_not_stop_the_schedule_and_zero_disables_reconcile(
    tmp_path: Path
) -> None:
    work, clock = Work(), ManualClock()
    work.fail_sweep = True
    never = scheduled(tmp_path / "t", work, clock, reconcile_s=0)
    await never.tick()
    assert (work.sweeps, work.reconciles, never.sweeps) == (0, 0, 0)
    work.fail_sweep = False
    await never.tick()
    assert (work.sweeps, work.reconciles, never.sweeps) == (1, 0, 1)


async def test_only_the_scheduler_works(tmp_path: Path) -> None:
    work, clock, role_checks = Work(), ManualClock(), []
    stop = asyncio.Event()
    bystander = scheduled(tmp_path / "t", work, clock, active=False, role_checks=role_checks)
    runner = asyncio.create_task(bystander.run(stop))
    await eventually_async(lambda: len(role_checks) >= 3, 5, "three role checks (each 10 ms)")
    stop.set()
    await asyncio.wait_for(runner, 5)
    assert (work.sweeps, work.reconciles, bystander.active) == (0, 0, False)
