"""Latency under a steady rate: what a user sees once the sink has caught up.

A backlog run measures throughput, but its commit latencies mostly measure how much was
buffered when each END_COMMIT came (up to ``transaction.buffer_bytes`` per partition), not how
quickly a record becomes visible in normal operation. So once the first sink run has committed the
whole backlog, the bench keeps its processes running and produces into a second topic at a
fixed rate well below the sink's throughput, then reports:

- commit latency of the instants that ended during that load (END_COMMIT → ``<T>.commit``);
- produce → visible latency of every record: the mtime of the first ``<T>.commit`` whose
  ``kafka.commit.offsets`` cover its offset − its Kafka timestamp (set by the producer).
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable
from dataclasses import dataclass

from hudi_sink.cli.bench.data import PARTITIONS, RecordMaker
from hudi_sink.cli.bench.paced import Message, send_paced
from hudi_sink.cli.bench.report import percentile
from hudi_sink.shared.config.settings import KafkaConfig
from hudi_sink.shared.kafka.connection import TopicAdmin

__all__ = ["SteadyLoad", "SteadyResult", "SteadySent", "create_steady_topic",
           "produce_paced", "produce_steady", "steady_result", "visible_latencies", "rounded"]

@dataclass(frozen=True)
class SteadyLoad:
    rps: int
    seconds: float


@dataclass(frozen=True)
class SteadyResult:
    target_rps: int
    records: int
    sent_rps: float
    """What the producer achieved (below ``target_rps`` if the machine could not keep up)."""
    commit_latencies_s: list[float]
    visible_p50_s: float | None
    visible_p99_s: float | None
    visible_max_s: float | None
    uncovered: int
    """Records no commit covered: always 0 when the run ends normally."""


@dataclass
class SteadySent:
    """Per partition, the offsets sent and their Kafka timestamps (seconds), in offset order."""

    offsets: dict[int, list[int]]
    timestamps: dict[int, list[float]]
    seconds: float
    """How long sending took (the final acknowledgements not included)."""
    run_id: str = ""
    """The records' id prefix (``<run_id>-<n>``): record ``n`` went to partition
    ``n % PARTITIONS`` as that partition's ``n // PARTITIONS``-th record of this run."""

    @property
    def records(self) -> int:
        return sum(len(v) for v in self.offsets.values())

    @property
    def end_offsets(self) -> dict[int, int]:
        return {p: offsets[-1] + 1 for p, offsets in self.offsets.items() if offsets}


async def create_steady_topic(bootstrap: str, topic: str) -> None:
    kafka = KafkaConfig(bootstrap_servers=bootstrap, topics=[topic])
    async with TopicAdmin(kafka) as admin:
        await admin.ensure_topic(topic, PARTITIONS, config_key="bench steady topic")


async def produce_steady(bootstrap: str, topic: str, load: SteadyLoad,
                         record_bytes: int) -> SteadySent:
    """Send ``load.rps`` records a second for ``load.seconds``, round-robin over partitions."""
    maker = RecordMaker(record_bytes)
    return await produce_paced(bootstrap, topic, load.rps, load.seconds,
                               lambda n: (None, maker.value(n), n % PARTITIONS),
                               "hudi-sink-bench-steady", maker.run_id)


async def produce_paced(bootstrap: str, topic: str, rps: int, seconds: float,
                        message: Callable[[int], Message], client_id: str,
                        run_id: str) -> SteadySent:
    """Send ``message(n)`` for n = 0, 1, … at ``rps`` a second for ``seconds`` (the load
    generator of :mod:`.paced`, in a worker thread)."""
    delivered = await asyncio.to_thread(send_paced, bootstrap, topic, rps, seconds, message,
                                        client_id)
    offsets: dict[int, list[int]] = {}
    stamps: dict[int, list[float]] = {}
    for partition, offset, stamp in sorted(delivered.records):
        offsets.setdefault(partition, []).append(offset)
        stamps.setdefault(partition, []).append(stamp)
    return SteadySent(offsets, stamps, delivered.seconds, run_id)


def visible_latencies(sent: SteadySent, commits: list[tuple[float, dict[int, int]]]) -> list[float]:
    """Seconds from each sent record's timestamp to the first commit that covers it.

    ``commits`` are (commit file mtime, next offset per partition) in instant order. A record
    no commit covers is left out (the caller waits for the commit covering the last one)."""
    latencies: list[float] = []
    for partition, offsets in sent.offsets.items():
        ends: list[int] = []
        times: list[float] = []
        for mtime, next_offsets in commits:
            end = max(next_offsets.get(partition, 0), ends[-1] if ends else 0)
            ends.append(end)
            times.append(mtime)
        for offset, stamp in zip(offsets, sent.timestamps[partition], strict=True):
            index = bisect.bisect_right(ends, offset)
            if index < len(ends):
                latencies.append(times[index] - stamp)
    return latencies


def steady_result(load: SteadyLoad, sent: SteadySent, commits: list[tuple[float, dict[int, int]]],
                  commit_latencies: list[float]) -> SteadyResult:
    visible = visible_latencies(sent, commits)
    return SteadyResult(
        target_rps=load.rps, records=sent.records,
        sent_rps=round(sent.records / sent.seconds, 1) if sent.seconds > 0 else 0.0,
        commit_latencies_s=[round(x, 3) for x in commit_latencies],
        visible_p50_s=rounded(percentile(visible, 50)),
        visible_p99_s=rounded(percentile(visible, 99)),
        visible_max_s=rounded(max(visible, default=None)),
        uncovered=sent.records - len(visible),
    )


def rounded(value: float | None) -> float | None:
    """Seconds to the millisecond; None stays None."""
    return None if value is None else round(value, 3)
