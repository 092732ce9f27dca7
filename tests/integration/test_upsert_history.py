"""Upsert mode's history through the contract (issue 24, acceptance 5): after several commits
of keyed changes (``produce --key-space 200 --delete-ratio 0.1`` in four batches, each
committed before the next), hudi-rs's time travel to every commit on the timeline returns the
fold of the topic up to that commit's ``kafka.commit.offsets`` (values and each winner's
``_hoodie_commit_seqno``); an incremental read between two commits returns exactly the keys
whose winning version lies between their offsets (hudi-rs returns rows whose
``_hoodie_commit_time`` is in ``(start, end]``, so rows a later slice merely carried are not
returned); and once the cleaner (``commits_retained`` 2) has recorded a clean,
``hudi-sink table read --as-of`` before its earliest retained instant exits 2 naming
``--as-of`` while a retained instant reads the fold's rows.

No deleter runs here, so every slice stays on disk and commits older than the retention can
still be read directly with hudi-rs: that checks time travel over every slice of a group. The
retained window with a deleter is ``test_upsert_retention.py``'s."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest
from eventually import eventually
from keyed_history import clean_records, history_pipeline, produce_committed_batches
from keyed_oracle import pipeline_commits, read_topic
from pipeline import HUDI_SINK, Pipeline
from upsert_oracle import Spec, fold
from upsert_reads import assert_snapshot_equals, incremental_keys, read_incremental

from hudi_sink.cli.broker import EmbeddedBroker
from hudi_sink.shared.hudi.replace import CleanRecord, retention_floor

pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]  # long suite: scripts/long-tests.sh

KEYS = 200
BATCHES = 4
BATCH_RECORDS = 400


def _table_read(pipeline: Pipeline, as_of: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HUDI_SINK, "table", "read", "--path", pipeline.table_uri, "--as-of", as_of, "--json"],
        capture_output=True, text=True, timeout=120, env={**os.environ, **pipeline.env})


def test_as_of_every_commit_incremental_ranges_and_reads_older_than_retention(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = history_pipeline(tmp_path, unique_name, broker.bootstrap, commits_retained=2)
    try:
        pipeline.start_ready("coordinator", "participant")
        produce_committed_batches(pipeline, keys=KEYS, records=BATCH_RECORDS, batches=BATCHES)
        commits = pipeline_commits(pipeline)
        assert len(commits) >= BATCHES, commits
        instants = [instant for instant, _ in commits]

        # A clean is recorded: the retained history now starts after the first commit.
        def cleaned() -> CleanRecord | None:
            record = retention_floor(clean_records(pipeline))
            return record if record is not None and record.earliest_retained > instants[0] else None

        floor = eventually(cleaned, 120, "a clean record past the first commit", every_s=0.5)
        assert pipeline.completed_commits() == instants, "a commit landed after the last batch"
        # KEEP_LATEST_COMMITS never retains fewer than commits_retained commits.
        assert floor.earliest_retained in instants[:-1], (floor, instants)

        spec = Spec(key_fields=("id",), partitions=pipeline.partitions)
        records = read_topic(broker.bootstrap, pipeline.topic, commits[-1][1])
        folds = {instant: fold(records, spec, upto=offsets) for instant, offsets in commits}
        final = folds[instants[-1]]
        assert not final.rejected, final.rejected[:5]
        assert final.deletes, "no tombstone deleted a key: the run tests no delete"
        assert 0 < len(final.winners) < KEYS

        # Time travel to every commit equals the fold at its offsets (no deleter: all slices
        # are on disk, the retained ones by contract).
        for instant in instants:
            assert_snapshot_equals(pipeline.read(as_of=instant), folds[instant].winners,
                                   commits=commits, what=f"as of {instant}")
        assert_snapshot_equals(pipeline.read(), final.winners, commits=commits)

        # Incremental reads: (start, end] returns the keys whose winner (at end) lies between.
        pairs = [(a, b) for i, a in enumerate(instants) for b in instants[i + 1:]]
        for start, end in pairs:
            offsets = dict(commits)
            expected = incremental_keys(folds[end].winners, offsets[start], offsets[end])
            table = read_incremental(pipeline.table_uri, start, end)
            keys = (table.column("_hoodie_record_key").to_pylist()
                    if "_hoodie_record_key" in table.column_names else [])
            assert len(keys) == len(set(keys)), f"({start}, {end}]: a key twice"
            assert set(keys) == expected, (
                f"incremental ({start}, {end}]: extra {sorted(set(keys) - expected)[:10]}, "
                f"missing {sorted(expected - set(keys))[:10]}")
            assert_snapshot_equals(table, {k: folds[end].winners[k] for k in expected},
                                   commits=commits, what=f"incremental ({start}, {end}]")
        # Some range leaves out live rows its slices carried (every batch rewrites every group
        # it touches): those are the rows hudi-rs must filter by commit time.
        assert any(0 < len(incremental_keys(folds[b].winners, dict(commits)[a], dict(commits)[b]))
                   < len(folds[b].winners) for a, b in pairs)

        # The CLI: before the retained history exits 2 naming --as-of; a retained commit reads.
        floor = retention_floor(clean_records(pipeline))
        assert floor is not None
        too_old = [i for i in instants if i < floor.earliest_retained]
        retained = [i for i in instants if i >= floor.earliest_retained]
        assert too_old and retained, (instants, floor)
        for instant in {too_old[0], too_old[-1]}:
            result = _table_read(pipeline, instant)
            assert result.returncode == 2, (instant, result.returncode, result.stdout, result.stderr)
            assert "--as-of" in result.stderr, result.stderr
            assert "older than the retained history" in result.stderr, result.stderr
        for instant in {retained[0], retained[-1]}:
            result = _table_read(pipeline, instant)
            assert result.returncode == 0, (instant, result.stdout, result.stderr)
            assert orjson.loads(result.stdout)["rows"] == len(folds[instant].winners), result.stdout
        print(f"{len(instants)} commits, retained from {floor.earliest_retained}, "
              f"{len(pairs)} incremental ranges, {len(final.winners)} live keys, "
              f"{len(final.deletes)} deletes")
    finally:
        pipeline.stop_all()
