"""Review finding 1: a new leader recovers when a replacecommit whose COMMIT decision is still
in the sink log was archived meanwhile (roll-forward of a done maintenance action is a no-op)."""

from __future__ import annotations

from test_committer_fencing import Env
from test_maintenance import T, _cluster, _commit_small_files, _read
from test_maintenance import env as env  # the fixture

from hudi_sink.services.coordinator.maintenance.archival import Archiver
from hudi_sink.services.coordinator.maintenance.cleaning import Cleaner
from hudi_sink.services.coordinator.maintenance.clustering import Clusterer
from hudi_sink.services.coordinator.maintenance.view import load_view
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.replace import ReplaceTimeline


def test_recover_after_the_replacecommit_was_archived(env: Env) -> None:
    committer = env.committer("a")
    ids = _commit_small_files(env, committer, T[:4])
    _cluster(env, committer, T[4])
    ids = sorted(ids + _commit_small_files(env, committer, T[5:14]))
    timeline = ReplaceTimeline(env.table())
    for f in load_view(timeline).replaced_files:  # the deleter, after the clean
        (env.base / f.path).unlink()
    archiver = Archiver(committer, timeline, max_instants=10, min_instants=4, commits_retained=2)
    targets = archiver.plan(load_view(timeline))
    assert T[4] in [t.time for t in targets]
    archiver.run(T[20], targets)
    assert timeline.is_archived(T[4]) and not timeline.is_inflight(T[4])
    assert committer.refresh().committed(T[4])  # its decision is still in the log

    successor = env.committer("b")
    successor_timeline = ReplaceTimeline(env.table())
    Clusterer(successor, successor_timeline, "snappy")
    Cleaner(successor, successor_timeline, commits_retained=2)
    Archiver(successor, successor_timeline, max_instants=10, min_instants=4, commits_retained=2)
    successor.recover()  # raised "replace instant ... is not inflight"
    successor.recover()  # and again: idempotent
    assert not successor_timeline.path_exists_completed(T[4])
    assert not (env.base / ".hoodie" / f"{T[4]}.{layout.REPLACE_ACTION}").exists()
    assert _read(env.base) == ids
