"""Apache Kafka 4.3.1 in KRaft mode for the tests: one node, or a three-node cluster.

The jars come from Maven Central (``org.apache.kafka:kafka_2.13:4.3.1``), resolved by
``scripts/resolve-java.sh`` into the user's Maven repository; their classpath is in
``.tools/java/kafka.classpath``. Each node is one JVM running broker and controller together
(combined mode, ``process.roles=broker,controller``), PLAINTEXT on 127.0.0.1, free ports, a
small heap, its log directory under the directory it is given (pytest's tmp). The quorum is
static (``controller.quorum.voters``): every node is a voter, so a three-node cluster keeps a
controller majority when one node dies.

Why real Kafka beside the embedded development broker: the development broker starts in
milliseconds but implements only part of Kafka (it never reports aborted transactions to
read_committed consumers, has no replication). The tests that need the real thing ask for it;
one node per test session, started the first time a test does.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient

from hudi_sink.cli.broker import free_port
from hudi_sink.shared.runtime.leftovers import forget, stop_at_exit

__all__ = ["KAFKA_VERSION", "KafkaCluster", "KafkaStartError", "kafka_classpath"]

KAFKA_VERSION = "4.3.1"
HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent
CLASSPATH_FILE = ROOT / ".tools" / "java" / "kafka.classpath"
_LOG_TAIL_BYTES = 3000


class KafkaStartError(RuntimeError):
    """A Kafka node did not come up (format failed, port taken, no metadata in time)."""


def kafka_classpath() -> str:
    """The classpath of Kafka's jars, resolving them first when ``setup.sh`` has not yet
    (``scripts/resolve-java.sh`` is idempotent: a check of the jars when they are there)."""
    if not CLASSPATH_FILE.is_file():
        subprocess.run([str(ROOT / "scripts" / "resolve-java.sh")], check=True, cwd=ROOT)
    return CLASSPATH_FILE.read_text(encoding="utf-8").strip()


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise KafkaStartError("java not found: install a Java 17 runtime")
    return found


def _cluster_id() -> str:
    """A Kafka UUID in its text form (URL-safe base64 of 16 bytes, no padding). Like Kafka's
    own ``Uuid.randomUuid``, never one starting with ``-``: the storage tool's argument parser
    would take it for an option."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


@dataclass
class KafkaNode:
    node_id: int
    port: int
    controller_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    sasl_port: int = 0
    """With ``KafkaCluster(oauthbearer=True)``: a second listener, SASL_PLAINTEXT with
    OAUTHBEARER (Kafka's unsecured tokens: an unsigned JWT whose ``sub`` is the principal)."""
    stopped: bool = False
    """Stopped on purpose (``kill``, ``stop``): its exit is no start-up failure."""

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def properties_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self) -> str:
        if not self.log_path.is_file():
            return ""
        return self.log_path.read_bytes()[-_LOG_TAIL_BYTES:].decode("utf-8", errors="replace")


