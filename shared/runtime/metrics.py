"""Prometheus metrics: one facade with a method per domain event.

Metric names stay private in here (all prefixed ``hudi_sink_``); call sites read as events
(``metrics.commit_completed(...)``). Each service process owns one registry.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["Metrics", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    def __init__(self, service: str) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self._up = Gauge("hudi_sink_up", "1 while the service runs", ["service"], registry=r)
        self._up.labels(service).set(1)
        # participant
        self._consumed = Counter(
            "hudi_sink_records_consumed", "Records fetched from data topics", ["topic"], registry=r
        )
        self._written = Counter(
            "hudi_sink_records_written", "Rows written to staged base files", ["topic"], registry=r
        )
        self._dlq = Counter(
            "hudi_sink_records_dlq", "Records sent to the data DLQ topic", ["topic"], registry=r
        )
        self._skipped = Counter(
            "hudi_sink_records_skipped", "Tombstones (null values) skipped", ["topic"], registry=r
        )
        self._flush = Histogram(
            "hudi_sink_flush_duration_seconds",
            "Time of one Spark flush",
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
            registry=r,
        )
        self._flush_failed = Counter(
            "hudi_sink_flush_failures", "Spark flushes that failed", registry=r
        )
        self._partition_failed = Gauge(
            "hudi_sink_partition_failed", labelnames=["topic", "partition"], registry=r,
            documentation="1 when errors.tolerance=fail stopped the partition at a bad record")
        self._lag = Gauge("hudi_sink_table_lag_records", labelnames=["topic", "partition"],
                          documentation="Fetched end minus committed offset (records not yet "
                          "in the table)", registry=r)
        # coordinator
        self._commits = Counter("hudi_sink_commits", "Completed Hudi commits", registry=r)
        self._aborts = Counter(
            "hudi_sink_aborts", "Aborted (rolled back) transactions", ["reason"], registry=r
        )
        self._txn = Histogram(
            "hudi_sink_transaction_duration_seconds",
            "START_COMMIT to completed commit",
            buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600),
            registry=r,
        )
        self._committed_records = Counter(
            "hudi_sink_committed_records", "Rows made visible by commits", registry=r
        )
        self._last_commit = Gauge(
            "hudi_sink_last_commit_timestamp_seconds", "Unix time of the last commit", registry=r
        )
        self._since_commit = Gauge(
            "hudi_sink_seconds_since_last_commit",
            "Seconds since the last completed commit (stall alarm)",
            registry=r,
        )
        self._since_commit.set_function(self._seconds_since_commit)
        self._partial = Counter(
            "hudi_sink_partial_commits",
            "Commits that carried the offsets of partitions that did not answer in time",
            registry=r,
        )
        self._carried = Counter(
            "hudi_sink_carried_partitions", "Partitions carried by partial commits", registry=r
        )
        self._conflicts = Counter(
            "hudi_sink_upsert_conflicts", "Statuses dropped because a new file slice was not "
            "written over its group's latest slice (a stale view) or collided with another",
            registry=r)
        self._instants_skipped = Counter(
            "hudi_sink_instants_skipped", "Instants withdrawn, not committed, because no offset "
            "moved (an idle sink: nothing is left on the table)", registry=r)
        self._schema_changes = Counter(
            "hudi_sink_schema_changes", "Table schema changes committed (added or widened "
            "columns, columns made optional: schema evolution)", registry=r)
        self._leader = Gauge("hudi_sink_coordinator_leader", "1 when leader", registry=r)
        self._epoch = Gauge("hudi_sink_coordinator_epoch", "Current epoch", registry=r)
        # deleter
        self._deletions = Counter(
            "hudi_sink_deletions", "Deletion outcomes", ["outcome"], registry=r
        )
        self._settled = Counter(
            "hudi_sink_deletion_intents_settled", labelnames=["source"], registry=r,
            documentation="Deletion intents settled by this deleter (effect durable, offset "
            "committed next)")
        self._scheduled = Counter("hudi_sink_deletion_scheduled_runs", labelnames=["task", "result"],
                                  documentation="Scheduled staging sweeps and reconcile scans, "
                                  "by result", registry=r)
        self._scheduler = Gauge(
            "hudi_sink_deleter_scheduler",
            "1 on the deleter pod that runs the scheduled sweep and reconcile",
            registry=r,
        )
        self._dlq_scans = Counter("hudi_sink_deletion_dlq_scans", registry=r, documentation=(
            "Reads of the whole deletion DLQ topic for GET /deletions/dlq (concurrent requests "
            "share one)"))
        # deletion intents (phase 1, any sender: the coordinator, the deleter's reconcile)
        self._intents_sent = Counter(
            "hudi_sink_deletion_intents_sent",
            "Deletion intents sent to the deletion topic and acked by the broker",
            registry=r,
        )
        self._backlog = Gauge(
            "hudi_sink_deletion_backlog_intents",
            "Deletion-topic records up to the last intent this process got acked that the "
            "deleter group has not committed (a missing deleter shows as growth)",
            registry=r,
        )
        # control channel (every service that reads it)
        self._control_rejected = Counter(
            "hudi_sink_control_rejected", labelnames=["reason"], registry=r,
            documentation="Control records ignored: unsigned, signed by an unknown key, a bad "
            "signature (kafka.control_signing_key set), or undecodable")
        self._last_commit_unix: float | None = None
        self._started = time.time()

    def _seconds_since_commit(self) -> float:
        ref = self._last_commit_unix if self._last_commit_unix is not None else self._started
        return max(0.0, time.time() - ref)

    # participant events
    def records_consumed(self, topic: str, count: int) -> None:
        self._consumed.labels(topic).inc(count)

    def records_written(self, topic: str, count: int) -> None:
        self._written.labels(topic).inc(count)

    def records_dead_lettered(self, topic: str, count: int) -> None:
        self._dlq.labels(topic).inc(count)

    def records_skipped(self, topic: str, count: int) -> None:
        self._skipped.labels(topic).inc(count)

    def flush_completed(self, seconds: float) -> None:
        self._flush.observe(seconds)

    def flush_failed(self) -> None:
        self._flush_failed.inc()

    def partition_failed(self, topic: str, partition: int, failed: bool) -> None:
        self._partition_failed.labels(topic, str(partition)).set(1 if failed else 0)

    def partition_lag(self, topic: str, partition: int, lag: int) -> None:
        self._lag.labels(topic, str(partition)).set(lag)

    # coordinator events
    def commit_completed(self, seconds: float, records: int) -> None:
        self._commits.inc()
        self._txn.observe(seconds)
        self._committed_records.inc(records)
        self._last_commit.set(time.time())
        self._last_commit_unix = time.time()

    def partial_commit(self, carried_partitions: int) -> None:
        self._partial.inc()
        self._carried.inc(carried_partitions)

    def upsert_conflicts(self, statuses: int) -> None:
        self._conflicts.inc(statuses)

    def schema_changes(self, count: int) -> None:
        self._schema_changes.inc(count)

    def instant_skipped(self) -> None:
        self._instants_skipped.inc()

    def table_committed_at(self, unix_seconds: float) -> None:
        """The table's latest completed commit (read from the table, so a fresh leader or a
        standby reports the real stall, not the time since it started)."""
        self._last_commit.set(unix_seconds)
        self._last_commit_unix = unix_seconds

    def transaction_aborted(self, reason: str) -> None:
        self._aborts.labels(reason).inc()

    def leadership(self, leader: bool, epoch: int) -> None:
        self._leader.set(1 if leader else 0)
        self._epoch.set(epoch)

    # control channel events
    def control_rejected(self, reason: str) -> None:
        self._control_rejected.labels(reason).inc()

    def control_rejections_exported(self, reasons: Iterable[str]) -> None:
        """Export each reason at 0 before the first rejection, so an alert on its increase
        sees the first one too."""
        for reason in reasons:
            self._control_rejected.labels(reason)

    # deleter events
    def deletion(self, outcome: str, count: int = 1) -> None:
        self._deletions.labels(outcome).inc(count)

    def deletion_intents_settled(self, source: str, count: int) -> None:
        self._settled.labels(source).inc(count)

    def deletion_scheduled_run(self, task: str, *, ok: bool) -> None:
        self._scheduled.labels(task, "ok" if ok else "failed").inc()

    def deleter_scheduler(self, active: bool) -> None:
        self._scheduler.set(1 if active else 0)

    def deletion_dlq_scanned(self) -> None:
        self._dlq_scans.inc()

    # deletion intent events (senders)
    def deletion_intents_sent(self, count: int) -> None:
        self._intents_sent.inc(count)

    def deletion_backlog(self, records: int) -> None:
        self._backlog.set(records)

    def render(self) -> bytes:
        return generate_latest(self.registry)
