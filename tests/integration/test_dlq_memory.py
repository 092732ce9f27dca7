"""A flood of large bad records keeps the participant's memory bounded (issue 9, finding 5).

Dead letters used to be held in memory, values and all, until END_COMMIT: 600 MB of bad
records in one instant meant 600 MB more resident memory (and a crash loop when the flood
is larger than the pod). They are now sent as they arrive with at most 64 MiB in flight.

Scaled from the issue's "100,000 records of 1 MB": the development broker keeps every
topic in memory, so the test uses 1,200 records of 500 kB (600 MB), which already shows the
difference between "bounded" and "everything held" on the participant's peak RSS (VmHWM of
the Python process; Spark's JVM is a separate process and not counted).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from eventually import eventually
from pipeline import HTTP, Pipeline
from test_bad_records import _produce, _read_all

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(900)

BAD_RECORDS = 1_200
VALUE_BYTES = 500_000
HEADROOM_MB = 300
"""Fetch buffers (16 MiB per fetch), the 64 MiB dead-letter budget, the producer's
batches and decode garbage: far less than the 600 MB the flood holds."""


def _memory_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"{field} missing for {pid}")


def test_a_flood_of_large_bad_records_keeps_participant_memory_bounded(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "transaction": {"interval_ms": 600000, "write_status_timeout_ms": 120000,
                        "flush_records": 2000, "resend_interval_ms": 1000},
        "errors": {"max_record_bytes": 1_000_000}})
    pipeline.produce(400)  # good records, and the topic
    try:
        coordinator, participant = pipeline.start_ready("coordinator", "participant")
        eventually(lambda: all(v["state"] == "writing" and v["last_written_offset"] == 99
                               for v in HTTP.get(f"{participant.url}/partitions").json()), 120,
                   "the good records taken in")
        baseline = _memory_mb(participant.process.pid, "VmRSS")
        bad = [b"{" + bytes([65 + i % 26]) * VALUE_BYTES for i in range(BAD_RECORDS)]  # not JSON
        asyncio.run(_produce(broker.bootstrap, pipeline.topic, bad, pipeline.partitions))
        per_partition = BAD_RECORDS // pipeline.partitions
        eventually(lambda: all(v["records_dlq"] == per_partition for v in
                               HTTP.get(f"{participant.url}/partitions").json()), 300,
                   "every bad record dead-lettered inside the open instant", every_s=1)
        peak = _memory_mb(participant.process.pid, "VmHWM")
        assert peak - baseline < HEADROOM_MB, (
            f"participant peak RSS {peak:.0f} MB vs {baseline:.0f} MB before the flood of "
            f"{BAD_RECORDS * VALUE_BYTES / 1e6:.0f} MB")

        assert HTTP.post(f"{coordinator.url}/transactions/commit").status_code == 202
        pipeline.wait_offsets(100 + per_partition, timeout_s=120)
        assert pipeline.read().num_rows == 400
        dead = asyncio.run(_read_all(broker.bootstrap, f"{unique_name}-dlq", pipeline.partitions))
        assert len(dead) == BAD_RECORDS
    finally:
        pipeline.stop_all()
