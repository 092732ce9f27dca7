"""An upsert table with a history to check: a sink whose cleaner runs every second with a
small ``commits_retained``, fed keyed batches that each commit before the next (so every
batch writes new slices of the file groups it touches), and the clean records the cleaner
leaves in ``.hoodie/.sink/clean/`` (where a test sees which retention it applied).
Used by the acceptance tests of time travel and retention in upsert mode."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
from eventually import eventually
from pipeline import Pipeline

from hudi_sink.shared.hudi.replace import CleanRecord

__all__ = ["clean_records", "history_pipeline", "produce_committed_batches"]


def history_pipeline(tmp_path: Path, name: str, bootstrap: str, commits_retained: int) -> Pipeline:
    """An upsert sink (record key ``id``) committing every 1.5 s, with a maintenance pass
    (cleaning) every second — ``maintenance.clustering.interval_s`` paces the pass, clustering
    itself stays off as upsert mode requires — keeping ``commits_retained`` commits."""
    pipeline = Pipeline(tmp_path, name, bootstrap, overrides={
        "table": {"write_mode": "upsert", "record_key_field": "id"},
        "transaction": {"interval_ms": 1500, "write_status_timeout_ms": 120000,
                        "resend_interval_ms": 1000},
        "maintenance": {"clustering": {"interval_s": 1},
                        "cleaner": {"commits_retained": commits_retained}},
    })
    pipeline.produce(0)
    return pipeline


def produce_committed_batches(pipeline: Pipeline, *, keys: int, records: int, batches: int,
                              after_each: Callable[[int], None] = lambda _batch: None) -> None:
    """``produce --key-space keys --delete-ratio 0.1 --records records``, ``batches`` times,
    each waited for until a commit's offsets cover it (so each lands in commits of its own);
    ``after_each(batch)`` runs once a batch is committed."""
    for batch in range(1, batches + 1):
        pipeline.produce_keyed(["--key-space", str(keys), "--delete-ratio", "0.1",
                                "--records", str(records)])
        want = batch * records
        eventually(lambda want=want: sum(pipeline.latest_offsets().values()) == want, 240,
                   f"offsets covering {want} records", every_s=0.5)
        after_each(batch)


def clean_records(pipeline: Pipeline) -> list[CleanRecord]:
    """The clean records on disk now (the cleaner drops one once its files are all gone,
    except the one with the greatest earliest retained instant)."""
    directory = pipeline.timeline / ".sink" / "clean"
    if not directory.exists():
        return []
    records = []
    for path in directory.glob("*.json"):
        try:
            records.append(CleanRecord.from_json(orjson.loads(path.read_bytes())))
        except FileNotFoundError:  # dropped between the listing and the read
            continue
    return records
