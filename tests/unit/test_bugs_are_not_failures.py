"""A broken invariant of our own (``HudiSinkBug``) is not a runtime failure: it sits outside
the ``HudiSinkError`` tree, so every handler of runtime failures lets it through without a
re-raising guard — the routine ends and the process stops — while the runtime failures it
handles are still handled (logged, carried, retried). One case per handler that used to need
``except HudiSinkBug: raise``; real tables on local disk, stand-ins only for the failing call."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_committer_fencing import Env
from test_maintenance import env as env  # the fixture

from hudi_sink.services.coordinator.commit_state import CommitState
from hudi_sink.services.coordinator.committer import RecoveryReport
from hudi_sink.services.coordinator.disposal import DirectDisposal
from hudi_sink.services.coordinator.leadership import Leadership
from hudi_sink.services.coordinator.service import CoordinatorParts, CoordinatorService
from hudi_sink.services.deleter.context import DeleterContext, Tally
from hudi_sink.services.deleter.schedule import Schedule, ScheduledWork
from hudi_sink.services.deleter.settle import Effect, Settler
from hudi_sink.services.deleter.table_state import TableStateCache
from hudi_sink.shared.config.settings import load_config
from hudi_sink.shared.deletion.intent import DeletionReason, intent_for_staged_file
from hudi_sink.shared.errors import HudiSinkBug, HudiSinkError, IllegalTransition
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.runtime.states import CoordinatorPhase
from hudi_sink.shared.storage.fs import LocalFileSystem

FS = LocalFileSystem()
T = "20250101000000001"


def test_a_bug_is_outside_the_runtime_failure_tree() -> None:
    for bug in (HudiSinkBug, IllegalTransition):
        assert not issubclass(bug, HudiSinkError)
    with pytest.raises(IllegalTransition):
        try:
            raise IllegalTransition("x → y")
        except HudiSinkError:  # a handler of runtime failures
            pytest.fail("a runtime-failure handler caught a bug")


# --- the deleter ---------------------------------------------------------------------------


def _context(base: Path) -> DeleterContext:
    metrics = Metrics("deleter")
    return DeleterContext(fs=FS, table_path=str(base), cache=TableStateCache(FS, 600),
                          clock=lambda: 0.0, metrics=metrics, tally=Tally(metrics))


def _failing_cache(context: DeleterContext, error: Exception, monkeypatch: pytest.MonkeyPatch) -> None:
    async def get(*_args: object, **_kwargs: object) -> object:
        raise error

    monkeypatch.setattr(context.cache, "get", get)


@pytest.mark.parametrize("error", [IllegalTransition("bug"), OSError("storage down")])
async def test_settling_an_intent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  error: Exception) -> None:
    base = tmp_path / "t"
    context = _context(base)
    _failing_cache(context, error, monkeypatch)
    intent = intent_for_staged_file(str(base), f"{base}/.hoodie/.temp/{T}/de/a.parquet", T,
                                    DeletionReason.ABORTED_INSTANT, 0.0)
    settler = Settler(context, orphan_min_age_s=0)
    if isinstance(error, HudiSinkBug):
        with pytest.raises(IllegalTransition):
            await settler.settle(intent)
    else:  # a runtime failure is the verdict's error: the intent is retried
        verdict = await settler.settle(intent)
        assert verdict.error is error
    if isinstance(error, HudiSinkBug):
        with pytest.raises(IllegalTransition):
            await settler.prune_staging(intent.file_path, Effect.DELETED)
    else:  # best effort: the sweep removes the directory later
        await settler.prune_staging(intent.file_path, Effect.DELETED)


@pytest.mark.parametrize("error", [IllegalTransition("bug"), OSError("storage down")])
async def test_a_scheduled_pass(tmp_path: Path, error: Exception) -> None:
    async def sweep() -> None:
        raise error

    async def reconcile() -> None:
        return None

    work = ScheduledWork(Schedule(sweep_interval_s=0.01, sweep_min_age_s=0, reconcile_interval_s=0),
                         _context(tmp_path / "t"), is_scheduler=lambda: True, sweep=sweep,
                         reconcile=reconcile)
    if isinstance(error, HudiSinkBug):
        with pytest.raises(IllegalTransition):
            await work.tick()
    else:  # logged, counted as failed, retried at the next tick
        await work.tick()
        assert work.sweeps == 0


# --- the coordinator -----------------------------------------------------------------------


@pytest.mark.parametrize("error", [IllegalTransition("bug"), OSError("disk full")])
def test_a_sink_log_trim(env: Env, monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    committer = env.committer("a", keep_entries=1, trim_above=1)
    committer.claim_epoch({"id": "a"})  # two entries: past trim_above

    def fails() -> object:
        raise error

    monkeypatch.setattr(committer, "refresh", fails)
    if isinstance(error, HudiSinkBug):
        with pytest.raises(IllegalTransition):
            committer._maybe_trim()
    else:  # the decision it follows is durable: logged, tried again after the next one
        committer._maybe_trim()


class _Election:
    """Leader of generation 1 (election itself is tested with the broker)."""

    is_leader = True
    generation = 1

    def __init__(self) -> None:
        self.changed = asyncio.Event()


def _parts(tmp_path: Path) -> tuple[CoordinatorService, CoordinatorParts]:
    config = load_config(None, environ={}, overrides={
        "kafka": {"topics": ["d"]},
        "table": {"base_path": str(tmp_path / "table"), "schema": "id STRING"}})
    service = CoordinatorService(config)
    service._table.initialize(config.table, service.schema)
    return service, service.assemble(DirectDisposal(FS))


async def test_the_leadership_loop_ends_on_a_bug_and_restarts_on_a_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _service, parts = _parts(tmp_path)
    leadership: Leadership = parts.leadership
    steps: list[str] = []

    async def step() -> None:
        steps.append(parts.driver.phase.state.name)
        if len(steps) == 1:
            raise OSError("disk full")  # runtime failure: leadership restarts (new epoch)
        raise IllegalTransition("IDLE → COMMITTING")  # a bug: the routine ends

    monkeypatch.setattr(parts.driver, "step", step)
    monkeypatch.setattr("hudi_sink.services.coordinator.leadership.RETRY_AFTER_FAILURE_S", 0.0)
    with pytest.raises(IllegalTransition):
        await asyncio.wait_for(leadership.run(_Election()), 30)  # type: ignore[arg-type]
    assert steps == ["IDLE", "IDLE"]
    assert parts.committer.epoch == 2, "the failure restarted leadership: a second epoch"


@pytest.mark.parametrize("error", [IllegalTransition("bug"), OSError("disk full")])
async def test_the_rollback_on_shutdown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        error: Exception) -> None:
    service, parts = _parts(tmp_path)
    driver, committer = parts.driver, parts.committer
    driver.begin_recovery()
    driver.take_over(committer.claim_epoch({"id": "a"}), RecoveryReport(), {}, None)
    committer.start(T)
    driver.phase.open(CommitState(instant=T, epoch=committer.epoch, expected=frozenset(),
                                  start_offsets={}, started_at=0.0))

    def abort(*_args: object) -> None:
        raise error

    monkeypatch.setattr(committer, "abort", abort)
    if isinstance(error, HudiSinkBug):
        with pytest.raises(IllegalTransition):
            await service.close(None)
    else:  # left to the next leader, which rolls it back
        await service.close(None)
        assert driver.phase.state is CoordinatorPhase.STOPPED
        assert T in service._table.pending_instants()
