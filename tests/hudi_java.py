"""Apache Hudi's own Java reader (``tests/java/hudi-reader``) as the authority on our tables.

hudi-rs is an independent reader, but it is not Hudi: where the two disagree, Hudi's Java
libraries (1.0.2, the release line Spark and Hive users run on table version 6) are right.
:func:`read_tables` runs the reader — one JVM for any number of reads, since the JVM's start is
most of the cost — and :func:`assert_same_rows` compares its rows with a hudi-rs read, every
column and every row (a multiset: order is not part of a table).

The reader is built on first use: ``scripts/resolve-java.sh`` resolves the pom's pinned jars
into the user's Maven repository (``~/.m2``) and checks them, javac compiles into
``.tools/hudi-reader/`` (git-ignored); a stamp of sources and classpath makes later calls skip
both. Importable from unit
and integration tests (``tests/`` is on ``sys.path``).
"""

from __future__ import annotations

import base64
import datetime as dt
import fcntl
import hashlib
import json
import math
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

__all__ = ["ReadRequest", "JavaRead", "build", "read_tables", "read_table", "s3a_request",
           "arrow_rows", "assert_same_rows"]

ROOT = Path(__file__).resolve().parents[1]
MODULE = ROOT / "tests" / "java" / "hudi-reader"
CACHE = ROOT / ".tools" / "hudi-reader"
#: Written by scripts/resolve-java.sh: the pom's runtime jars, checked against artifacts.sha256.
CLASSPATH = ROOT / ".tools" / "java" / "hudi-reader.classpath"
MAIN_CLASS = "org.hudisink.reader.HudiReader"
#: Small heap and quick start: rows are streamed, the largest test table is ~40k rows.
JVM_OPTIONS = ["-Xmx512m", "-Xss4m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class ReadRequest:
    """One read: a snapshot, or time travel ``as_of`` an instant; ``columns`` narrows it;
    ``conf`` holds Hadoop settings (the ``fs.s3a.*`` of an object store)."""

    base_path: str
    as_of: str | None = None
    columns: tuple[str, ...] = ()
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass
class JavaRead:
    """What Hudi's reader returned: columns in table-schema order, one tuple per row, the
    instant the read was as of (the latest completed one for a snapshot; ``None`` for a table
    without any) and the base files it read."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    query_instant: str | None
    files: list[str]

    @property
    def num_rows(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list[Any]:
        index = self.columns.index(name)
        return [row[index] for row in self.rows]

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def _stamp() -> str:
    """The sources and the resolved classpath: a change to either needs a new build."""
    digest = hashlib.sha256()
    for path in sorted([MODULE / "pom.xml", CLASSPATH, *(MODULE / "src").rglob("*.java")]):
        if path.is_file():
            digest.update(str(path).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def build() -> list[str]:
    """The reader's classpath, built first unless the build in ``.tools/hudi-reader/`` matches
    the sources: ``scripts/resolve-java.sh`` resolves and checks the pom's jars (Maven, once),
    then javac compiles. A lock makes concurrent first uses (several pytest processes) build
    once."""
    CACHE.mkdir(parents=True, exist_ok=True)
    stamp_file, classes = CACHE / "stamp", CACHE / "classes"
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (stamp_file.exists() and stamp_file.read_text() == _stamp() and classes.is_dir()):
            stamp_file.unlink(missing_ok=True)
            _run([str(ROOT / "scripts" / "resolve-java.sh")], "resolving the reader's jars")
            if shutil.which("javac") is None:
                raise RuntimeError("javac not found: Hudi's Java reader needs a JDK 17 "
                                   "(e.g. apt-get install -y openjdk-17-jdk-headless)")
            shutil.rmtree(classes, ignore_errors=True)
            _run(["javac", "--release", "17", "-nowarn", "-d", str(classes), "-cp",
                  CLASSPATH.read_text().strip(), *map(str, (MODULE / "src").rglob("*.java"))],
                 "compiling the reader")
            stamp_file.write_text(_stamp())
    return [str(classes), *CLASSPATH.read_text().strip().split(os.pathsep)]


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800,
                            check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed ({' '.join(command[:2])}…, exit {result.returncode}):\n"
                           f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")


def read_tables(requests: Sequence[ReadRequest], timeout_s: float = 300) -> list[JavaRead]:
    """Run every request in one JVM; a failing read raises with the reader's error output."""
    if not requests:
        return []
    classpath = build()
    args = [json.dumps({"base_path": r.base_path, "as_of": r.as_of, "columns": list(r.columns),
                        "conf": dict(r.conf)}) for r in requests]
    result = subprocess.run(["java", *JVM_OPTIONS, "-cp", os.pathsep.join(classpath), MAIN_CLASS, *args],
                            capture_output=True, timeout=timeout_s, check=False)
    if result.returncode != 0:
        raise AssertionError(f"Hudi's Java reader failed ({result.returncode}) on {requests}:\n"
                             f"{result.stderr.decode(errors='replace')[-6000:]}")
    reads: list[JavaRead] = []
    for line in result.stdout.splitlines():
        value = json.loads(line)
        if isinstance(value, dict):
            reads.append(JavaRead(value["columns"], [], value["query_instant"], value["files"]))
        else:
            reads[-1].rows.append(tuple(value))
    if len(reads) != len(requests):
        raise AssertionError(f"Hudi's Java reader answered {len(reads)} of {len(requests)} reads")
    return reads


def read_table(base_path: str, as_of: str | None = None, columns: Sequence[str] = (),
               conf: Mapping[str, str] | None = None) -> JavaRead:
    """One read (one JVM); batch several with :func:`read_tables`."""
    return read_tables([ReadRequest(base_path, as_of, tuple(columns), conf or {})])[0]


def s3a_request(uri: str, storage_options: Mapping[str, str], as_of: str | None = None) -> ReadRequest:
    """A read of an ``s3://`` table through Hadoop's S3A, configured from the hudi-rs storage
    options (``aws_endpoint_url`` …) the tests use, path-style as moto needs."""
    endpoint = storage_options["aws_endpoint_url"]
    conf = {
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.endpoint.region": storage_options.get("aws_region", "us-east-1"),
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https:")).lower(),
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.access.key": storage_options["aws_access_key_id"],
        "fs.s3a.secret.key": storage_options["aws_secret_access_key"],
    }
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme not in ("s3", "s3a"):
        raise ValueError(f"not an s3:// URI: {uri}")
    return ReadRequest(f"s3a://{rest}", as_of, conf=conf)


def _plain(value: Any, kind: pa.DataType) -> Any:
    """An Arrow value (``to_pylist``) of type ``kind`` in the reader's JSON form: timestamps
    as epoch microseconds, dates as epoch days, decimals as plain strings, bytes as base64,
    maps as objects, non-finite floats as Jackson spells them."""
    if value is None:
        return None
    if pa.types.is_timestamp(kind):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return (aware - EPOCH) // dt.timedelta(microseconds=1)
    if pa.types.is_date32(kind):
        return (value - EPOCH.date()).days
    if pa.types.is_decimal(kind):
        return format(value, "f")
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return base64.b64encode(value).decode()
    if pa.types.is_floating(kind) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if pa.types.is_struct(kind):
        return {f.name: _plain(value[f.name], f.type) for f in kind}
    if pa.types.is_map(kind):
        return {str(k): _plain(v, kind.item_type) for k, v in value}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return [_plain(v, kind.value_type) for v in value]
    return value


def arrow_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of a hudi-rs read in the Java reader's value form."""
    kinds = {f.name: f.type for f in table.schema}
    return [{k: _plain(v, kinds[k]) for k, v in row.items()} for row in table.to_pylist()]


def _canonical(row: Mapping[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, ensure_ascii=False)


def assert_same_rows(java: JavaRead, rust: pa.Table, what: str) -> None:
    """Hudi's rows and hudi-rs's rows are the same multiset, every column compared; on a
    difference, a readable sample of rows only one of them returned."""
    if java.num_rows == 0 and rust.num_rows == 0:
        return
    if set(java.columns) != set(rust.column_names):
        raise AssertionError(f"{what}: columns differ: Hudi {java.columns}, hudi-rs {rust.column_names}")
    ours = Counter(_canonical(row) for row in java.dicts())
    theirs = Counter(_canonical(row) for row in arrow_rows(rust))
    if ours == theirs:
        return
    only_java, only_rust = ours - theirs, theirs - ours
    raise AssertionError(
        f"{what}: Hudi's Java reader and hudi-rs disagree (Hudi {java.num_rows} rows, hudi-rs "
        f"{rust.num_rows}; {sum(only_java.values())} only in Hudi, {sum(only_rust.values())} only "
        f"in hudi-rs; query instant {java.query_instant})\n"
        f"only in Hudi: {list(only_java)[:3]}\nonly in hudi-rs: {list(only_rust)[:3]}")
