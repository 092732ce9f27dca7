"""Upsert merges of partitions ending together are planned one at a time (``Flusher._merge``):
planning holds the GIL, so plans run side by side all finish late and leave Spark idle. A plan
whose instant ended while it waited is not made, and a cancelled flush keeps the turn until
its worker thread has finished."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hudi_sink.services.participant import flusher as flusher_module
from hudi_sink.services.participant.flush_plan import FlushInput
from hudi_sink.services.participant.flusher import Flusher
from hudi_sink.services.participant.keyed.merge import MergePlan
from hudi_sink.shared.config.settings import config_from_mapping
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.runtime.faults import Faults
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.storage.fs import LocalFileSystem

Plan = Callable[..., MergePlan]


def _merger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plan: Plan) -> Callable[..., Any]:
    """``merge(key, still_wanted)``: Flusher._merge of one change ``key`` with ``plan`` as
    the planner."""
    config = config_from_mapping({"kafka": {"topics": ["t"]},
                                  "table": {"base_path": str(tmp_path), "schema": "id STRING",
                                            "write_mode": "upsert", "record_key_field": "id"}},
                                 environ={})
    flusher = Flusher(config, config.table.table_schema(), HudiTable(LocalFileSystem(), str(tmp_path)),
                      object(), Metrics("participant"), Faults(""), writer_nonce=1)  # type: ignore[arg-type]
    monkeypatch.setattr(flusher_module, "plan_merge", plan)
    monkeypatch.setattr(flusher._slices, "latest", lambda: {})
    schema = config.table.table_schema()

    def merge(key: str, still_wanted: Callable[[], bool] = lambda: True) -> Any:
        spec = FlushInput(topic="t", partition=0, source_index=0, instant="20250101000000001",
                          flush_no=1, writer_nonce=1, staging_dir=str(tmp_path / "stage"),
                          hive_style=False)
        return flusher._merge({key: None}, spec, schema, key, still_wanted)  # type: ignore[dict-item]

    return merge


def test_two_partitions_plans_never_overlap_and_run_in_the_order_they_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    overlapped = threading.Event()
    lock = threading.Lock()
    active, most, order = 0, 0, []

    def plan(changes: dict[str, Any], latest: Any, **_: Any) -> MergePlan:
        nonlocal active, most
        with lock:
            active += 1
            most = max(most, active)
            order.append(next(iter(changes)))
            if active > 1:
                overlapped.set()
        # Long enough for the second plan to enter if nothing held it back (it was started
        # together with this one).
        overlapped.wait(timeout=0.5)
        with lock:
            active -= 1
        return MergePlan(None, {}, Counter())

    merge = _merger(tmp_path, monkeypatch, plan)

    async def both() -> None:
        await asyncio.gather(merge("a"), merge("b"))

    asyncio.run(both())
    assert most == 1, "two merges were planned at the same time"
    assert order == ["a", "b"]


def test_a_plan_whose_instant_ended_while_it_waited_is_not_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planned: list[str] = []

    def plan(changes: dict[str, Any], latest: Any, **_: Any) -> MergePlan:
        planned.append(next(iter(changes)))
        return MergePlan(None, {}, Counter())

    merge = _merger(tmp_path, monkeypatch, plan)
    assert asyncio.run(merge("gone", lambda: False)) is None
    assert planned == []


def test_a_cancelled_flush_keeps_the_turn_until_its_plan_has_finished(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first_entered, release_first, second_entered = (threading.Event(), threading.Event(),
                                                     threading.Event())

    def plan(changes: dict[str, Any], latest: Any, **_: Any) -> MergePlan:
        if next(iter(changes)) == "first":
            first_entered.set()
            release_first.wait(timeout=10)
        else:
            second_entered.set()
        return MergePlan(None, {}, Counter())

    merge = _merger(tmp_path, monkeypatch, plan)

    async def run() -> None:
        first = asyncio.create_task(merge("first"))
        await asyncio.to_thread(first_entered.wait, 10)
        second = asyncio.create_task(merge("second"))
        first.cancel()
        # The second plan must not start while the first one's thread still runs.
        assert not await asyncio.to_thread(second_entered.wait, 0.3)
        release_first.set()
        with pytest.raises(asyncio.CancelledError):
            await first
        await asyncio.wait_for(second, 10)
        assert second_entered.is_set()

    asyncio.run(run())
