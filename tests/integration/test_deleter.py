"""The deleter service in-process against the session broker and a real table on disk.

Each test runs a ``DeleterService`` (send delay 1 s, reconsume-later 1 s, 2 redeliveries, no
scheduled work), builds table state with ``HudiTable`` and the sink log, sends intents the way
the coordinator does, and checks storage, ``/deletions/*`` and the group's committed offsets.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from deleter_harness import (
    HOUR,
    T1,
    T2,
    T3,
    FlakyFileSystem,
    RecordingFileSystem,
    Table,
    deleter,
    sink_config,
)

from hudi_sink.cli.broker import EmbeddedBroker
from hudi_sink.shared.deletion.intent import DeletionReason
from hudi_sink.shared.deletion.sender import KafkaDisposal
from hudi_sink.shared.hudi.naming import base_file_name

pytestmark = pytest.mark.timeout(120)


async def test_inflight_file_waits_until_its_instant_is_rolled_back(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    async with deleter(broker, unique_name, tmp_path / "t") as (h, table):
        table.hudi.start_instant(T1)
        staged = table.staged(T1)
        # Phase 1 exactly as the coordinator does it: from a worker thread, acked on return.
        disposal = KafkaDisposal(h.sender, asyncio.get_running_loop(), h.config)
        await asyncio.to_thread(disposal.before_decision, T1, [staged], "ABORTED_INSTANT")

        await h.wait_stat("retried", 1)
        assert os.path.exists(staged), "a file of an inflight instant was deleted"
        table.abort(T1)
        stats = await h.wait_stat("deleted", 1)
        assert not os.path.exists(staged)
        assert stats["dlq"] == 0 and stats["kept_in_use"] == 0
        await h.wait_committed(h.config.deletion_topic, 1)


async def test_deleting_the_last_staged_file_removes_the_staging_directory(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    async with deleter(broker, unique_name, tmp_path / "t") as (h, table):
        table.hudi.start_instant(T1)
        first, second = table.staged(T1, "aaaa-1"), table.staged(T1, "bbbb-1")
        table.abort(T1)
        staging = table.hudi.staging_dir(T1)

        await h.sender.send_intents([h.intent(first, DeletionReason.ABORTED_INSTANT, T1)])
        await h.wait_stat("deleted", 1)
        assert not os.path.exists(first) and os.path.exists(second)
        assert os.path.isdir(staging), "a staging directory still holding a file was removed"

        await h.sender.send_intents([h.intent(second, DeletionReason.ABORTED_INSTANT, T1)])
        stats = await h.wait_stat("staging_dirs_removed", 1)
        assert not os.path.exists(staging)
        assert stats["deleted"] == 2 and stats["swept"] == 0 and stats["sweeps"] == 0


async def test_a_due_time_in_the_future_is_not_acted_on_early(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    storage = RecordingFileSystem()
    base = tmp_path / "t"
    config = sink_config(broker, unique_name, base, send_delay_s=5)
    async with deleter(broker, unique_name, base, fs=storage, config=config) as (h, table):
        table.hudi.start_instant(T1)
        staged = table.staged(T1)
        table.abort(T1)  # dead from the start: only its due time holds the intent back
        due = time.time() + 3
        await h.sender.send_intents([h.intent(staged, DeletionReason.ABORTED_INSTANT, T1,
                                              not_before=due)])

        await h.wait_stat("pending", 1)  # fetched, then handed back until due
        assert os.path.exists(staged)
        await h.wait_stat("deleted", 1)
        assert storage.deleted_at[staged] >= due
        await h.wait_committed(h.config.deletion_topic, 1)


async def test_duplicate_intents_delete_once_and_both_are_acked(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    async with deleter(broker, unique_name, tmp_path / "t") as (h, table):
        table.hudi.start_instant(T1)
        staged = table.staged(T1)
        table.abort(T1)
        item = h.intent(staged, DeletionReason.ABORTED_INSTANT, T1)
        await h.sender.send_intents([item, item])

        stats = await h.wait_stat("missing_already", 1)
        assert stats["deleted"] == 1 and stats["retried"] == 0
        assert not os.path.exists(staged)
        await h.wait_committed(h.config.deletion_topic, 2)


async def test_redelivery_after_the_file_is_gone_is_success(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    async with deleter(broker, unique_name, tmp_path / "t") as (h, table):
        table.commit(T1)
        table.hudi.start_instant(T2)
        staged = table.staged(T2)
        table.abort(T2)
        item = h.intent(staged, DeletionReason.ABORTED_INSTANT, T2)
        await h.sender.send_intents([item])
        await h.wait_stat("deleted", 1)
        await h.sender.send_intents([item])  # what a crash before the offset commit replays
        stats = await h.wait_stat("missing_already", 1)
        assert stats["deleted"] == 1 and stats["retried"] == 0 and stats["dlq"] == 0
        await h.wait_committed(h.config.deletion_topic, 2)


async def test_forged_intents_never_delete_a_live_file(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    async with deleter(broker, unique_name, tmp_path / "t") as (h, table):
        live = table.commit(T1, age_s=2 * HOUR)
        table.hudi.start_instant(T2)
        table.abort(T2)
        outside = Table.write(str(tmp_path / "elsewhere" / "precious.parquet"), age_s=2 * HOUR)
        properties = table.hudi.properties_path
        reasons = DeletionReason
        forged = [
            h.intent(live, reasons.UNCOMMITTED_FILE, T1),
            h.intent(live, reasons.ABORTED_INSTANT, T2),  # a rolled-back killing instant
            h.intent(live, reasons.REPLACED, T1),
            h.intent(live, reasons.ORPHAN, None, check_in_use=False),
            h.intent(properties, reasons.ORPHAN, None),
            h.intent(outside, reasons.ORPHAN, None, table_path=str(tmp_path / "elsewhere")),
        ]
        await h.sender.send_intents(forged)

        stats = await h.wait_stat("kept_in_use", len(forged))
        assert stats["deleted"] == 0 and stats["retried"] == 0
        assert os.path.exists(live) and os.path.exists(properties) and os.path.exists(outside)
        await h.wait_committed(h.config.deletion_topic, len(forged))


async def test_failing_storage_retries_then_dead_letters_then_replays(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    storage = FlakyFileSystem()
    storage.broken = True
    async with deleter(broker, unique_name, tmp_path / "t", fs=storage) as (h, table):
        table.hudi.start_instant(T1)
        staged = table.staged(T1)
        table.abort(T1)
        await h.sender.send_intents([h.intent(staged, DeletionReason.ABORTED_INSTANT, T1)])

        stats = await h.wait_stat("dlq", 1)
        assert stats["retried"] == 2 and stats["failed"] == 3 and stats["deleted"] == 0
        assert os.path.exists(staged)
        await h.wait_committed(h.config.deletion_retry_topic, 2)
        await h.wait_committed(h.config.deletion_topic, 1)

        listing = (await h.http.get("/deletions/dlq")).json()
        assert len(listing) == 1
        entry = listing[0]
        assert entry["file_path"] == staged and entry["reason"] == "ABORTED_INSTANT"
        assert entry["attempts"] == 3 and entry["error_class"] == "PermissionError"
        assert "delete denied" in entry["last_error"] and "max_redeliveries" in entry["dlq_reason"]
        assert entry["replayed"] is False and entry["source"].startswith(h.config.deletion_topic)

        storage.broken = False
        replay = (await h.http.post("/deletions/dlq/replay")).json()
        assert replay == {"replayed": 1, "already_replayed": 0, "undecodable": 0}
        await h.wait_stat("deleted", 1)
        assert not os.path.exists(staged)

        again = (await h.http.post("/deletions/dlq/replay")).json()
        assert again == {"replayed": 0, "already_replayed": 1, "undecodable": 0}
        assert (await h.http.get("/deletions/dlq")).json()[0]["replayed"] is True
        assert (await h.stats())["deleted"] == 1


async def test_reconcile_reports_then_deletes_only_old_orphans(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    async with deleter(broker, unique_name, tmp_path / "t") as (h, table):
        referenced = table.commit(T1, age_s=2 * HOUR)
        table.hudi.start_instant(T2)
        table.abort(T2)
        orphan = Table.write(f"{h.base}/de/{base_file_name('dddd-1', '0-0-1', T2)}", 2 * HOUR)
        young = Table.write(f"{h.base}/de/{base_file_name('eeee-1', '0-0-1', T2)}")
        table.hudi.start_instant(T3)
        pending = table.staged(T3)
        os.utime(pending, (time.time() - 2 * HOUR,) * 2)

        dry = await h.http.post("/deletions/reconcile")
        assert dry.status_code == 200
        body = dry.json()
        assert body["dry_run"] is True and body["enqueued"] == 0
        assert [o["path"] for o in body["orphans"]] == [orphan]
        assert os.path.exists(orphan)

        real = (await h.http.post("/deletions/reconcile", params={"dry_run": "false"})).json()
        assert [o["path"] for o in real["orphans"]] == [orphan] and real["enqueued"] == 1
        stats = await h.wait_stat("deleted", 1)
        assert not os.path.exists(orphan)
        assert all(os.path.exists(p) for p in (referenced, young, pending))
        assert stats["reconcile_orphans"] == 2
        after = (await h.http.post("/deletions/reconcile")).json()
        assert after["orphans"] == []
