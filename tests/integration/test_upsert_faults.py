"""Upsert mode under faults, through the contract: keyed records and tombstones produced while
a participant is SIGKILLed mid-instant (its merge lost), the coordinator is SIGKILLed, a
participant is SIGSTOPped into a zombie while another takes its partitions, and a participant
joins mid-stream (scale-out). The snapshot still equals the fold of the topic up to the last
commit's offsets (hudi-rs, and Apache Hudi's reader), no key twice, every seqno the winner's;
the scale-out aborts nothing. Long suite (about 3 minutes): scripts/long-tests.sh."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from eventually import eventually
from keyed_oracle import fold_topic, pipeline_commits
from pipeline import Pipeline
from upsert_reads import assert_snapshot_equals

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = [pytest.mark.long, pytest.mark.timeout(900)]

KEYS = 400


def _keyed_args(records: int) -> list[str]:
    return ["--key-space", str(KEYS), "--delete-ratio", "0.1", "--records", str(records)]


def test_upsert_snapshot_equals_the_fold_across_kills_a_zombie_and_a_scale_out(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "table": {"write_mode": "upsert", "record_key_field": "id"},
        "transaction": {"interval_ms": 2000, "write_status_timeout_ms": 30000,
                        "resend_interval_ms": 1000},
        "kafka": {"session_timeout_ms": 6000},
    })
    pipeline.produce(0)
    try:
        coordinator, first = pipeline.start_ready("coordinator", "participant")
        produced = 0

        def produce(records: int) -> None:
            nonlocal produced
            pipeline.produce_keyed(_keyed_args(records), rate=400)
            produced += records

        def committed(total: int) -> None:
            eventually(lambda: sum(pipeline.latest_offsets().values()) == total, 300,
                       f"offsets covering {total} records", every_s=1)

        produce(1_200)
        committed(produced)
        # A participant dies mid-instant (records in its fold, a merge maybe running).
        background = pipeline.produce_keyed_in_background(_keyed_args(1_200), rate=300)
        pipeline.wait_transactions(coordinator, 1)
        pipeline.kill(first, signal.SIGKILL)
        second = pipeline.start("participant")
        pipeline.wait_ready(second, timeout_s=240)
        assert background.wait(timeout=300) == 0
        produced += 1_200
        committed(produced)
        # The coordinator dies; a new one takes over.
        pipeline.kill(coordinator, signal.SIGKILL)
        coordinator = pipeline.start("coordinator")
        pipeline.wait_ready(coordinator, timeout_s=240)
        produce(800)
        committed(produced)
        # Scale-out mid-stream: a second participant joins, partitions move; nothing aborts.
        aborted_before = len(pipeline.aborted_transactions(coordinator))
        background = pipeline.produce_keyed_in_background(_keyed_args(1_200), rate=300)
        third = pipeline.start("participant")
        pipeline.wait_ready(third, timeout_s=240)
        assert background.wait(timeout=300) == 0
        produced += 1_200
        committed(produced)
        assert len(pipeline.aborted_transactions(coordinator)) == aborted_before
        # A zombie: SIGSTOP one participant; the other takes its partitions; then it wakes.
        pipeline.kill(second, signal.SIGSTOP)
        produce(800)
        committed(produced)
        pipeline.kill(second, signal.SIGCONT)
        produce(400)
        committed(produced)

        offsets = pipeline.latest_offsets()
        expected = fold_topic(broker.bootstrap, pipeline.topic, offsets)
        assert_snapshot_equals(pipeline.read(), expected, commits=pipeline_commits(pipeline),
                               columns=["id", "amount"])
        [agreed] = pipeline.read_agreed()
        assert agreed.num_rows == len(expected)
    finally:
        pipeline.stop_all()
