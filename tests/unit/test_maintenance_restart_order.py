"""A replacecommit never completes before an older ingestion instant — also when the commit
of that instant failed past its COMMIT decision and the service restarted its leadership
(``Leadership.restart`` → ``stand_by`` forgets the open instant, which completes only when
the next leadership rolls it forward). The waiting clustering must go by the table's
timeline, not by the driver's memory. Real files, the service's own driver, maintenance
routine and committer; rows read back with hudi-rs."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from recording_fs import RecordingFileSystem
from test_committer_fencing import DDL, Env
from test_maintenance import T, _commit_small_files, _read

from hudi_sink.services.coordinator import service as service_module
from hudi_sink.services.coordinator.commit_state import CommitState
from hudi_sink.services.coordinator.disposal import DirectDisposal
from hudi_sink.services.coordinator.instants import reserve_instant
from hudi_sink.services.coordinator.maintenance.plan import plan_clustering
from hudi_sink.services.coordinator.maintenance.view import load_view
from hudi_sink.services.coordinator.service import CoordinatorParts, CoordinatorService
from hudi_sink.shared.config.settings import load_config
from hudi_sink.shared.errors import FencedError
from hudi_sink.shared.hudi.layout import parse_timeline_file
from hudi_sink.shared.hudi.naming import instant_key
from hudi_sink.shared.runtime.states import CoordinatorPhase

WAIT_S = 30


def _service(base: Path, fs: RecordingFileSystem, monkeypatch: pytest.MonkeyPatch
             ) -> tuple[CoordinatorService, CoordinatorParts]:
    monkeypatch.setattr(service_module, "filesystem_for", lambda *_args: fs)
    config = load_config(None, environ={}, overrides={"table": {
        "base_path": str(base), "partition_field": "country", "schema": DDL}})
    service = CoordinatorService(config)
    service._table.initialize(config.table, config.table.table_schema())
    return service, service.assemble(DirectDisposal(fs))


def _lead(service: CoordinatorService, name: str) -> None:
    """What ``_become_leader`` does to the table (claim, recover, take over), without Kafka."""
    driver, committer = service.parts.driver, service.parts.committer
    driver.begin_recovery()
    epoch = committer.claim_epoch({"member_id": name})
    report = committer.recover()
    driver.take_over(epoch, report, {}, service._table.latest_instant_time())


def _completions(fs: RecordingFileSystem) -> list[tuple[str, str]]:
    """(time, action) of each completed instant file, in the order they were created."""
    out = []
    for op in fs.named("create_exclusive"):
        parsed = parse_timeline_file(Path(op[1]).name)
        if parsed is not None and parsed.state.name == "COMPLETED":
            out.append((parsed.time, parsed.action))
    return out


def test_replacecommit_waits_for_an_older_commit_across_restart_leadership(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "warehouse" / "orders"
    fs = RecordingFileSystem()
    service, parts = _service(base, fs, monkeypatch)
    env = Env(base, service.config.table, service.schema)
    table, committer, driver = service._table, parts.committer, parts.driver
    _lead(service, "a")
    ids = _commit_small_files(env, committer, T[:4])

    # An ingestion instant opens, then a clustering reserves a newer time (as run_once does).
    older = driver.starting = reserve_instant(driver)
    committer.start(older)
    driver.phase.open(CommitState(instant=older, epoch=committer.epoch, expected=frozenset(),
                                  start_offsets={}, started_at=time.monotonic()))  # STARTED
    driver.starting = None
    for phase in (CoordinatorPhase.ENDED, CoordinatorPhase.COMMITTING):
        driver.phase.advance(phase)
    staged = env.stage(older, "de", ["late-1", "late-2"])
    clustering = reserve_instant(driver)
    assert instant_key(older) < instant_key(clustering)

    routine = parts.maintenance
    clusterer = routine._clusterer
    timeline = routine._timeline
    groups = plan_clustering(load_view(timeline).live, min_files=3, small_file_bytes=1 << 20,
                             target_file_bytes=1 << 24)
    waiting, progressed = threading.Event(), threading.Event()
    restarted = False
    timeline_reads = 0
    real_wait, real_pending = clusterer.before_decision, table.pending_instants
    assert real_wait is not None

    def wait(instant: str) -> None:
        waiting.set()
        real_wait(instant)

    def pending() -> list[str]:
        nonlocal timeline_reads
        if restarted and threading.current_thread() is worker:
            timeline_reads += 1
            if timeline_reads >= 2:  # the clustering saw the timeline after the restart
                progressed.set()
        return real_pending()

    clusterer.before_decision = wait
    monkeypatch.setattr(table, "pending_instants", pending)
    errors: list[BaseException] = []

    def cluster() -> None:
        try:
            clusterer.run(clustering, groups, service.schema.avro_schema_json(), committer.epoch)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)
        finally:
            progressed.set()

    worker = threading.Thread(target=cluster)
    worker.start()
    assert waiting.wait(WAIT_S)

    real_complete = table.complete_instant

    def complete_fails_once(instant: str, metadata: dict[str, object]) -> None:
        monkeypatch.setattr(table, "complete_instant", real_complete)
        raise OSError("disk error writing the commit file")

    monkeypatch.setattr(table, "complete_instant", complete_fails_once)
    with pytest.raises(OSError):  # past its COMMIT decision: the instant is decided
        committer.commit(older, env.metadata([staged], 9), [staged.move])
    assert committer.state.committed(older) and older in table.pending_instants()
    restarted = True
    parts.leadership.restart("error: disk error writing the commit file")
    assert driver.current is None and not driver.is_leader
    assert progressed.wait(WAIT_S)  # old code: the clustering went on and completed

    _lead(service, "a")  # the next leadership rolls the decided commit forward
    worker.join(WAIT_S)
    assert not worker.is_alive()
    order = _completions(fs)
    assert (older, "commit") in order
    if (clustering, "replacecommit") in order:
        assert order.index((older, "commit")) < order.index((clustering, "replacecommit")), (
            f"replacecommit {clustering} completed before the older commit {older}: {order}")
    else:  # refused (the pass's epoch ended) and rolled back by the next pass
        assert [type(e) for e in errors] == [FencedError]
        assert clusterer.recover() in ([], [clustering])
    assert _read(base) == sorted([*ids, "late-1", "late-2"])
