"""Upsert mode's retention with the deleter running (issue 24, acceptance 7): more than
``commits_retained`` (2) commits of updates to a small key space, so every commit writes a new
slice of the file groups it touches. Once the pipeline is quiet the table's files are exactly
what Hudi's KEEP_LATEST_COMMITS keeps, computed here from the commits' write stats alone —
with E the earliest retained commit (the oldest of the newest two), a slice is gone iff a
later slice of its group lies strictly before E; every slice at or after E, the latest slice
before E and the latest slice of every group are on disk — and the latest slice of a group is
never missing at any point of the run. The snapshot and time travel to every retained commit
still equal the fold of the topic, and the deleter's reconcile finds no orphan."""

from __future__ import annotations

from pathlib import Path

import pytest
from eventually import eventually
from keyed_history import clean_records, history_pipeline, produce_committed_batches
from keyed_oracle import pipeline_commits, read_topic
from pipeline import HTTP, Pipeline
from upsert_oracle import Spec, fold
from upsert_reads import assert_snapshot_equals

from hudi_sink.cli.broker import EmbeddedBroker
from hudi_sink.shared.hudi.naming import instant_key
from hudi_sink.shared.hudi.replace import CleanRecord, retention_floor

pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]  # long suite: scripts/long-tests.sh

KEYS = 48
BATCHES = 7
BATCH_RECORDS = 120
RETAINED = 2


def _slices(pipeline: Pipeline) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(partition, fileId) → its slices (instant, relative path), oldest first, from the
    write stats of the completed commits."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for instant in pipeline.completed_commits():
        for partition, stats in pipeline.commit_metadata(instant)["partitionToWriteStats"].items():
            for stat in stats:
                groups.setdefault((partition, stat["fileId"]), []).append((instant, stat["path"]))
    for slices in groups.values():
        slices.sort(key=lambda s: instant_key(s[0]))
    return groups


def _kept_and_gone(groups: dict[tuple[str, str], list[tuple[str, str]]], earliest: str
                   ) -> tuple[set[str], set[str]]:
    """KEEP_LATEST_COMMITS per group: a slice goes iff a later slice lies strictly before E."""
    kept: set[str] = set()
    gone: set[str] = set()
    limit = instant_key(earliest)
    for slices in groups.values():
        for i, (instant, path) in enumerate(slices):
            later_before_e = any(instant_key(instant) < instant_key(other) < limit
                                 for other, _ in slices[i + 1:])
            (gone if later_before_e else kept).add(path)
    return kept, gone


def test_deleter_removes_superseded_slices_outside_retention_and_never_a_latest_one(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = history_pipeline(tmp_path, unique_name, broker.bootstrap, RETAINED)
    try:
        coordinator, _participant, deleter = pipeline.start_ready(
            "coordinator", "participant", "deleter")
        seen: dict[str, CleanRecord] = {}  # clean records as they appear (dropped later once
        # their files are all gone, except the newest)

        def check(batch: int) -> None:
            # Never a latest slice gone (listed first: a later commit only adds files).
            missing = pipeline.live_files() - pipeline.partition_files()
            assert not missing, f"after batch {batch}: latest slices deleted: {sorted(missing)}"
            seen.update((r.instant, r) for r in clean_records(pipeline))

        produce_committed_batches(pipeline, keys=KEYS, records=BATCH_RECORDS, batches=BATCHES,
                                  after_each=check)
        commits = pipeline_commits(pipeline)
        instants = [instant for instant, _ in commits]
        assert len(instants) > 3 * RETAINED, instants
        earliest = instants[-RETAINED]
        groups = _slices(pipeline)
        kept, gone = _kept_and_gone(groups, earliest)
        assert gone, "no slice is outside retention: the run tests nothing"
        assert any(len(s) > RETAINED + 1 for s in groups.values()), "no group was rewritten often"

        # The cleaner reaches the final retention: a clean under E, its files deleted.
        newly = gone - _kept_and_gone(groups, instants[-RETAINED - 1])[1]
        assert newly, "the last commit made no slice cleanable: the run tests too little"

        def final_clean_deleted() -> CleanRecord | None:
            seen.update((r.instant, r) for r in clean_records(pipeline))
            floor = retention_floor(list(seen.values()))
            if floor is None:
                return None
            assert instant_key(floor.earliest_retained) <= instant_key(earliest), (
                f"clean {floor.instant} retains from {floor.earliest_retained}, after E={earliest}")
            if floor.earliest_retained != earliest:
                return None
            on_disk = pipeline.partition_files()
            return floor if on_disk.isdisjoint(floor.files) and on_disk.isdisjoint(gone) else None

        try:
            eventually(final_clean_deleted, 90, f"a clean under E={earliest}, its files deleted",
                       every_s=0.5)
        except AssertionError as exc:
            on_disk = pipeline.partition_files()
            view = HTTP.get(f"{coordinator.url}/maintenance", timeout=5).json()
            raise AssertionError(
                f"{exc}\nE={earliest}; still on disk (outside retention): {sorted(gone & on_disk)}; "
                f"cleans: {[(c.instant, c.earliest_retained) for c in seen.values()]}; "
                f"maintenance: {view}\n{pipeline.logs()}") from None
        assert pipeline.completed_commits() == instants, "a commit landed after the last batch"
        on_disk = pipeline.partition_files()
        # Exactly the retained slices: none deleted too early, no orphan, no stray file.
        assert not kept - on_disk, f"retained slices deleted (E={earliest}): {sorted(kept - on_disk)}"
        assert on_disk == kept, sorted(on_disk ^ kept)
        assert pipeline.live_files() <= on_disk
        # Every clean seen handed over only slices outside its own retention.
        for record in seen.values():
            early = set(record.files) - _kept_and_gone(groups, record.earliest_retained)[1]
            assert not early, (f"clean {record.instant} (E={record.earliest_retained}) handed "
                               f"retained slices to deletion: {sorted(early)}")

        records = read_topic(broker.bootstrap, pipeline.topic, commits[-1][1])
        spec = Spec(key_fields=("id",), partitions=pipeline.partitions)
        final = fold(records, spec, upto=commits[-1][1])
        assert not final.rejected, final.rejected[:5]
        assert_snapshot_equals(pipeline.read(), final.winners, commits=commits)
        for instant, offsets in commits:  # every retained commit still reads whole
            if instant_key(instant) >= instant_key(earliest):
                assert_snapshot_equals(pipeline.read(as_of=instant),
                                       fold(records, spec, upto=offsets).winners,
                                       commits=commits, what=f"as of {instant}")

        stats = HTTP.get(f"{deleter.url}/deletions/stats", timeout=10).json()
        assert stats["deleted"] >= len(gone), stats
        report = HTTP.post(f"{deleter.url}/deletions/reconcile", params={"dry_run": "true"},
                            timeout=60).json()
        assert report["orphans"] == [], report
        print(f"{len(instants)} commits, E={earliest}, {len(groups)} groups, "
              f"{sum(map(len, groups.values()))} slices: {len(gone)} deleted, {len(kept)} kept")
    finally:
        pipeline.stop_all()
