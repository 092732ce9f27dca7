"""Test scope for process-level tests: config file, service subprocesses, producer, checks.

Everything goes through the contract a user has: the ``hudi-sink`` CLI, the YAML config,
REST and the table on disk (read back with hudi-rs, an independent reader, and checked against
Apache Hudi's own Java reader where a test reads rows: ``Pipeline.read_agreed``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import hudi_java
import orjson
import pyarrow as pa
import yaml
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaTopicPartition
from eventually import eventually

from hudi_sink.cli.broker import free_port
from hudi_sink.shared.hudi.naming import instant_key, parse_base_file_name
from hudi_sink.shared.hudi.offsets import parse_offsets
from hudi_sink.shared.storage.fs import FileSystem, LocalFileSystem
from hudi_sink.shared.storage.object_store import ObjectStoreFileSystem

if TYPE_CHECKING:
    from s3_server import MotoS3

HUDI_SINK = str(Path(sys.executable).with_name("hudi-sink"))

HTTP = httpx.Client(timeout=5, limits=httpx.Limits(max_keepalive_connections=0))
"""The tests' one HTTP client for the services' admin REST. Why not ``httpx.get``: each call
builds a client and with it a TLS context that loads the system's CA bundle, ~25 ms of CPU
even for plain http. Tests poll REST in ``eventually`` loops, and py-spy showed half of a
pipeline test's own CPU there (``test_idle_sink.py``). No keep-alive: services are killed
and restarted on the same ports, and a new connection per request is what the old calls did."""


def metric_samples(service: Service, name: str) -> dict[str, float]:
    """Every sample of one Prometheus metric of ``service``, keyed by its label text
    (``partition="0",topic="t"``; ``""`` without labels): what an alert rule would see."""
    text = HTTP.get(f"{service.url}/metrics", timeout=5).text
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        series, _, value = line.rpartition(" ")
        metric, _, labels = series.partition("{")
        if metric == name:
            samples[labels.removesuffix("}")] = float(value)
    return samples


def _instant_of(path: str) -> str:
    """A base file's instant, comparable (``instant_key``)."""
    return instant_key(path.rsplit("_", 1)[-1].removesuffix(".parquet"))


def files_below(root: Path, suffix: str = "") -> set[Path]:
    """Files under ``root`` ending in ``suffix``, walked while services may be deleting
    there: a directory or file that vanishes mid-walk is skipped (``Path.rglob`` raises
    FileNotFoundError when Spark removes its ``_temporary`` attempt directories under it)."""
    return {Path(directory, name) for directory, _, names in os.walk(root)
            for name in names if name.endswith(suffix)}


def metric_total(service: Service, name: str) -> float:
    """The sum of a metric's samples (0 when the service does not export it yet)."""
    return sum(metric_samples(service, name).values())


