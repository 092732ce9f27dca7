"""A Kafka Connect standalone worker with one connector plugin, for the bench's anchors.

The runtime is ``org.apache.kafka:connect-runtime`` (bench/java/connect-runtime/pom.xml), the
plugin another pom under bench/java/; both are resolved from Maven Central by
``scripts/resolve-java.sh`` (``HUDI_SINK_JAVA_DIRS`` names the one directory), every jar
checked against the directory's ``artifacts.sha256``. The plugin's jars go on the worker's
``plugin.path`` (its own class loader, as a deployment installs a connector); the worker runs
``ConnectStandalone`` with no connector, so the JVM's start and the plugin scan are over before
the connector is submitted over the REST API and the clock starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import httpx

from hudi_sink.cli.broker import free_port
from hudi_sink.shared.runtime.leftovers import forget, stop_at_exit, terminate

__all__ = ["ROOT", "AnchorUnavailable", "ConnectWorker", "pom_properties", "resolve_classpath",
           "wait_assigned"]

ROOT = Path(__file__).resolve().parents[2]
"""The source checkout: the anchors need its bench/java poms and scripts/resolve-java.sh."""
READY_TIMEOUT_S = 180
_LOG_TAIL_BYTES = 4000
_POM = "{http://maven.apache.org/POM/4.0.0}"

_LOG4J2 = """\
status = error
appender.file.type = Console
appender.file.name = OUT
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.kafka.name = org.apache.kafka
logger.kafka.level = WARN
logger.runtime.name = org.apache.kafka.connect.runtime.WorkerSinkTask
logger.runtime.level = INFO
"""
"""INFO for the connectors (their commit lines say what happened), WARN for Kafka's clients."""


class AnchorUnavailable(RuntimeError):
    """An anchor cannot run here; the message is the reason the report prints."""


def pom_properties(directory: str) -> dict[str, str]:
    """The ``<properties>`` of bench/java/<directory>/pom.xml: the versions it pins."""
    root = ET.parse(ROOT / "bench" / "java" / directory / "pom.xml").getroot()  # noqa: S314 - our file
    properties = root.find(f"{_POM}properties")
    return {} if properties is None else {
        child.tag.removeprefix(_POM): (child.text or "").strip() for child in properties}


