"""What the deleter's parts share: one table's storage and state, the clock, what the process
counted — and, once started, the Kafka clients its routines take."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from hudi_sink.services.deleter.table_state import TableStateCache
from hudi_sink.shared.deletion.sender import IntentSender
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.storage.fs import FileSystem

__all__ = ["DeleterContext", "DeleterClients", "Tally", "Counted"]


class Counted(StrEnum):
    """What the deleter counts beside the effects of intents (``settle.Effect``); the values
    are the ``outcome`` labels of ``hudi_sink_deletions_total``."""

    FAILED = "failed"
    UNDECODABLE = "undecodable"
    SWEPT = "swept"
    SWEEP_FAILED = "sweep_failed"
    STAGING_DIR_REMOVED = "staging_dir_removed"
    ORPHAN_FOUND = "orphan_found"
    ORPHAN_ENQUEUED = "orphan_enqueued"
    REPLAYED = "replayed"


class Tally:
    """What this process did, by outcome: ``GET /deletions/stats`` reads it, and every count
    goes to the deletion metric as well (each pod counts its own work)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._counts: Counter[str] = Counter()

    def add(self, outcome: str, count: int = 1) -> None:
        self._counts[outcome] += count
        self._metrics.deletion(outcome, count)

    def __getitem__(self, outcome: str) -> int:
        return self._counts[outcome]


@dataclass(frozen=True)
class DeleterContext:
    """The table the deleter works on and the seams tests replace (storage, clock)."""

    fs: FileSystem
    table_path: str
    cache: TableStateCache
    """Snapshots of the table's state (``table_state``), shared by every part."""
    clock: Callable[[], float]
    """Epoch seconds: intents carry times written by other processes."""
    metrics: Metrics
    tally: Tally


@dataclass(frozen=True)
class DeleterClients:
    """What start-up opens; the routines take it as an argument."""

    producer: AIOKafkaProducer
    consumer: AIOKafkaConsumer
    """Member of ``<name>-deleter`` on the deletion and retry topics."""
    sender: IntentSender
    """Re-enqueues (retry topic, DLQ), replays and orphan intents, through ``producer``."""
