"""Review finding 2: a maintenance pass is tied to the epoch it started under — a decision of a
pass that outlived its leadership (even when the same process leads again) is refused, and so
is a decision for an instant a newer leader rolled back."""

from __future__ import annotations

import pytest
from test_committer_fencing import Env
from test_maintenance import RecordingDisposal, T, _commit_small_files, _read
from test_maintenance import env as env  # the fixture

from hudi_sink.services.coordinator.maintenance import clustering as clustering_module
from hudi_sink.services.coordinator.maintenance.archival import Archiver
from hudi_sink.services.coordinator.maintenance.clustering import Clusterer
from hudi_sink.services.coordinator.maintenance.plan import BaseFile, plan_clustering
from hudi_sink.services.coordinator.maintenance.view import load_view
from hudi_sink.shared.errors import FencedError
from hudi_sink.shared.hudi.replace import ReplaceTimeline


def _groups(timeline: ReplaceTimeline) -> list[list[BaseFile]]:
    return plan_clustering(load_view(timeline).live, min_files=3, small_file_bytes=1 << 20,
                           target_file_bytes=1 << 24)


def test_pass_of_an_ended_epoch_cannot_decide(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    old = env.committer("p", disposal=RecordingDisposal())
    ids = _commit_small_files(env, old, T[:4])
    timeline = ReplaceTimeline(env.table())
    real = clustering_module.rewrite_group

    def slow_rewrite(*args: object, **kwargs: object) -> object:
        out = real(*args, **kwargs)  # type: ignore[arg-type]
        newer = env.committer("n", disposal=RecordingDisposal())
        Clusterer(newer, ReplaceTimeline(env.table()), "snappy").recover()  # rolls T[4] back
        old.claim_epoch({"id": "p-again"})  # the old process leads again, same committer
        return out

    monkeypatch.setattr(clustering_module, "rewrite_group", slow_rewrite)
    with pytest.raises(FencedError):
        Clusterer(old, timeline, "snappy").run(T[4], _groups(timeline), env.schema.avro_schema_json())
    monkeypatch.undo()
    assert not old.refresh().committed(T[4])
    assert _read(env.base) == ids
    later = _commit_small_files(env, old, T[5:12])
    archiver = Archiver(old, timeline, max_instants=6, min_instants=3, commits_retained=2)
    archiver.run(T[30], archiver.plan(load_view(timeline)))
    assert _read(env.base) == sorted(ids + later)  # no clustered copy of the rows


def test_decision_for_a_rolled_back_instant_is_fenced(env: Env) -> None:
    committer = env.committer("a")
    _commit_small_files(env, committer, T[:4])
    timeline = ReplaceTimeline(env.table())
    clusterer = Clusterer(committer, timeline, "snappy")
    timeline.start(T[4])
    clusterer.roll_back(T[4], "test")
    with pytest.raises(FencedError):
        committer.decide(T[4], "replacecommit", {"partitionToWriteStats": {}}, [], lambda: None)
    epoch = committer.epoch
    committer.claim_epoch({"id": "again"})
    with pytest.raises(FencedError):
        committer.decide(T[5], "clean", {"partitionToWriteStats": {}}, [], lambda: None, epoch=epoch)