def _maven_reason(output: str) -> str:
    """What Maven said failed, in one line, without its colours and boilerplate."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", output)
    for line in text.splitlines():
        if "Could not resolve" in line or "was not found" in line or "Could not find" in line:
            line = re.sub(r"^.*Could not resolve dependencies for project [^:]+:[^:]+:[^:]+:[^:]+:\s*",
                          "", line.replace("[ERROR]", "").strip())
            line = line.split(" -> [Help")[0]
            return line.replace(" during a previous attempt. This failure was cached in the local "
                                "repository and resolution is not reattempted until the update interval"
                                " of central has elapsed or updates are forced",
                                " (a failure Maven cached from an earlier attempt)").strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def resolve_classpath(directory: str) -> list[str]:
    """The jars of bench/java/<directory>, resolved (Maven, the first time) and checked.
    Blocking (Maven may run for minutes): call it from a worker thread."""
    pom = ROOT / "bench" / "java" / directory / "pom.xml"
    script = ROOT / "scripts" / "resolve-java.sh"
    if not pom.is_file() or not script.is_file():
        raise AnchorUnavailable(f"needs the source checkout ({pom.relative_to(ROOT)} and "
                                "scripts/resolve-java.sh not found)")
    done = subprocess.run([str(script)], cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**os.environ, "HUDI_SINK_JAVA_DIRS": f"bench/java/{directory}"})
    if done.returncode != 0:
        raise AnchorUnavailable(f"Maven could not resolve bench/java/{directory}/pom.xml: "
                                f"{_maven_reason(done.stdout + done.stderr)}")
    classpath = ROOT / ".tools" / "java" / f"{directory}.classpath"
    return [jar for jar in classpath.read_text(encoding="utf-8").strip().split(":") if jar]


class ConnectWorker:
    """One ``ConnectStandalone`` JVM: REST on a free local port, offsets in ``directory``."""

    def __init__(self, directory: Path, bootstrap: str, runtime: list[str], plugin: list[str],
                 *, heap_mb: int = 1024, worker: dict[str, str] | None = None) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        """The worker's REST API."""
        plugins = directory / "plugins" / "connector"
        plugins.mkdir(parents=True)
        for jar in plugin:  # the plugin's own directory: one class loader for all its jars
            (plugins / Path(jar).name).symlink_to(jar)
        self.heap_mb = heap_mb
        self.settings = {
            "bootstrap.servers": bootstrap,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "offset.storage.file.filename": str(directory / "connect.offsets"),
            "listeners": self.url,
            "plugin.path": str(plugins.parent),
            **(worker or {}),
        }
        (directory / "worker.properties").write_text(
            "".join(f"{key}={value}\n" for key, value in self.settings.items()), encoding="utf-8")
        (directory / "log4j2.properties").write_text(_LOG4J2, encoding="utf-8")
        self.log_path = directory / "connect.log"
        self._argv = ["java", f"-Xmx{heap_mb}m", "-XX:+ExitOnOutOfMemoryError",
                      "-Djava.awt.headless=true",
                      f"-Dlog4j2.configurationFile={directory / 'log4j2.properties'}",
                      "-cp", ":".join(runtime), "org.apache.kafka.connect.cli.ConnectStandalone",
                      str(directory / "worker.properties")]
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def log_tail(self) -> str:
        if not self.log_path.is_file():
            return ""
        return self.log_path.read_bytes()[-_LOG_TAIL_BYTES:].decode("utf-8", errors="replace")

    def _launch(self) -> None:
        with self.log_path.open("ab") as log:
            # Own session: a Ctrl-C aimed at the bench reaches it through stop(), not behind it.
            self._process = subprocess.Popen(self._argv, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True)
        # Killed at exit if still running: workers run in their own session, so a Ctrl-C
        # does not reach them by itself.
        stop_at_exit(self._process, self._process.kill)

    async def start(self) -> None:
        """Start the JVM and wait until its REST API answers (plugins scanned, herder up)."""
        await asyncio.to_thread(self._launch)
        deadline = time.monotonic() + READY_TIMEOUT_S
        async with httpx.AsyncClient() as client:
            while time.monotonic() < deadline:
                self.check_alive()
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{self.url}/connectors", timeout=2)).status_code == 200:
                        return
                await asyncio.sleep(0.2)
        raise AnchorUnavailable(f"the Connect worker did not answer within {READY_TIMEOUT_S} s:\n"
                                f"{self.log_tail()}")

    def check_alive(self) -> None:
        if self._process is not None and self._process.poll() is not None:
            raise AnchorUnavailable(f"the Connect worker exited with {self._process.returncode}:\n"
                                    f"{self.log_tail()}")

    async def submit(self, name: str, config: dict[str, str]) -> None:
        async with httpx.AsyncClient() as client:
            response = await client.put(f"{self.url}/connectors/{name}/config", json=config, timeout=60)
        if response.status_code >= 300:
            raise AnchorUnavailable(f"Connect refused connector {name}: HTTP {response.status_code} "
                                    f"{response.text[:2000]}")

    async def failure(self, name: str) -> str | None:
        """The trace of the connector or a task of it that FAILED, else None (also when the
        status cannot be read at this moment)."""
        async with httpx.AsyncClient() as client:
            try:
                response = await client.get(f"{self.url}/connectors/{name}/status", timeout=10)
            except httpx.HTTPError:
                return None
        if response.status_code != 200:
            return None
        status: dict[str, Any] = response.json()
        for part in [status.get("connector") or {}, *(status.get("tasks") or [])]:
            if part.get("state") == "FAILED":
                return str(part.get("trace") or "FAILED without a trace")
        return None

    async def stop(self, timeout_s: float = 30) -> None:
        """SIGTERM (Connect stops its tasks cleanly), SIGKILL after ``timeout_s``."""
        process = self._process
        if process is None:
            return
        await asyncio.to_thread(terminate, process, timeout_s)
        forget(process)


def _assigned_partitions(bootstrap: str, group: str) -> int:
    """Partitions the members of a STABLE ``group`` hold (0 while it is not stable)."""
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    description = admin.describe_consumer_groups([group], request_timeout=5)[group].result(timeout=10)
    if description.state != ConsumerGroupState.STABLE:
        return 0
    return sum(len(member.assignment.topic_partitions) for member in description.members)


async def wait_assigned(bootstrap: str, group: str, partitions: int, timeout_s: float) -> float:
    """When ``group`` (a sink connector's consumers: ``connect-<name>``) first held all
    ``partitions``: the moment its task can start consuming, as the sink's first START_COMMIT
    is for its participants. Looked at every 50 ms, so up to that much late."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # not there yet, or the broker busy: look again
            if await asyncio.to_thread(_assigned_partitions, bootstrap, group) >= partitions:
                return time.time()
        await asyncio.sleep(0.05)
    raise AnchorUnavailable(f"consumer group {group} never held all {partitions} partitions "
                            f"within {timeout_s:g} s")
