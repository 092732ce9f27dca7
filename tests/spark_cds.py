"""Class-data sharing for the Spark drivers the tests start (every participant is one).

Why: a participant's local Spark driver loads ~15k classes at start. Measured with a cgroup's
CPU counter, starting a SparkWriter and its warm-up jobs took 10-11 CPU-s with C1 alone and
5.6-6.2 CPU-s with a dynamic CDS archive of those classes; the suite starts well over a
hundred drivers and is CPU-bound on 2 cores.

The archive is written once per checkout's virtualenv (in the user's cache, ``~/.cache/hudi-
sink/spark-cds/``, named by the JVM and the directory and contents of pyspark's jars: a
dynamic archive maps only for the exact class path it was dumped with, so a clean clone dumps
its own, and archives of clones that are gone are removed) by a throwaway SparkWriter run,
before the test workers start, and handed to the drivers through ``SPARK_SUBMIT_OPTS``: spark-
submit adds it to the driver JVM only (not to its launcher, whose stdout Spark parses), and
the product's own driver options (``spark.driver.extraJavaOptions``) are left as the services
set them. A driver that cannot map the archive logs a warning on stderr and starts without it;
if the dump fails, the tests run without an archive.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["driver_options"]

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hudi-sink" / "spark-cds"
JIT = "-XX:TieredStopAtLevel=1"
"""C1 only: see ``TEST_JVM_OPTIONS`` in conftest.py."""
#: JVM log lines (a CDS mismatch warning among them) go to stderr, never to stdout.
QUIET = "-Xlog:disable -Xlog:all=warning:stderr"
DUMP_TIMEOUT_S = 300

_WARM_UP = """
import sys, tempfile
from hudi_sink.services.participant.spark_writer import SparkWriter
from hudi_sink.shared.config.settings import SparkConfig
from hudi_sink.shared.storage.fs import LocalFileSystem
writer = SparkWriter(SparkConfig(), LocalFileSystem())
writer.start(tempfile.mkdtemp())
writer.stop()
"""
"""What a participant does at start: the archive holds the classes of exactly that."""


def _stamp() -> str:
    """The JVM binary and pyspark's jars: the archive is only valid for the ones it was
    dumped from."""
    digest = hashlib.sha256()
    java = shutil.which("java") or "java"
    digest.update(os.path.realpath(java).encode())
    jars = _jars_dir()
    digest.update(str(jars).encode())  # the class path's own text must match, not only the jars
    for jar in sorted(jars.glob("*.jar")):
        digest.update(jar.name.encode() + b"\0" + str(jar.stat().st_size).encode())
    return digest.hexdigest()[:16]


def _jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def _drop_stale(keep: Path) -> None:
    """Archives of checkouts that are gone (each clean clone dumps its own: ~170 MB)."""
    for record in CACHE.glob("spark-driver-*.jars"):
        archive = record.with_suffix(".jsa")
        if archive != keep and not Path(record.read_text().strip()).is_dir():
            archive.unlink(missing_ok=True)
            record.unlink(missing_ok=True)


def _archive() -> Path | None:
    """The archive for this machine, dumped first if missing; None if that failed. A lock
    makes concurrent pytest processes dump it once."""
    import fcntl

    CACHE.mkdir(parents=True, exist_ok=True)
    archive = CACHE / f"spark-driver-{_stamp()}.jsa"
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.is_file():
            return archive
        dump = archive.with_name(f"{archive.name}.{os.getpid()}.{time.monotonic_ns()}")
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_SUBMIT_OPTS": f"{JIT} {QUIET} -XX:ArchiveClassesAtExit={dump}"}
        try:
            result = subprocess.run([sys.executable, "-c", _WARM_UP], env=env, timeout=DUMP_TIMEOUT_S,
                                    capture_output=True, text=True, check=False)
        except subprocess.TimeoutExpired:
            result = None
        if result is None or result.returncode != 0 or not dump.is_file():
            dump.unlink(missing_ok=True)
            detail = "timed out" if result is None else result.stderr[-2000:]
            print(f"spark_cds: no archive, drivers start without one: {detail}", file=sys.stderr)
            return None
        os.replace(dump, archive)
        archive.with_suffix(".jars").write_text(f"{_jars_dir()}\n")
        _drop_stale(archive)
        return archive


def driver_options() -> str:
    """``SPARK_SUBMIT_OPTS`` for the tests' Spark drivers: C1, quiet JVM logs and, where it
    could be dumped, the class-data-sharing archive."""
    archive = _archive()
    sharing = f" -XX:SharedArchiveFile={archive}" if archive is not None else ""
    return f"{JIT} {QUIET}{sharing}"