class KafkaCluster:
    """``nodes`` KRaft nodes (broker + controller each); ``bootstrap`` names every broker.

    With one node, internal topics have one replica. With more, topics get a replica on every
    node by default and ``min.insync.replicas=2``: an ``acks=all`` write survives the loss of
    one node, and needs two in sync.
    """

    def __init__(self, directory: Path, *, nodes: int = 1, heap_mb: int = 384,
                 settings: dict[str, str] | None = None, oauthbearer: bool = False) -> None:
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        self.directory = directory
        self.node_count = nodes
        self.heap_mb = heap_mb
        self.settings = dict(settings or {})
        self.oauthbearer = oauthbearer
        self.nodes: list[KafkaNode] = []

    @property
    def bootstrap(self) -> str:
        """``host:port`` of every broker, comma-separated (for ``bootstrap_servers``)."""
        return ",".join(node.address for node in self.nodes)

    @property
    def sasl_bootstrap(self) -> str:
        """The OAUTHBEARER listeners (``oauthbearer=True``), comma-separated."""
        return ",".join(f"{HOST}:{node.sasl_port}" for node in self.nodes)

    @property
    def port(self) -> int:
        """The first broker's port (as ``EmbeddedBroker.port``)."""
        return self.nodes[0].port

    def start(self, timeout_s: float = 120, attempts: int = 3) -> KafkaCluster:
        """Format and start every node, then wait until metadata lists all brokers.

        Ports are picked free a moment before the JVMs bind them; a node that exits during
        start-up (someone took its port meanwhile) makes the whole start retry on fresh
        ports and a fresh directory.
        """
        classpath = kafka_classpath()
        attempt = 1
        while True:
            self._layout(self.directory / f"start-{attempt}")
            try:
                self._format(classpath)
                for node in self.nodes:
                    self._spawn(node, classpath)
                stop_at_exit(self, lambda: self.stop(timeout_s=5))
                self.wait_brokers(self.node_count, timeout_s)
                return self
            except KafkaStartError:
                exited = any(n.process is not None and not n.alive() for n in self.nodes)
                self.stop()
                if attempt >= attempts or not exited:
                    raise
            attempt += 1

    def _layout(self, directory: Path) -> None:
        self.nodes = [KafkaNode(i, free_port(), free_port(), directory / f"node-{i}")
                      for i in range(1, self.node_count + 1)]
        voters = ",".join(f"{n.node_id}@{HOST}:{n.controller_port}" for n in self.nodes)
        replicas = self.node_count
        in_sync = min(2, replicas)
        for node in self.nodes:
            (node.directory / "data").mkdir(parents=True)
            sasl: dict[str, str] = {}
            if self.oauthbearer:
                node.sasl_port = free_port()
                sasl = {
                    "listeners": f"PLAINTEXT://{node.address},SASL://{HOST}:{node.sasl_port},"
                                 f"CONTROLLER://{HOST}:{node.controller_port}",
                    "advertised.listeners": f"PLAINTEXT://{node.address},"
                                            f"SASL://{HOST}:{node.sasl_port}",
                    "listener.security.protocol.map":
                        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT",
                    "sasl.enabled.mechanisms": "OAUTHBEARER",
                    "listener.name.sasl.oauthbearer.sasl.jaas.config":
                        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                        "required;",
                }
            config = {
                "process.roles": "broker,controller",
                "node.id": str(node.node_id),
                "controller.quorum.voters": voters,
                "listeners": f"PLAINTEXT://{node.address},CONTROLLER://{HOST}:{node.controller_port}",
                "advertised.listeners": f"PLAINTEXT://{node.address}",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "log.dirs": str(node.directory / "data"),
                "num.partitions": "1",
                "default.replication.factor": str(replicas),
                "min.insync.replicas": str(in_sync),
                "offsets.topic.replication.factor": str(replicas),
                "offsets.topic.num.partitions": "10",
                "transaction.state.log.replication.factor": str(replicas),
                "transaction.state.log.min.isr": str(in_sync),
                "transaction.state.log.num.partitions": "10",
                "share.coordinator.state.topic.replication.factor": str(replicas),
                "share.coordinator.state.topic.min.isr": str(in_sync),
                # As Kafka's own config/server.properties ships it (the 3 s default only
                # batches a new group's first joins; every join still rebalances).
                "group.initial.rebalance.delay.ms": "0",
                "num.network.threads": "2",
                "num.io.threads": "2",
                **sasl,
                **self.settings,
            }
            node.properties_path.write_text(
                "".join(f"{key}={value}\n" for key, value in config.items()), encoding="utf-8")

    def _format(self, classpath: str) -> None:
        """``kafka-storage format`` of every node's log directory (the tool's main class,
        run from the same classpath), in parallel: one cluster id, the static quorum."""
        cluster_id = _cluster_id()
        formats = [(node, subprocess.Popen(
            [_java(), "-Xmx128m", "-cp", classpath, "kafka.tools.StorageTool", "format",
             "-t", cluster_id, "-c", str(node.properties_path)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)) for node in self.nodes]
        for node, process in formats:
            output, _ = process.communicate(timeout=120)
            if process.returncode != 0:
                raise KafkaStartError(f"formatting node {node.node_id} failed "
                                      f"(exit {process.returncode}):\n{output.decode(errors='replace')}")

    def _spawn(self, node: KafkaNode, classpath: str) -> None:
        argv = [_java(), f"-Xmx{self.heap_mb}m", f"-Xms{min(self.heap_mb, 128)}m",
                "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
                "-Dorg.apache.logging.log4j.level=WARN",
                "-cp", classpath, "kafka.Kafka", str(node.properties_path)]
        with node.log_path.open("ab") as log:
            # Own session: a Ctrl-C aimed at pytest must not kill the broker behind the
            # fixture's back. Output goes to a file, never to a pipe nobody drains.
            node.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)

    def wait_brokers(self, count: int, timeout_s: float = 120) -> None:
        """Until a metadata request lists ``count`` brokers (the port open is not enough:
        a broker serves requests only once it has caught up with the metadata log)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout_s
        while True:
            dead = [n for n in self.nodes
                    if n.process is not None and not n.stopped and not n.alive()]
            if dead:
                node = dead[0]
                raise KafkaStartError(f"Kafka node {node.node_id} exited with code "
                                      f"{node.process.returncode if node.process else None}:\n"
                                      f"{node.log_tail()}")
            with contextlib.suppress(Exception):  # not answering yet: keep polling
                if len(admin.list_topics(timeout=2).brokers) >= count:
                    return
            if time.monotonic() >= deadline:
                tails = "\n".join(f"--- node {n.node_id}\n{n.log_tail()}" for n in self.nodes)
                raise KafkaStartError(f"{count} broker(s) not in metadata after {timeout_s} s"
                                      f" on {self.bootstrap}:\n{tails}")
            time.sleep(0.2)

    def kill(self, node_id: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to one node (SIGKILL: it dies at once, no controlled shutdown)."""
        node = self.nodes[node_id - 1]
        assert node.process is not None
        node.stopped = sig in (signal.SIGKILL, signal.SIGTERM)
        node.process.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            node.process.wait(timeout=60)

    def restart(self, node_id: int, timeout_s: float = 120) -> None:
        """Start a stopped node again on its ports and data; wait until it is back."""
        node = self.nodes[node_id - 1]
        if node.alive():
            raise KafkaStartError(f"node {node_id} is running")
        node.stopped = False
        self._spawn(node, kafka_classpath())
        self.wait_brokers(self.node_count, timeout_s)

    def stop(self, timeout_s: float = 30) -> None:
        """SIGTERM every node (a controlled shutdown), SIGKILL what is left after
        ``timeout_s``. Safe to call more than once."""
        for node in self.nodes:
            node.stopped = True
            if node.alive():
                assert node.process is not None
                node.process.terminate()
        deadline = time.monotonic() + timeout_s
        for node in self.nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()
        forget(self)

    def __repr__(self) -> str:
        alive = sum(node.alive() for node in self.nodes)
        return f"KafkaCluster(bootstrap={self.bootstrap!r}, {alive}/{self.node_count} nodes running)"
