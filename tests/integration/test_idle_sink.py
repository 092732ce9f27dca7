"""An idle sink adds nothing to the table (the default configuration).

An instant in which no offset moved is withdrawn, not committed: no commit, no pending
instant and no sink log entry is left behind, however many intervals pass. Records produced
after idling are committed exactly once; an instant that only dead-letters records moves its
offsets and commits them (a commit without files). Through the contract: the embedded broker,
coordinator and participant processes with Spark, the table read by hudi-rs and Apache Hudi's
Java reader, REST and metrics; idle time is counted in transactions the coordinator ended
(``hudi_sink_instants_skipped_total``), never slept.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pipeline import HTTP, Pipeline, Service, metric_total
from test_bad_records import _produce

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(600)

SKIPPED = "hudi_sink_instants_skipped_total"
IDLE_INSTANTS = 6


def _timeline_files(pipeline: Pipeline) -> list[str]:
    return sorted(p.name for p in pipeline.timeline.iterdir() if p.is_file())


def _sink_log(pipeline: Pipeline) -> list[str]:
    return sorted(p.name for p in (pipeline.timeline / ".sink" / "log").iterdir())


def _settled(pipeline: Pipeline, coordinator: Service) -> list[dict[str, object]]:
    """``GET /transactions`` without the open instant."""
    return [h for h in pipeline.transactions(coordinator) if h["state"] != "inflight"]


def _idle_for(pipeline: Pipeline, coordinator: Service, instants: int) -> None:
    """Let ``instants`` instants pass with nothing to store, checking at each step that the
    table shows no trace of them: the completed commits, the sink log and ``GET
    /transactions`` stay as they were, and at most one instant (the open one) is pending."""
    commits, log_entries = pipeline.completed_commits(), _sink_log(pipeline)
    history = _settled(pipeline, coordinator)
    start = metric_total(coordinator, SKIPPED)
    for step in range(1, instants + 1):
        pipeline.wait_transactions(coordinator, 1, timeout_s=60)
        assert metric_total(coordinator, SKIPPED) >= start + step, "an idle instant was not withdrawn"
        names = _timeline_files(pipeline)
        pending = ({name.split(".", 1)[0] for name in names if name.endswith((".inflight", ".requested"))}
                   - {name.split(".", 1)[0] for name in names if name.endswith(".commit")})
        assert len(pending) <= 1, f"withdrawn instants left on the timeline: {sorted(pending)}"
        assert pipeline.completed_commits() == commits, "an idle instant was committed"
    assert _sink_log(pipeline) == log_entries, "idle instants wrote sink log entries"
    assert _settled(pipeline, coordinator) == history, "idle instants listed in /transactions"
    assert not [n for n in _timeline_files(pipeline) if "rollback" in n]


def test_an_idle_sink_commits_nothing_and_what_arrives_later_commits_once(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str,
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "transaction": {"interval_ms": 300, "write_status_timeout_ms": 60000,
                        "flush_records": 2000, "resend_interval_ms": 1000}})
    pipeline.produce(0)  # the topic, empty
    with pipeline:
        coordinator, _participant = pipeline.start_ready("coordinator", "participant")

        # A fresh table, idle: no commit at all.
        _idle_for(pipeline, coordinator, IDLE_INSTANTS)
        assert pipeline.completed_commits() == []

        # Records after idling: committed once, then idle again.
        pipeline.produce(400)
        pipeline.wait_offsets(100, timeout_s=120)
        after_records = pipeline.completed_commits()
        _idle_for(pipeline, coordinator, IDLE_INSTANTS)

        # Only dead letters: the offsets move, so they commit (a commit without a file).
        bad = [b"{not json"] * (2 * pipeline.partitions)
        asyncio.run(_produce(broker.bootstrap, pipeline.topic, bad, pipeline.partitions))
        pipeline.wait_offsets(102, timeout_s=120)
        dead_letter_commits = [i for i in pipeline.completed_commits() if i not in after_records]
        _idle_for(pipeline, coordinator, IDLE_INSTANTS)

        [table] = pipeline.read_agreed()
        ids = table.column("id").to_pylist()
        assert len(ids) == 400 and len(set(ids)) == 400, "a record lost or committed twice"
        assert pipeline.committed_records() == 400
        assert dead_letter_commits
        files = sum(len(stats) for i in dead_letter_commits
                    for stats in pipeline.commit_metadata(i)["partitionToWriteStats"].values())
        dlq = sum(int(pipeline.commit_metadata(i)["extraMetadata"]["hudi.sink.records.dlq"])
                  for i in dead_letter_commits)
        assert (files, dlq) == (0, len(bad))
        assert pipeline.offsets_of(dead_letter_commits[-1]) == dict.fromkeys(range(pipeline.partitions), 102)
        states = {h["commit_time"]: h["state"] for h in _settled(pipeline, coordinator)}
        assert set(states) == set(pipeline.completed_commits())  # committed ones only, none aborted
        assert set(states.values()) == {"committed"}
        assert metric_total(coordinator, "hudi_sink_aborts_total") == 0
        current = HTTP.get(f"{coordinator.url}/transactions/current", timeout=5).json()
        assert current["role"] == "leader"
