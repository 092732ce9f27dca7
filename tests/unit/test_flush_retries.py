"""A flush retries on the process's policy (``service.retry_backoff_ms``, seed
``retry.backoff.ms``; ``service.retry_timeout_ms``, seed ``write.retry.timeout``), at most
``FLUSH_ATTEMPTS`` times, every failed attempt counted; a writer stands in for Spark."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson

from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.flusher import FLUSH_ATTEMPTS, Flusher
from hudi_sink.services.participant.spark_writer import PlannedFile, SparkWriteError, WrittenFile
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.shared.config.settings import config_from_mapping
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.runtime.faults import Faults
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.storage.fs import LocalFileSystem


class FlakyWriter:
    """Fails the first ``failures`` writes (a Spark driver rebuilding), then answers as the
    real writer does: one file per planned file (nothing is written to disk)."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[float] = []

    def write(self, table: Any, files: list[PlannedFile], work_dir: str) -> list[WrittenFile]:
        self.calls.append(time.monotonic())
        if len(self.calls) <= self.failures:
            raise SparkWriteError("driver lost")
        return [WrittenFile(planned, table.num_rows, 1) for planned in files]


class Rec:
    def __init__(self, offset: int) -> None:
        self.offset, self.key, self.timestamp = offset, None, 0
        self.value = orjson.dumps({"id": f"r{offset}"})


def _flush(tmp_path: Path, failures: int, **service: int) -> tuple[Any, FlakyWriter, Metrics]:
    import asyncio

    config = config_from_mapping({"kafka": {"topics": ["t"]},
                                  "table": {"base_path": str(tmp_path), "schema": "id STRING"},
                                  "service": service}, environ={})
    schema = config.table.table_schema()
    writer = FlakyWriter(failures)
    metrics = Metrics("participant")
    flusher = Flusher(config, schema, HudiTable(LocalFileSystem(), str(tmp_path)), writer,  # type: ignore[arg-type]
                      metrics, Faults(""), writer_nonce=1)
    state = TransactionParticipant(topic="t", partition=0, decoder=RecordDecoder(schema, 1 << 20),
                                   flush_records=10, fail_on_error=False)
    state.begin("20250101000000001", 1, 0)
    state.accept([Rec(0), Rec(1)])
    buffer = state.take_buffer()
    assert buffer is not None
    return asyncio.run(flusher.flush(state, buffer)), writer, metrics


def _failures_counted(metrics: Metrics) -> float:
    for line in metrics.render().decode().splitlines():
        if line.startswith("hudi_sink_flush_failures_total"):
            return float(line.split()[-1])
    return 0.0


def test_flush_waits_retry_backoff_doubling_and_succeeds(tmp_path: Path) -> None:
    result, writer, metrics = _flush(tmp_path, 2, retry_backoff_ms=100)
    assert result.failure is None and [f.num_records for f in result.files] == [2]
    waits = [b - a for a, b in zip(writer.calls, writer.calls[1:], strict=False)]
    assert len(writer.calls) == 3
    assert 0.09 < waits[0] < 0.3 and 0.19 < waits[1] < 0.45, waits
    assert _failures_counted(metrics) == 2


def test_flush_gives_up_after_the_attempt_cap_or_the_retry_timeout(tmp_path: Path) -> None:
    result, writer, metrics = _flush(tmp_path / "a", 100, retry_backoff_ms=1)
    assert len(writer.calls) == FLUSH_ATTEMPTS
    assert result.files is None and result.failure and "failed for good: driver lost" in result.failure
    assert _failures_counted(metrics) == FLUSH_ATTEMPTS

    result, writer, _ = _flush(tmp_path / "b", 100, retry_backoff_ms=300, retry_timeout_ms=400)
    assert len(writer.calls) == 2  # at 0 s and 0.3 s; the next would start at 0.9 s, past 0.4 s
    assert result.failure is not None


class RecordingWriter(FlakyWriter):
    def __init__(self, failures: int) -> None:
        super().__init__(failures)
        self.plans: list[list[PlannedFile]] = []

    def write(self, table: Any, files: list[PlannedFile], work_dir: str) -> list[WrittenFile]:
        self.plans.append(files)
        return super().write(table, files, work_dir)


def test_a_packing_flush_that_fails_retries_into_a_new_group_under_a_new_name(
        tmp_path: Path) -> None:
    """Packing is best-effort: an old slice Spark cannot read must not stop the partition,
    and a retried attempt never reuses the staged name of the one before."""
    import asyncio

    from hudi_sink.shared.hudi.slices import Slice

    config = config_from_mapping({"kafka": {"topics": ["t"]},
                                  "table": {"base_path": str(tmp_path), "schema": "id STRING"},
                                  "service": {"retry_backoff_ms": 1}}, environ={})
    schema = config.table.table_schema()
    writer = RecordingWriter(1)
    flusher = Flusher(config, schema, HudiTable(LocalFileSystem(), str(tmp_path)), writer,  # type: ignore[arg-type]
                      Metrics("participant"), Faults(""), writer_nonce=1)
    old = Slice("", "g1", "20250101000000000", "g1_0-0-1_20250101000000000.parquet", 10, 3, 0)

    class Latest:
        def latest(self) -> dict[tuple[str, str], Slice]:
            return {("", "g1"): old}

    flusher._slices = Latest()  # type: ignore[assignment]
    state = TransactionParticipant(topic="t", partition=0, decoder=RecordDecoder(schema, 1 << 20),
                                   flush_records=10, fail_on_error=False)
    state.begin("20250101000000001", 1, 0)
    state.accept([Rec(0), Rec(1)])
    buffer = state.take_buffer(final=True)
    assert buffer is not None
    result = asyncio.run(flusher.flush(state, buffer))
    assert result.failure is None and result.files is not None
    first, second = writer.plans
    assert first[0].carry is not None and first[0].file_id == "g1"
    assert second[0].carry is None and second[0].file_id != "g1"
    assert first[0].file_name != second[0].file_name
    assert result.files[0].prev_commit is None
