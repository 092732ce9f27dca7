"""The deletion DLQ listing's single flight, as logic (the real deleter on a broker is
``tests/integration/test_admin_surface_contract.py``): callers arriving during a read share
it, one caller going away does not cancel it for the others, a failed read fails everyone
waiting and the next call reads afresh. The topic read itself is replaced by a gate the test
opens (no broker)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from hudi_sink.services.deleter.context import DeleterContext, Tally
from hudi_sink.services.deleter.dlq import DeletionDlq
from hudi_sink.services.deleter.errors import ServiceUnavailable
from hudi_sink.services.deleter.table_state import TableStateCache
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.kafka.clients import KafkaClientFactory
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.storage.fs import LocalFileSystem


class GatedDlq(DeletionDlq):
    """Every read waits for ``gate`` and returns (or raises) what the test set."""

    def __init__(self, tmp_path: Path) -> None:
        fs = LocalFileSystem()
        metrics = Metrics("deleter")
        context = DeleterContext(fs=fs, table_path=str(tmp_path), cache=TableStateCache(fs, 60),
                                 clock=time.time, metrics=metrics, tally=Tally(metrics))
        config = SinkConfig()
        super().__init__(config, context, KafkaClientFactory(config))
        self.gate = asyncio.Event()
        self.reads = 0
        self.answer: list[Any] | Exception = []

    async def read(self) -> list[Any]:
        self.reads += 1
        await self.gate.wait()
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def _until(condition: Any) -> None:
    while not condition():  # the tasks under test run on this loop: yield to them
        await asyncio.sleep(0)


async def test_callers_during_a_read_share_it_and_a_later_one_reads_again(tmp_path: Path) -> None:
    dlq = GatedDlq(tmp_path)
    dlq.answer = ["r1", "r2"]
    callers = [asyncio.create_task(dlq.shared_read()) for _ in range(20)]
    await _until(lambda: dlq.reads == 1)
    dlq.gate.set()
    assert await asyncio.gather(*callers) == [["r1", "r2"]] * 20
    assert dlq.reads == 1
    assert await dlq.shared_read() == ["r1", "r2"] and dlq.reads == 2


async def test_a_caller_going_away_does_not_cancel_the_read_for_the_others(tmp_path: Path) -> None:
    dlq = GatedDlq(tmp_path)
    dlq.answer = ["r"]
    leaving, staying = (asyncio.create_task(dlq.shared_read()) for _ in range(2))
    await _until(lambda: dlq.reads == 1)
    leaving.cancel()
    await asyncio.gather(leaving, return_exceptions=True)
    dlq.gate.set()
    assert await staying == ["r"] and dlq.reads == 1


async def test_a_failed_read_fails_everyone_waiting_and_the_next_call_reads_afresh(
        tmp_path: Path) -> None:
    dlq = GatedDlq(tmp_path)
    dlq.answer = ServiceUnavailable("cannot read orders-deletion-dlq: broker down")
    callers = [asyncio.create_task(dlq.shared_read()) for _ in range(3)]
    await _until(lambda: dlq.reads == 1)
    dlq.gate.set()
    for outcome in await asyncio.gather(*callers, return_exceptions=True):
        assert isinstance(outcome, ServiceUnavailable)
    dlq.answer = ["back"]
    assert await dlq.shared_read() == ["back"] and dlq.reads == 2


async def test_entries_are_limited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dlq = GatedDlq(tmp_path)
    dlq.gate.set()
    dlq.answer = list(range(5))
    seen: list[int] = []
    monkeypatch.setattr("hudi_sink.services.deleter.dlq._entry",
                        lambda record, replayed: seen.append(record) or record)
    assert await dlq.entries(limit=2) == [0, 1] and seen == [0, 1]
