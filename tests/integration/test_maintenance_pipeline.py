"""Table maintenance through the contract: a trickle of small commits is clustered, cleaned
and archived while ingestion goes on (coordinator, participant, deleter; issue 15).

``test_maintenance_acceptance`` is the issue's acceptance run (200 records/s for 150 s, then
30 s quiet; ~4 min): marked ``chaos`` so it runs in its own command
(``scripts/maintenance-acceptance.sh``). ``test_maintenance_small`` runs the same checks at a
smaller size in the normal suite.
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
from eventually import eventually
from pipeline import HTTP, Pipeline, metric_total

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(900)

MAINTENANCE: dict[str, dict[str, int]] = {
    # Clustering is opt-in (off by default): this run asks for it.
    "clustering": {"enabled": True, "min_files": 10, "small_file_bytes": 1048576,
                   "target_file_bytes": 16777216, "interval_s": 5},
    "cleaner": {"commits_retained": 5},
}


def _active_completed(pipeline: Pipeline) -> list[str]:
    return sorted(p.name for p in pipeline.timeline.iterdir()
                  if p.is_file() and (p.name.endswith(".commit") or p.name.endswith(".replacecommit")))


def _sink_log_entries(pipeline: Pipeline) -> int:
    return sum(1 for p in (pipeline.timeline / ".sink" / "log").iterdir() if p.name.endswith(".json"))


def _replacecommits(pipeline: Pipeline) -> int:
    archived = pipeline.timeline / ".sink" / "archived"
    names = [p.name for p in pipeline.timeline.iterdir()]
    names += [p.name for p in archived.iterdir()] if archived.exists() else []
    return sum(1 for n in names if n.endswith(".replacecommit"))


def _finished_staging(pipeline: Pipeline) -> list[str]:
    """Staging directories of instants that are over (completed or no longer on the timeline)."""
    temp = pipeline.timeline / ".temp"
    pending = {p.name.split(".", 1)[0] for p in pipeline.timeline.iterdir()
               if p.name.endswith((".inflight", ".requested"))}
    return sorted(d.name for d in temp.iterdir() if d.name not in pending) if temp.exists() else []


def _run(broker: EmbeddedBroker, tmp_path: Path, name: str, *, rate: int, seconds: int,
         quiet_s: int, max_files: int, max_active: int = 30,
         archival: dict[str, int] | None = None, min_files: int = 10) -> dict[str, object]:
    records = rate * seconds
    pipeline = Pipeline(tmp_path, name, broker.bootstrap, overrides={
        # Empty commits on: the quiet period's commits move the cleaner's retention on, so the
        # last clustering's replaced files fall out of it (withdrawn idle instants would leave
        # them for the table's next commits, as Hudi's KEEP_LATEST_COMMITS does).
        "transaction": {"interval_ms": 1000, "write_status_timeout_ms": 60000,
                        "flush_records": 100000, "resend_interval_ms": 1000,
                        "allow_empty_commit": True},
        "deletion": {"send_delay_s": 1, "reconsume_later_s": 2, "orphan_min_age_s": 3600},
        # Packing off: clustering never takes a group its owner may still pack into, and
        # this run is about clustering, cleaning and archival of many small files.
        "table": {"small_file_bytes": 0},
        "maintenance": {**MAINTENANCE, **({"archival": archival} if archival else {}),
                        "clustering": {**MAINTENANCE["clustering"], "min_files": min_files}},
    })
    pipeline.produce(0)
    with pipeline:
        coordinator, _participant, deleter = pipeline.start_ready(
            "coordinator", "participant", "deleter")
        peak_active, peak_log = 0, 0
        producer = pipeline.produce_in_background(records, rate=rate)
        started = time.monotonic()
        while producer.poll() is None and time.monotonic() - started < seconds + 120:
            peak_active = max(peak_active, len(_active_completed(pipeline)))
            peak_log = max(peak_log, _sink_log_entries(pipeline))
            time.sleep(0.5)
        assert producer.wait(timeout=60) == 0
        pipeline.wait_offsets(records // pipeline.partitions, timeout_s=120)
        time.sleep(quiet_s)

        # Clustered, cleaned and archived: Hudi's Java reader returns the same rows as hudi-rs.
        ids = pipeline.read_agreed()[0].column("id").to_pylist()
        assert len(ids) == records, f"{len(ids)} rows for {records} records"
        assert len(set(ids)) == records, "a record is in the table twice"
        files = pipeline.partition_files()
        active = _active_completed(pipeline)
        log_entries = _sink_log_entries(pipeline)
        view = HTTP.get(f"{coordinator.url}/maintenance", timeout=5).json()
        summary = {
            "records": records, "parquet_files": len(files), "active_completed": len(active),
            "peak_active": peak_active, "sink_log": log_entries, "peak_sink_log": peak_log,
            "replacecommits": _replacecommits(pipeline),
            "archived_instants": len(list((pipeline.timeline / ".sink" / "archived").glob("*.*commit"))),
            "commits_total": metric_total(coordinator, "hudi_sink_commits_total"),
            "deleted": metric_total(deleter, "hudi_sink_deletions_total"),
            "maintenance": view,
        }
        print(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
        assert summary["replacecommits"], "no clustering happened"
        assert len(files) <= max_files, summary
        assert len(active) <= max_active and peak_active <= max_active + 1, summary
        assert summary["archived_instants"] > 0, summary
        assert log_entries <= 80 and peak_log <= 80, summary
        assert view["last_error"] is None, summary
        # Replaced files are deleted by the deleter, after the clean: none older than the
        # retention remains once the pipeline is quiet.
        eventually(lambda: HTTP.get(f"{coordinator.url}/maintenance", timeout=5).json()
                   ["replaced_files_on_disk"] == 0, 60, "replaced files cleaned and deleted")
        assert sorted(pipeline.read_agreed()[0].column("id").to_pylist()) == sorted(ids)
        eventually(lambda: not _finished_staging(pipeline), 30, "staging of finished instants removed")
        return summary


@pytest.mark.long  # the main suite covers maintenance with hudi-rs in tests/unit/test_maintenance*
def test_maintenance_small(broker: EmbeddedBroker, tmp_path: Path, unique_name: str) -> None:
    _run(broker, tmp_path, unique_name, rate=200, seconds=40, quiet_s=20, max_files=150,
         max_active=12, archival={"max_instants": 12, "min_instants": 8}, min_files=4)


@pytest.mark.chaos
def test_maintenance_acceptance(broker: EmbeddedBroker, tmp_path: Path, unique_name: str) -> None:
    _run(broker, tmp_path, unique_name, rate=200, seconds=150, quiet_s=30, max_files=300)
