"""Chaos: SIGKILL random processes while records flow, then freeze each coordinator.

Full size (``scripts/chaos.sh``; ``pytest -m chaos``): broker, 2 coordinators, 3 participants,
1 deleter, 5 kill-and-restart rounds, each coordinator SIGSTOPped for 20 s in turn, 36,000
records. ``test_chaos_small`` runs in the normal suite at a small size. Both print a summary
(kills, aborted transactions, duplicates, losses, time to settle) and assert exactly once (rows
checked against Apache Hudi's own Java reader too).
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from pipeline import Pipeline, Service

from hudi_sink.cli.broker import EmbeddedBroker
from hudi_sink.shared.hudi.sink_log import SinkLog
from hudi_sink.shared.hudi.sink_log_state import EntryKind
from hudi_sink.shared.storage.fs import LocalFileSystem


def _run_chaos(broker: EmbeddedBroker, tmp_path: Path, name: str, *, records: int, rounds: int,
               participants: int, freeze_s: float, seed: int) -> None:
    rng = random.Random(seed)
    pipeline = Pipeline(tmp_path, name, broker.bootstrap, overrides={
        "transaction": {"interval_ms": 3000, "write_status_timeout_ms": 30000,
                        "flush_records": 2000, "resend_interval_ms": 1000},
        "deletion": {"send_delay_s": 1, "reconsume_later_s": 2, "orphan_min_age_s": 0,
                     "max_redeliveries": 50},
    })
    pipeline.produce(0)
    kills: list[str] = []
    started = time.monotonic()
    try:
        live: list[Service] = pipeline.start_ready(
            "coordinator", "coordinator", *["participant"] * participants, "deleter")
        producer = pipeline.produce_in_background(records, rate=max(100.0, records / 120))
        for _ in range(rounds):
            time.sleep(rng.uniform(6, 12))
            victim = rng.choice(live)
            pipeline.kill(victim, signal.SIGKILL)
            kills.append(victim.role)
            live.remove(victim)
            time.sleep(rng.uniform(0.5, 3))
            live.append(pipeline.start(victim.role))
        for coordinator in [s for s in live if s.role == "coordinator"]:
            coordinator.process.send_signal(signal.SIGSTOP)
            time.sleep(freeze_s)
            coordinator.process.send_signal(signal.SIGCONT)
            kills.append("coordinator (SIGSTOP)")
        assert producer.wait(timeout=600) == 0
        chaos_over = time.monotonic()
        per_partition = records // pipeline.partitions
        pipeline.wait_offsets(per_partition, timeout_s=300)
        settled_s = time.monotonic() - chaos_over

        ids = pipeline.read_agreed()[0].column("id").to_pylist()  # Hudi's Java reader agrees
        distinct = len(set(ids))
        missing = [p for p in pipeline.live_files() if not (pipeline.base_path / p).exists()]
        log_state = SinkLog(LocalFileSystem(), str(pipeline.base_path)).read_state()
        aborted = sum(1 for e in log_state.decisions.values() if e.kind is EntryKind.ABORT)
        summary = [
            ("records produced", records),
            ("rows in table", len(ids)),
            ("kills", f"{len(kills)} ({', '.join(kills)})"),
            ("aborted transactions", aborted),
            ("committed transactions", len(pipeline.completed_commits())),
            ("epochs", log_state.epoch),
            ("duplicates", len(ids) - distinct),
            ("losses", records - distinct),
            ("committed files missing", len(missing)),
            ("time to settle (s)", f"{settled_s:.1f}"),
            ("total time (s)", f"{time.monotonic() - started:.1f}"),
        ]
        width = max(len(k) for k, _ in summary)
        print("\n" + "\n".join(f"  {k:<{width}}  {v}" for k, v in summary))
        assert len(ids) == records and distinct == records
        assert not missing
        assert not pipeline.unlisted_completed_files()
        assert settled_s < 300
    finally:
        pipeline.stop_all()


@pytest.mark.chaos
@pytest.mark.timeout(1800)
def test_chaos_full(broker: EmbeddedBroker, tmp_path: Path, unique_name: str) -> None:
    _run_chaos(broker, tmp_path, unique_name,
               records=int(os.environ.get("CHAOS_RECORDS", "36000")),
               rounds=int(os.environ.get("CHAOS_ROUNDS", "5")),
               participants=3, freeze_s=20, seed=int(os.environ.get("CHAOS_SEED", "7")))


@pytest.mark.long  # its parts in the default suite: test_real_kafka (participant SIGKILL,
# coordinator crash), test_failures (zombie leader, standby), test_exactly_once_holes (freeze)
@pytest.mark.timeout(900)
def test_chaos_small(broker: EmbeddedBroker, tmp_path: Path, unique_name: str) -> None:
    _run_chaos(broker, tmp_path, unique_name, records=6000, rounds=2, participants=2,
               freeze_s=10, seed=11)
