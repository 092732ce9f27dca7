"""``hudi-sink table show|history`` list every kind of instant, as Hudi's ``commits show``
would: ingestion commits (committed, inflight, archived), clustering (replacecommit), cleans
and archival runs, each with its kind (they listed ingestion commits only). The table is made
by the real maintenance actions on real files; the commands run in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_committer_fencing import DDL, FS, Env
from test_maintenance import T, _cluster, _commit_small_files

from hudi_sink.cli.table_cmd import table_history, table_summary
from hudi_sink.services.coordinator.maintenance.archival import Archiver
from hudi_sink.services.coordinator.maintenance.cleaning import Cleaner
from hudi_sink.services.coordinator.maintenance.view import load_view
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.hudi.table import HudiTable

ROOT = Path(__file__).resolve().parents[2]
HUDI_SINK = str(Path(sys.executable).with_name("hudi-sink"))


@pytest.fixture
def maintained(tmp_path: Path) -> tuple[Env, dict[str, str]]:
    """A table partitioned by country with six commits, a clustering of
    them, seven more, a clean, an archival, and an instant left in flight; and what was
    archived (instant → action)."""
    base = tmp_path / "orders"
    config = TableConfig(base_path=str(base), name="orders", partition_field="country", schema=DDL)
    HudiTable(FS, str(base)).initialize(config, config.table_schema())
    env = Env(base, config, config.table_schema())
    committer = env.committer("a")
    _commit_small_files(env, committer, T[:6])
    _cluster(env, committer, T[6])
    _commit_small_files(env, committer, T[7:14])
    timeline = ReplaceTimeline(env.table())
    cleaner = Cleaner(committer, timeline, commits_retained=2)
    record = cleaner.plan(load_view(timeline), T[15])
    assert record is not None
    cleaner.run(record)
    archiver = Archiver(committer, timeline, max_instants=10, min_instants=4, commits_retained=2)
    targets = archiver.plan(load_view(timeline))
    assert [i.time for i in targets][:6] == T[:6]
    archiver.run(T[20], targets)
    committer.start(T[21])
    return env, {i.time: i.action for i in targets}


def test_history_lists_clustering_cleans_and_archival_beside_commits(
        maintained: tuple[Env, dict[str, str]]) -> None:
    env, archived = maintained
    rows = table_history(str(env.base))
    kinds = [(r["commit_time"], r["kind"], r["state"]) for r in rows]
    ingestion = [*T[:6], *T[7:14]]
    expected = [(T[21], "commit", "inflight"), (T[20], "archive", "completed"),
                (T[15], "clean", "completed")]
    expected += [(t, "replacecommit" if t == T[6] else "commit",
                  "archived" if t in archived else "committed")
                 for t in sorted([*ingestion, T[6]], reverse=True)]
    assert kinds == expected
    by_time = {r["commit_time"]: r for r in rows}
    assert by_time[T[20]]["detail"] == (f"archived {len(archived)} instant(s) up to "
                                        f"{max(archived)}")
    assert by_time[T[15]]["detail"].endswith(f"retains instants from {T[12]}")
    assert by_time[T[6]]["detail"] == "clustered 6 file group(s) into 1 file(s)"
    assert by_time[T[0]]["records"] == 3 and by_time[T[0]]["offsets"]  # read from the archive
    assert len(table_history(str(env.base), limit=3)) == 3
    summary = table_summary(str(env.base), limit=2)
    active = [t for t in ingestion if t not in archived]
    assert (summary["commits"], summary["archived_commits"], summary["total_records"]) == (
        len(active), len(ingestion) - len(active), 3 * len(active))
    assert summary["latest_commit"] == T[13] and len(summary["recent"]) == 2


def test_the_commands_show_the_kind_column(maintained: tuple[Env, dict[str, str]]) -> None:
    env, archived = maintained
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    shown = subprocess.run([HUDI_SINK, "table", "show", "--path", str(env.base), "--limit", "30"],
                           env=environ, capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    active = 13 - sum(1 for action in archived.values() if action == "commit")
    assert f"{active} commits (and {13 - active} archived), {3 * active} records" in lines[2]
    header = lines[3].split()
    assert header[:3] == ["commit_time", "kind", "state"], lines[3]
    listed = [line.split()[:3] for line in lines[4:]]
    assert [T[20], "archive", "completed"] in listed and [T[15], "clean", "completed"] in listed
    assert [T[6], "replacecommit", "archived" if T[6] in archived else "committed"] in listed
    assert [T[0], "commit", "archived"] in listed
    history = subprocess.run([HUDI_SINK, "table", "history", "--path", str(env.base), "--json"],
                             env=environ, capture_output=True, text=True, timeout=120, check=False)
    assert history.returncode == 0, history.stderr
    assert {row["kind"] for row in json.loads(history.stdout)} == {
        "commit", "replacecommit", "clean", "archive"}