@dataclass
class Service:
    role: str
    process: subprocess.Popen[bytes]
    log_path: Path
    admin_port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Pipeline:
    """One sink under test: its config, its processes and its table."""

    tmp: Path
    name: str
    bootstrap: str
    partitions: int = 4
    overrides: dict[str, Any] = field(default_factory=dict)
    services: list[Service] = field(default_factory=list)
    s3: MotoS3 | None = None
    """Put the table in a fresh bucket of this S3 server (``s3://<bucket>/warehouse/<name>``),
    reached by every process through the standard AWS variables."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment of every process of this sink (``HUDI_SINK__…`` overrides its config file)."""

    def __post_init__(self) -> None:
        self.topic = f"{self.name}-data"
        self.base_path = self.tmp / "warehouse" / self.name
        config: dict[str, Any] = {
            "name": self.name,
            "kafka": {
                "bootstrap_servers": self.bootstrap,
                "topics": [self.topic],
                "session_timeout_ms": 6000,
                "startup_timeout_s": 30,
            },
            "table": {
                "base_path": str(self.base_path),
                "name": self.name,
                "record_key_field": "id",
                "partition_field": "country",
                "schema": "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE, payload STRING",
            },
            "transaction": {
                "interval_ms": 3000,
                "write_status_timeout_ms": 60000,
                "flush_records": 2000,
                "resend_interval_ms": 1000,
            },
            "deletion": {"send_delay_s": 1, "reconsume_later_s": 2, "orphan_min_age_s": 0},
            # No token in these tests: the POSTs they send (forced commits, reconcile) must be
            # allowed explicitly, as on a development machine (admin refuses them by default).
            "admin": {"host": "127.0.0.1", "port": 0, "allow_unauthenticated": True},
            "spark": {"master": "local[1]", "conf": {"spark.driver.memory": "1g"}},
        }
        for section, values in self.overrides.items():
            if isinstance(values, dict):
                config.setdefault(section, {}).update(values)
            else:
                config[section] = values
        self.table_uri = str(self.base_path)
        self.store_env: dict[str, str] = {}
        self.fs: FileSystem = LocalFileSystem()
        if self.s3 is not None:
            self.table_uri = f"s3://{self.s3.new_bucket()}/warehouse/{self.name}"
            config["table"]["base_path"] = self.table_uri
            self.store_env = self.s3.environment()
            self.fs = ObjectStoreFileSystem(self.table_uri, self.s3.storage_options())
        self.config = config
        self.config_path = self.tmp / f"{self.name}.yaml"
        self.config_path.write_text(yaml.safe_dump(config))

    # --- as a context manager: every process it started is stopped on the way out ---------
    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop_all()

    # --- processes ------------------------------------------------------------------------
    def start(self, role: str, env: dict[str, str] | None = None) -> Service:
        port = free_port()
        log_path = self.tmp / f"{role}-{len(self.services)}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [HUDI_SINK, role, "--config", str(self.config_path), "--admin-port", str(port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **self.store_env, **self.env, **(env or {})},
            )
        service = Service(role, process, log_path, port)
        self.services.append(service)
        return service

    def use_properties(self, text: str, env: dict[str, str]) -> Path:
        """Run this sink from a ``.properties`` file (the Hudi Kafka Connect sink's key names)
        plus environment overrides, instead of the YAML config; returns the file's path."""
        self.config_path = self.tmp / f"{self.name}.properties"
        self.config_path.write_text(text, encoding="utf-8")
        self.env = {**self.env, **env}
        return self.config_path

    def kill(self, service: Service, sig: int = signal.SIGKILL) -> None:
        service.process.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            service.process.wait(timeout=60)

    def stop_all(self) -> None:
        for service in self.services:
            if service.alive():
                service.process.send_signal(signal.SIGCONT)
                service.process.terminate()
        for service in self.services:
            try:
                service.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                service.process.kill()
                service.process.wait()

    def logs(self) -> str:
        return "\n".join(f"--- {s.role} ({s.log_path.name})\n{s.log_tail()}" for s in self.services)

    def start_ready(self, *roles: str, timeout_s: float = 240) -> list[Service]:
        """Start one process per role (all at once, so Spark sessions warm in parallel) and
        wait until every one of them is ready."""
        services = [self.start(role) for role in roles]
        for service in services:
            self.wait_ready(service, timeout_s=timeout_s)
        return services

    def wait_holding_staged_files(self, participant: Service) -> None:
        """Until ``participant`` has flushed files of its open instant (a mid-transaction
        moment worth killing or freezing it at)."""
        eventually(lambda: any(v["staged_files"] for v in
                               HTTP.get(f"{participant.url}/partitions").json()), 120,
                   "staged files of an open instant on the participant", every_s=0.2)

    def wait_ready(self, service: Service, timeout_s: float = 120) -> None:
        def ready() -> bool:
            if not service.alive():
                raise AssertionError(f"{service.role} exited:\n{service.log_tail()}")
            return HTTP.get(f"{service.url}/ready", timeout=2).status_code == 200

        eventually(ready, timeout_s, f"{service.role} ready")

    # --- data -----------------------------------------------------------------------------
    def produce(self, records: int, rate: float | None = None) -> None:
        result = subprocess.run(self._produce_args(records, rate), capture_output=True, text=True,
                                timeout=600, env={**os.environ, **self.env})
        assert result.returncode == 0, result.stdout + result.stderr

    def produce_in_background(self, records: int, rate: float) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self._produce_args(records, rate), env={**os.environ, **self.env},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def produce_keyed(self, args: list[str], rate: float | None = None) -> None:
        """``hudi-sink produce`` with keyed arguments (``--key-space``, ``--records`` …)."""
        result = subprocess.run(self._keyed_args(args, rate), capture_output=True, text=True,
                                timeout=600, env={**os.environ, **self.env})
        assert result.returncode == 0, result.stdout + result.stderr

    def produce_keyed_in_background(self, args: list[str], rate: float) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self._keyed_args(args, rate), env={**os.environ, **self.env},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _keyed_args(self, args: list[str], rate: float | None) -> list[str]:
        return [HUDI_SINK, "produce", "--config", str(self.config_path), "--partitions",
                str(self.partitions), *args, *(["--rate", str(rate)] if rate else [])]

    def _produce_args(self, records: int, rate: float | None) -> list[str]:
        args = [HUDI_SINK, "produce", "--config", str(self.config_path), "--records", str(records),
                "--partitions", str(self.partitions)]
        return args + (["--rate", str(rate)] if rate else [])

    def transactions(self, coordinator: Service) -> list[dict[str, Any]]:
        """``GET /transactions`` (newest first, up to 1,000 entries)."""
        history: list[dict[str, Any]] = HTTP.get(
            f"{coordinator.url}/transactions", params={"limit": 1000}, timeout=5).json()
        return history

    def aborted_transactions(self, coordinator: Service) -> list[dict[str, Any]]:
        return [h for h in self.transactions(coordinator) if h["state"] == "aborted"]

    def group_offsets(self) -> dict[int, int | None]:
        """Offsets the participants' consumer group committed on the data topic (what lag
        tools read). aiokafka's admin offset listing fails on the development broker, so a
        group-less read through ``committed()`` it is: it never joins the group."""

        async def fetch() -> dict[int, int | None]:
            consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap,
                                        group_id=f"{self.name}-participants",
                                        enable_auto_commit=False)
            await consumer.start()
            try:
                return {p: await consumer.committed(KafkaTopicPartition(self.topic, p))
                        for p in range(self.partitions)}
            finally:
                await consumer.stop()

        return asyncio.run(fetch())

    # --- the table --------------------------------------------------------------------------
    @property
    def timeline(self) -> Path:
        return self.base_path / ".hoodie"

    def completed_commits(self) -> list[str]:
        return sorted(i.name.removesuffix(".commit") for i in self.fs.list_dir(f"{self.table_uri}/.hoodie")
                      if i.name.endswith(".commit") and not i.is_dir)

    def commit_metadata(self, instant: str) -> dict[str, Any]:
        return orjson.loads(self.fs.read_bytes(f"{self.table_uri}/.hoodie/{instant}.commit"))

    def latest_offsets(self) -> dict[int, int]:
        commits = self.completed_commits()
        return self.offsets_of(commits[-1]) if commits else {}

    def offsets_of(self, instant: str) -> dict[int, int]:
        """``kafka.commit.offsets`` of one completed instant, by partition of the data topic."""
        raw = self.commit_metadata(instant)["extraMetadata"].get("kafka.commit.offsets", "")
        return {p: o for (_, p), o in parse_offsets(raw, [self.topic]).items()}

    def wait_commits(self, more: int, timeout_s: float = 120,
                     where: Callable[[str], bool] = lambda _instant: True) -> list[str]:
        """Wait until ``more`` commits matching ``where`` complete after the ones on disk now
        (a transaction commits when an offset moved: records, dead letters or tombstones
        arrived). Returns the new instants. On a sink that may be idle, "some transactions
        later" is ``wait_transactions``: an instant in which nothing moved commits nothing."""
        before = set(self.completed_commits())

        def new() -> list[str] | None:
            fresh = [i for i in self.completed_commits() if i not in before and where(i)]
            return fresh if len(fresh) >= more else None

        return eventually(new, timeout_s, f"{more} more commit(s)")

    @staticmethod
    def ended_transactions(coordinator: Service) -> int:
        """Transactions ``coordinator`` ended since it started: committed, rolled back, or
        withdrawn because no offset moved (``hudi_sink_instants_skipped_total``)."""
        return int(sum(metric_total(coordinator, name) for name in (
            "hudi_sink_commits_total", "hudi_sink_aborts_total", "hudi_sink_instants_skipped_total")))

    def wait_transactions(self, coordinator: Service, more: int, timeout_s: float = 120) -> None:
        """Wait until ``coordinator`` has ended ``more`` transactions after now, whether they
        committed or not: an observable "some transactions later" instead of a fixed sleep,
        idle sink or not."""
        before = self.ended_transactions(coordinator)
        eventually(lambda: self.ended_transactions(coordinator) >= before + more, timeout_s,
                   f"{more} more transaction(s) ended")

    def wait_offsets(self, expected: int, timeout_s: float) -> None:
        want = dict.fromkeys(range(self.partitions), expected)

        def reached() -> bool:
            for service in self.services:
                crashed = not service.alive() and service.process.returncode not in (-9, 0, -15)
                if service.role == "coordinator" and crashed:
                    raise AssertionError(f"coordinator died:\n{service.log_tail()}")
            return self.latest_offsets() == want

        try:
            eventually(reached, timeout_s, f"offsets {want} in the latest commit", every_s=1)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nlatest={self.latest_offsets()}\n{self.logs()}") from None

    def read(self, as_of: str | None = None) -> pa.Table:
        return hudi_java.rust_read(self.table_uri, as_of, self.s3.storage_options() if self.s3 else None)

    def read_agreed(self, *as_of: str | None) -> list[pa.Table]:
        """Read the table with Apache Hudi's own Java reader and with hudi-rs and assert both
        return the same rows, every column (Hudi's reader is the authority; see
        ``tests/hudi_java.py``). One JVM for all of ``as_of`` (``None``, the default, is a
        snapshot, compared with hudi-rs as of the instant Hudi's reader saw, as commits keep
        landing meanwhile). Returns hudi-rs's reads in order, a snapshot as a fresh snapshot
        read (so callers keep testing hudi-rs's snapshot path)."""
        instants = as_of or (None,)
        pairs = hudi_java.read_agreed(self.table_uri, *instants,
                                      storage_options=self.s3.storage_options() if self.s3 else None)
        return [rust if instant is not None else self.read()
                for instant, (_, rust) in zip(instants, pairs, strict=True)]

    def listed_files(self) -> set[str]:
        """Every base file a completed commit or replacecommit wrote (replaced ones included:
        the superset a partition directory's files must fall within)."""
        listed: set[str] = set()
        for metadata in self._completed_metadata():
            for stats in metadata["partitionToWriteStats"].values():
                listed.update(stat["path"] for stat in stats)
        return listed

    def live_files(self) -> set[str]:
        """The listed files a snapshot reads: the latest slice of each file group no
        completed replacecommit replaced. These must exist; a replaced group's files and
        superseded slices may be gone (the cleaner deletes them once out of retention)."""
        replaced: set[tuple[str, str]] = set()
        for metadata in self._completed_metadata():
            for partition, file_ids in metadata.get("partitionToReplaceFileIds", {}).items():
                replaced.update((partition, file_id) for file_id in file_ids)

        def group(path: str) -> tuple[str, str]:
            partition, _, name = path.rpartition("/")
            parsed = parse_base_file_name(name)
            return partition, parsed.file_id if parsed is not None else name

        latest: dict[tuple[str, str], str] = {}
        for path in self.listed_files():
            key = group(path)
            if key not in replaced and (key not in latest or _instant_of(path) > _instant_of(latest[key])):
                latest[key] = path
        return set(latest.values())

    def _completed_metadata(self) -> list[dict[str, Any]]:
        names = [i.name for i in self.fs.list_dir(f"{self.table_uri}/.hoodie")
                 if not i.is_dir and i.name.endswith((".commit", ".replacecommit"))]
        return [orjson.loads(self.fs.read_bytes(f"{self.table_uri}/.hoodie/{name}")) for name in names]

    def partition_files(self) -> set[str]:
        """Every Parquet file in the partition directories (outside ``.hoodie``)."""
        found = set()
        for info in self.fs.walk_files(self.table_uri):
            relative = info.path[len(self.table_uri) + 1:]
            if relative.endswith(".parquet") and not relative.startswith(".hoodie"):
                found.add(relative)
        return found

    def staged_files(self) -> list[str]:
        """Parquet files in ``.hoodie/.temp`` (staging of any instant)."""
        return [i.path for i in self.fs.walk_files(f"{self.table_uri}/.hoodie/.temp")
                if i.name.endswith(".parquet")]

    def unlisted_completed_files(self) -> set[str]:
        """Partition files named with a completed instant that no commit lists (must be ∅)."""
        completed = set(self.completed_commits())
        listed = self.listed_files()
        bad = set()
        for relative in self.partition_files():
            parsed = parse_base_file_name(relative.rsplit("/", 1)[-1])
            if parsed is not None and parsed.instant in completed and relative not in listed:
                bad.add(relative)
        return bad

    def committed_records(self) -> int:
        total = 0
        for instant in self.completed_commits():
            for stats in self.commit_metadata(instant)["partitionToWriteStats"].values():
                total += sum(int(s["numWrites"]) for s in stats)
        return total
