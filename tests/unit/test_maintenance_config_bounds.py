"""Review finding 7: maintenance settings that cannot work are refused at start, and archival
never archives the newest completed commit (its offsets are where ingestion resumes)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from test_committer_fencing import Env
from test_maintenance import T, _commit_small_files
from test_maintenance import env as env  # the fixture

from hudi_sink.services.coordinator.maintenance.archival import Archiver
from hudi_sink.services.coordinator.maintenance.view import load_view
from hudi_sink.shared.config.maintenance import MaintenanceConfig
from hudi_sink.shared.hudi.replace import ReplaceTimeline, replace_metadata


@pytest.mark.parametrize("settings", [
    {"archival": {"min_instants": 1, "max_instants": 30}},
    {"archival": {"min_instants": 30, "max_instants": 30}},
    {"archival": {"min_instants": 40, "max_instants": 30}},
    {"clustering": {"small_file_bytes": 200, "target_file_bytes": 100}},
    {"clustering": {"enabled": True}, "cleaner": {"enabled": False}},
])
def test_impossible_maintenance_settings_are_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        MaintenanceConfig.model_validate(settings)


@pytest.mark.parametrize("settings", [
    {},
    {"archival": {"min_instants": 2, "max_instants": 3}},
    {"clustering": {"enabled": False}, "cleaner": {"enabled": False}},
    {"cleaner": {"enabled": False}},  # clustering is off unless asked for
    {"clustering": {"small_file_bytes": 100, "target_file_bytes": 100}},
])
def test_sound_maintenance_settings_are_accepted(settings: dict[str, Any]) -> None:
    MaintenanceConfig.model_validate(settings)


def test_clustering_is_opt_in_and_the_cleaner_and_archival_are_not() -> None:
    """A ``replacecommit`` is lost on readers that follow only ``.commit`` instants (they read
    replaced files and their rewrite both), so clustering runs only when asked for."""
    defaults = MaintenanceConfig()
    assert not defaults.clustering.enabled
    assert defaults.cleaner.enabled and defaults.archival.enabled
    assert MaintenanceConfig.model_validate({"clustering": {"enabled": True}}).clustering.enabled


def test_archival_keeps_the_newest_completed_commit(env: Env) -> None:
    committer = env.committer("a")
    _commit_small_files(env, committer, T[:3])
    timeline = ReplaceTimeline(env.table())
    for instant in T[3:13]:  # only replacecommits since (e.g. a quiet period)
        timeline.start(instant)
        timeline.complete(instant, replace_metadata([], {}, {"schema": env.schema.avro_schema_json()}))
    archiver = Archiver(committer, timeline, max_instants=10, min_instants=4, commits_retained=None)
    targets = archiver.plan(load_view(timeline))
    assert [t.time for t in targets] == T[:2]
    archiver.run(T[20], targets)
    metadata = env.table().latest_commit_metadata()
    assert metadata is not None and env.table().completed_commits() == [T[2]]
