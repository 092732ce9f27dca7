"""Upsert merges of partitions ending together are planned one at a time (``Flusher._merge``):
planning holds the GIL, so plans run side by side all finish late and leave Spark idle."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
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


def test_two_partitions_plans_never_overlap_and_run_in_the_order_they_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = config_from_mapping({"kafka": {"topics": ["t"]},
                                  "table": {"base_path": str(tmp_path), "schema": "id STRING",
                                            "write_mode": "upsert", "record_key_field": "id"}},
                                 environ={})
    flusher = Flusher(config, config.table.table_schema(), HudiTable(LocalFileSystem(), str(tmp_path)),
                      object(), Metrics("participant"), Faults(""), writer_nonce=1)  # type: ignore[arg-type]
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

    monkeypatch.setattr(flusher_module, "plan_merge", plan)
    monkeypatch.setattr(flusher._slices, "latest", lambda: {})

    def spec(partition: int) -> FlushInput:
        return FlushInput(topic="t", partition=partition, source_index=partition,
                          instant="20250101000000001", flush_no=1, writer_nonce=1,
                          staging_dir=str(tmp_path / ".hoodie" / ".temp"), hive_style=False)

    async def both() -> None:
        schema = config.table.table_schema()
        await asyncio.gather(
            flusher._merge({"a": None}, spec(0), schema, "p0"),  # type: ignore[dict-item]
            flusher._merge({"b": None}, spec(1), schema, "p1"))  # type: ignore[dict-item]

    asyncio.run(both())
    assert most == 1, "two merges were planned at the same time"
    assert order == ["a", "b"]
