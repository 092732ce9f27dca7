"""Review finding 6: in a period where no instant completes and every one is an ABORT (a stall:
nothing moves while a partition is carried, ``services.coordinator.idle``; an idle sink's
instants are withdrawn without a sink log entry) a clean or archive decision above the latest
completed instant must not pin the sink log's trim floor once its effect is done."""

from __future__ import annotations

from test_committer_fencing import Env
from test_maintenance import RecordingDisposal, T, _commit_small_files, _ready_to_clean
from test_maintenance import env as env  # the fixture

from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.maintenance.archival import Archiver
from hudi_sink.services.coordinator.maintenance.view import load_view
from hudi_sink.shared.hudi.replace import ReplaceTimeline


def _quiet_period(committer: TableCommitter, instants: list[str]) -> None:
    for instant in instants:  # instants rolled back: nothing moved, a partition carried
        committer.start(instant)
        committer.abort(instant, "no offset moved: partitions carried: d:1")


def test_recorded_clean_does_not_pin_the_trim_floor(env: Env) -> None:
    committer = env.committer("a", disposal=RecordingDisposal(), keep_entries=3, trim_above=6)
    timeline, cleaner = _ready_to_clean(env, committer)
    record = cleaner.plan(load_view(timeline), T[8])
    assert record is not None
    cleaner.run(record)
    clean_seq = committer.refresh().decisions[T[8]].seq
    _quiet_period(committer, T[9:40])
    state = committer.refresh()
    assert state.floor > clean_seq
    assert state.last_seq - state.floor + 1 <= 6


def test_archive_decision_does_not_pin_the_trim_floor(env: Env) -> None:
    committer = env.committer("a", keep_entries=3, trim_above=6)
    _commit_small_files(env, committer, T[:14])
    timeline = ReplaceTimeline(env.table())
    archiver = Archiver(committer, timeline, max_instants=10, min_instants=4, commits_retained=2)
    archiver.run(T[20], archiver.plan(load_view(timeline)))
    archive_seq = committer.refresh().decisions[T[20]].seq
    _quiet_period(committer, T[21:50])
    state = committer.refresh()
    assert state.floor > archive_seq
    assert state.last_seq - state.floor + 1 <= 6
