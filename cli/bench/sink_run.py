"""The sink end to end: a backlog already in Kafka → committed in the Hudi table.

Processes are started as a user starts them (``hudi-sink participant|coordinator``):
participants first, and the coordinator once every participant is ready (SparkSession warm),
so the first START_COMMIT is where the work starts and the JVM's start-up is not counted.

What is measured, and from where:
- throughput: records / (mtime of the first ``<T>.commit`` whose ``kafka.commit.offsets``
  reach every partition's end − Kafka timestamp of the first START_COMMIT);
- commit latency per committed instant: mtime of ``<T>.commit`` − Kafka timestamp of the
  first END_COMMIT of T (the control topic is read from its start by a group-less consumer);
- records committed: the coordinator's ``GET /transactions`` (a cross-check: exactly N);
- peak RSS of each participant: the sum over its process tree (Python and the Spark JVM),
  sampled with psutil every 0.25 s from readiness to the final commit (at start-up
  ``spark-submit`` runs a short-lived launcher JVM beside the real one); the sum of each
  process's VmHWM is reported too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import psutil
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaTopicPartition

from hudi_sink.cli.bench.data import Produced, sink_config
from hudi_sink.cli.bench.report import tree_cpu_seconds, usable_cpus, vm_hwm_mb
from hudi_sink.cli.bench.steady import (
    SteadyLoad,
    SteadyResult,
    create_steady_topic,
    produce_steady,
    steady_result,
)
from hudi_sink.cli.bench.timeline import TimelineWatcher
from hudi_sink.cli.bench.updates import (
    UpdateLoad,
    UpdateResult,
    prepare_updates,
    produce_updates,
    update_result,
)
from hudi_sink.cli.broker import free_port
from hudi_sink.shared.config.settings import KafkaConfig
from hudi_sink.shared.kafka.connection import consumer_options
from hudi_sink.shared.kafka.protocol import MessageType, decode
from hudi_sink.shared.runtime.leftovers import terminate

__all__ = ["SinkRun", "SinkResult"]

READY_TIMEOUT_S = 300


@dataclass
class SinkResult:
    participants: int
    records: int
    seconds: float
    committed_records: int
    commits: int
    commit_latencies_s: list[float]
    peak_rss_mb: list[float]
    """Per participant: the highest sampled RSS of its process tree."""
    hwm_rss_mb: list[float] = field(default_factory=list)
    """Per participant: the sum of each of its processes' own peak (VmHWM), an upper bound."""
    hwm_split_mb: list[tuple[float, float]] = field(default_factory=list)
    """Per participant: (Python's VmHWM, the JVM's): which side a peak comes from."""
    cpu_seconds: float = 0.0
    """CPU the participants used from the coordinator's start to the final commit: unlike
    wall time, barely moved by other load on the machine."""
    coordinator_cpu_seconds: float = 0.0
    broker_cpu_seconds: float = 0.0
    """The same window's CPU of the coordinator (from its readiness) and of the broker: with
    the participants', all the CPU the sink cost per record on this machine."""
    steady: SteadyResult | None = None
    """Latency under a steady rate once the backlog is committed (:mod:`.steady`)."""
    updates: UpdateResult | None = None
    """Upsert mode: updates of the committed keys once the backlog is committed (:mod:`.updates`)."""

    @property
    def rps(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def details(self) -> dict[str, Any]:
        """The run as FILE.json's ``sink_<P>`` (``upsert_<P>``) holds it."""
        return {"seconds": round(self.seconds, 2), "commits": self.commits,
                "committed_records": self.committed_records,
                "commit_latencies_s": self.commit_latencies_s,
                "peak_rss_mb": self.peak_rss_mb, "hwm_rss_mb": self.hwm_rss_mb,
                "hwm_python_jvm_mb": self.hwm_split_mb, "participant_cpu_s": self.cpu_seconds,
                **self._cpu_per_record()}

    def _cpu_per_record(self) -> dict[str, float]:
        """CPU per record of every process the sink needs on this machine, and the rate those
        costs allow at best with every core busy: a bound no tuning of the schedule can beat."""
        per = {name: round(seconds * 1e6 / self.records, 1) for name, seconds in (
            ("participant", self.cpu_seconds), ("coordinator", self.coordinator_cpu_seconds),
            ("broker", self.broker_cpu_seconds))}
        total = sum(per.values())
        return {**{f"{name}_cpu_us_per_record": value for name, value in per.items()},
                "all_cpu_us_per_record": round(total, 1),
                "cpu_bound_rps": round(usable_cpus() * 1e6 / total) if total > 0 else 0}


class _Process:
    def __init__(self, role: str, config: Path, log_path: Path) -> None:
        self.role = role
        self.port = free_port()
        self._log: IO[bytes] = log_path.open("wb")
        self.log_path = log_path
        command = [sys.executable, "-m", "hudi_sink.cli.main", role, "--config", str(config),
                   "--admin-port", str(self.port)]
        self.popen = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT,
                                      env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
        self.peak_rss = 0.0
        self._children_seen: set[tuple[int, float]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def sample_rss(self) -> None:
        """Adds this moment's RSS of the process tree to the peak. A child counts only from
        its second sample on: Hadoop's local file system runs shell commands, and a child
        caught between ``vfork`` and ``exec`` reports the whole JVM's memory as its own (a
        1.2M-record run once read 3,317 MB for a 2,046 MB tree). Such children live for
        milliseconds; the JVM lives for the run."""
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(self.popen.pid)
            total = root.memory_info().rss
            seen: set[tuple[int, float]] = set()
            for child in root.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    identity = (child.pid, child.create_time())
                    seen.add(identity)
                    if identity in self._children_seen:
                        total += child.memory_info().rss
            self._children_seen = seen
            self.peak_rss = max(self.peak_rss, total / 2**20)

    def cpu_seconds(self) -> float:
        """User + system CPU of the process tree so far (Python and the Spark JVM)."""
        return tree_cpu_seconds(self.popen.pid)

    def hwm_rss(self) -> tuple[float, float]:
        """Peak RSS (VmHWM) of the Python process and the sum over its children (the JVM),
        the same children as ``sample_rss`` counts (not one caught inside vfork)."""
        python = children = 0.0
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(self.popen.pid)
            python = vm_hwm_mb(root.pid)
            children = sum(vm_hwm_mb(child.pid) for child in root.children(recursive=True)
                           if (child.pid, child.create_time()) in self._children_seen)
        return python, children

    def stop(self) -> None:
        terminate(self.popen, timeout_s=60)
        self._log.close()

    def tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


class SinkRun:
    """One end-to-end run with ``participants`` participant processes and one coordinator.

    ``write_mode`` is the table's; ``label`` tells the sink names and tables of runs with the
    same participant count apart. ``updates`` (upsert mode, one topic) follows the backlog
    with updates into the same topic (:mod:`.updates`), like ``steady`` with a second topic."""

    def __init__(self, work: Path, bootstrap: str, topic: str, produced: Produced,
                 participants: int, *, interval_ms: int, flush_records: int | None,
                 spark_conf: dict[str, str], timeout_s: float,
                 steady: SteadyLoad | None = None, record_bytes: int = 1024,
                 broker_pid: int | None = None, write_mode: str = "insert", label: str = "",
                 updates: UpdateLoad | None = None, small_file_bytes: int | None = None) -> None:
        if steady is not None and updates is not None:
            raise ValueError("a sink run takes a steady phase or an update phase, not both")
        self.work = work
        self.updates = updates
        self._update_messages = (prepare_updates(updates, record_bytes) if updates is not None
                                 else None)
        """Built now, before the sink under test runs (``prepare_updates``)."""
        self.name = f"bench{label}{participants}p"
        self.bootstrap = bootstrap
        self.topic = topic
        self.steady = steady
        self.steady_topic = f"{topic}-steady-{participants}p"
        self.record_bytes = record_bytes
        self.broker_pid = broker_pid
        self.produced = produced
        self.participants = participants
        self.timeout_s = timeout_s
        self.base_path = work / f"table-{label}{participants}p"
        topics = [topic, self.steady_topic] if steady is not None else [topic]
        self.config = sink_config(work / f"{self.name}.yaml", name=self.name, bootstrap=bootstrap,
                                  topics=topics, base_path=self.base_path, interval_ms=interval_ms,
                                  flush_records=flush_records, spark_conf=spark_conf,
                                  write_mode=write_mode, small_file_bytes=small_file_bytes)
        self.starts: dict[str, float] = {}
        self.ends: dict[str, float] = {}
        self.timeline = TimelineWatcher(self.base_path, topics)
        self._watcher: asyncio.Task[None] | None = None

    async def run(self) -> SinkResult:
        procs: list[_Process] = []
        sampler: asyncio.Task[None] | None = None
        tail: asyncio.Task[None] | None = None
        steady: SteadyResult | None = None
        updates: UpdateResult | None = None
        try:
            if self.steady is not None:
                await create_steady_topic(self.bootstrap, self.steady_topic)
            for n in range(self.participants):
                procs.append(_Process("participant", self.config, self.work / f"{self.name}-p{n}.log"))
            sampler = asyncio.create_task(self._sample(procs))
            for proc in procs:
                await self._wait_ready(proc)
            for proc in procs:  # the run's peak: not Spark's launcher JVM at start-up
                proc.peak_rss = 0.0
            tail = asyncio.create_task(self._tail_control())
            self._watcher = asyncio.create_task(self.timeline.run())
            cpu_before = sum(p.cpu_seconds() for p in procs)
            broker_before = tree_cpu_seconds(self.broker_pid)
            coordinator = _Process("coordinator", self.config, self.work / f"{self.name}-c.log")
            procs.append(coordinator)
            await self._wait_ready(coordinator)
            coordinator_before = coordinator.cpu_seconds()
            final = await self._wait_commit_covering(procs, self.topic, self.produced.end_offsets)
            cpu = sum(p.cpu_seconds() for p in procs if p.role == "participant") - cpu_before
            others = (coordinator.cpu_seconds() - coordinator_before,
                      tree_cpu_seconds(self.broker_pid) - broker_before)
            await asyncio.sleep(0.5)  # let the tail see the last END_COMMIT
            committed = await self._committed_records(coordinator)
            if self.steady is not None:
                steady = await self._steady_phase(procs, self.steady)
            if self.updates is not None:
                updates = await self._update_phase(procs, self.updates, final)
        finally:
            for task in (sampler, tail, self._watcher):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            hwm = [p.hwm_rss() for p in procs if p.role == "participant"]
            for proc in procs:
                proc.stop()
        result = self._result(final, committed, procs, hwm, (cpu, *others), steady)
        result.updates = updates
        return result

    async def _steady_phase(self, procs: list[_Process], load: SteadyLoad) -> SteadyResult:
        """Records at ``load.rps`` into the second topic while the caught-up sink runs.
        Commit latency counts the instants that made some of them visible (not the empty
        ones before the first record arrived, which commit at once)."""
        started = time.time()
        sent = await produce_steady(self.bootstrap, self.steady_topic, load, self.record_bytes)
        final = await self._wait_commit_covering(procs, self.steady_topic, sent.end_offsets)
        await asyncio.sleep(0.5)  # let the tail see the last END_COMMIT
        commits = [(c.mtime, c.offsets[self.steady_topic]) for c in self.timeline.commits]
        carrying = self.timeline.advancing(self.steady_topic)
        latencies = [self._commit_mtime(t) - at for t, at in sorted(self.ends.items())
                     if at >= started and t <= final and t in carrying]
        return steady_result(load, sent, commits, latencies)

    async def _update_phase(self, procs: list[_Process], load: UpdateLoad,
                            backlog_final: str) -> UpdateResult:
        """Updates at ``load.rps`` into the data topic once its backlog is committed; the
        phase's commits are those after ``backlog_final`` up to the one covering them all."""
        started = time.time()
        assert self._update_messages is not None
        sent = await produce_updates(self.bootstrap, self.topic, load, self._update_messages)
        final = await self._wait_commit_covering(procs, self.topic, sent.end_offsets)
        await asyncio.sleep(0.5)  # let the tail see the last END_COMMIT
        every = self.timeline.commits
        phase = [c for c in every if backlog_final < c.instant <= final]
        carrying = self.timeline.advancing(self.topic)
        latencies = [self._commit_mtime(t) - at for t, at in sorted(self.ends.items())
                     if at >= started and backlog_final < t <= final and t in carrying]
        return update_result(load, sent, started, self.topic, phase, every, latencies)

    def _result(self, final: str, committed: int, procs: list[_Process],
                hwm: list[tuple[float, float]],
                cpu: tuple[float, float, float], steady: SteadyResult | None) -> SinkResult:
        """``cpu``: the participants', the coordinator's and the broker's CPU seconds."""
        first_start = min(self.starts.values())
        end = self._commit_mtime(final)
        latencies = [self._commit_mtime(t) - at for t, at in sorted(self.ends.items())
                     if t <= final and self.timeline.get(t) is not None]
        return SinkResult(
            participants=self.participants,
            records=self.produced.records,
            seconds=end - first_start,
            committed_records=committed,
            commits=len([c for c in self.timeline.commits if c.instant <= final]),
            commit_latencies_s=[round(x, 3) for x in latencies],
            peak_rss_mb=[round(p.peak_rss, 1) for p in procs if p.role == "participant"],
            hwm_rss_mb=[round(sum(x), 1) for x in hwm],
            hwm_split_mb=[(round(x[0], 1), round(x[1], 1)) for x in hwm],
            cpu_seconds=round(cpu[0], 2),
            coordinator_cpu_seconds=round(cpu[1], 2),
            broker_cpu_seconds=round(cpu[2], 2),
            steady=steady,
        )

    def _commit_mtime(self, instant: str) -> float:
        seen = self.timeline.get(instant)
        if seen is None:
            raise RuntimeError(f"{self.name}: commit {instant} was never seen on the timeline")
        return seen.mtime

    async def _sample(self, procs: list[_Process]) -> None:
        while True:
            for proc in list(procs):
                if proc.role == "participant":
                    await asyncio.to_thread(proc.sample_rss)
            await asyncio.sleep(0.25)

    async def _wait_ready(self, proc: _Process) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        async with httpx.AsyncClient() as client:
            while time.monotonic() < deadline:
                if proc.popen.poll() is not None:
                    raise RuntimeError(f"{proc.role} exited with {proc.popen.returncode}:\n{proc.tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{proc.url}/ready", timeout=2)).status_code == 200:
                        return
                await asyncio.sleep(0.2)
        raise RuntimeError(f"{proc.role} not ready after {READY_TIMEOUT_S} s:\n{proc.tail()}")

    async def _tail_control(self) -> None:
        """First START_COMMIT and END_COMMIT of every instant, by the broker's record time."""
        kafka = KafkaConfig(bootstrap_servers=self.bootstrap, topics=[self.topic])
        consumer = AIOKafkaConsumer(**consumer_options(kafka, None, "hudi-sink-bench-tail"))
        await consumer.start()
        try:
            ktp = KafkaTopicPartition(f"{self.name}-control", 0)
            consumer.assign([ktp])
            await consumer.seek_to_beginning(ktp)
            while True:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    for record in records:
                        self._note(record.value, record.timestamp / 1000)
        finally:
            await consumer.stop()

    def _note(self, value: bytes | None, at: float) -> None:
        if value is None:
            return
        try:
            envelope = decode(value)
        except Exception:  # noqa: BLE001 - not ours to judge; skip what does not decode
            return
        instant = envelope.commit_time
        if instant is None:
            return
        if envelope.type is MessageType.START_COMMIT:
            self.starts.setdefault(instant, at)
        elif envelope.type is MessageType.END_COMMIT:
            self.ends.setdefault(instant, at)

    async def _wait_commit_covering(self, procs: list[_Process], topic: str,
                                    end_offsets: dict[int, int]) -> str:
        """The first commit whose offsets reach ``end_offsets`` in every partition of ``topic``."""
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            for proc in procs:
                if proc.popen.poll() is not None:
                    raise RuntimeError(f"{proc.role} exited with {proc.popen.returncode}:\n{proc.tail()}")
            if self._watcher is not None and self._watcher.done():
                self._watcher.result()  # its error, if it failed
                raise RuntimeError(f"{self.name}: the timeline watcher stopped")
            covering = self.timeline.covering(topic, end_offsets)
            if covering is not None:
                return covering.instant
            await asyncio.sleep(0.1)
        raise RuntimeError(f"{self.name}: not every record committed within {self.timeout_s} s")

    async def _committed_records(self, coordinator: _Process) -> int:
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{coordinator.url}/transactions", params={"limit": 1000},
                                        timeout=30)
            response.raise_for_status()
            views: list[dict[str, Any]] = response.json()
        return sum(int(v.get("records") or 0) for v in views if v.get("state") == "committed")
