"""Apache Hudi's own Java reader (``tests/java/hudi-reader``) as the authority on our tables.

hudi-rs is an independent reader, but it is not Hudi: where the two disagree, Hudi's Java
libraries (1.0.2, the release line Spark and Hive users run on table version 6) are right.
:func:`read_tables` runs the reader — one JVM for any number of reads, since the JVM's start is
most of the cost — and :func:`assert_same_rows` compares its rows with a hudi-rs read, every
column and every row (a multiset: order is not part of a table).

The reader is built on first use: ``scripts/resolve-java.sh`` resolves the pom's pinned jars
into the user's Maven repository (``~/.m2``) and checks them, javac compiles into
``.tools/hudi-reader/reader-<stamp>.jar`` (git-ignored); the stamp of sources and classpath
makes later calls skip both. The first read also writes a class-data-sharing archive beside
the jar, which later JVMs map to start faster. Importable from unit
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
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hudi import HudiReadOptions, HudiTableBuilder

__all__ = ["ReadRequest", "JavaRead", "Build", "build", "read_tables", "read_table", "s3a_request",
           "arrow_rows", "assert_same_rows", "rust_read", "read_agreed"]

ROOT = Path(__file__).resolve().parents[1]
MODULE = ROOT / "tests" / "java" / "hudi-reader"
CACHE = ROOT / ".tools" / "hudi-reader"
#: Written by scripts/resolve-java.sh: the pom's runtime jars, checked against artifacts.sha256.
CLASSPATH = ROOT / ".tools" / "java" / "hudi-reader.classpath"
MAIN_CLASS = "org.hudisink.reader.HudiReader"
#: Small heap and quick start: rows are streamed, the largest test table is ~40k rows.
READ_TIMEOUT_S = 300
#: JVM log lines (class-data sharing's warnings among them) go to stderr: stdout is the rows.
JVM_OPTIONS = ["-Xmx512m", "-Xss4m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Xlog:disable", "-Xlog:all=warning:stderr"]
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


@dataclass(frozen=True)
class Build:
    """A build of the reader: its jar (named by the stamp of sources and classpath, so a JVM
    still running an older build never sees its classes change), the full classpath, and the
    class-data-sharing archive the first read writes and later reads map (~0.4 s of CPU less
    per JVM start; a JVM that cannot use it runs without)."""

    jar: Path
    classpath: list[str]

    @property
    def archive(self) -> Path:
        return self.jar.with_suffix(".jsa")


def build() -> Build:
    """The reader, built first unless ``.tools/hudi-reader/`` has a build of these sources
    and jars: ``scripts/resolve-java.sh`` resolves and checks the pom's jars (Maven, once),
    then javac and jar. A lock makes concurrent first uses (several pytest processes) build
    once."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        jar = CACHE / f"reader-{_stamp()[:16]}.jar"
        if not jar.is_file():
            _run([str(ROOT / "scripts" / "resolve-java.sh")], "resolving the reader's jars")
            jar = CACHE / f"reader-{_stamp()[:16]}.jar"  # the classpath may have changed
        if not jar.is_file():
            _compile(jar)
        os.utime(jar)  # its last use: what _compile's pruning goes by
    return Build(jar, [str(jar), *CLASSPATH.read_text().strip().split(os.pathsep)])


def _compile(jar: Path) -> None:
    """javac and jar into temporary names renamed to ``jar`` when complete; builds no JVM
    has used for twice the longest read are removed with their archives."""
    if shutil.which("javac") is None or shutil.which("jar") is None:
        raise RuntimeError("javac/jar not found: Hudi's Java reader needs a JDK 17 "
                           "(e.g. apt-get install -y openjdk-17-jdk-headless)")
    classes, partial = CACHE / f"classes-{os.getpid()}", CACHE / f"partial-{os.getpid()}.jar"
    shutil.rmtree(classes, ignore_errors=True)
    _run(["javac", "--release", "17", "-nowarn", "-d", str(classes), "-cp",
          CLASSPATH.read_text().strip(), *map(str, (MODULE / "src").rglob("*.java"))],
         "compiling the reader")
    _run(["jar", "cf", str(partial), "-C", str(classes), "."], "packing the reader")
    shutil.rmtree(classes)
    partial.rename(jar)
    for stale in CACHE.glob("reader-*.jar"):
        if stale != jar and time.time() - stale.stat().st_mtime > 2 * READ_TIMEOUT_S:
            stale.unlink(missing_ok=True)
            stale.with_suffix(".jsa").unlink(missing_ok=True)


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800,
                            check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed ({' '.join(command[:2])}…, exit {result.returncode}):\n"
                           f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")


def read_tables(requests: Sequence[ReadRequest], timeout_s: float = READ_TIMEOUT_S) -> list[JavaRead]:
    """Run every request in one JVM; a failing read raises with the reader's error output."""
    if not requests:
        return []
    reader = build()
    args = [json.dumps({"base_path": r.base_path, "as_of": r.as_of, "columns": list(r.columns),
                        "conf": dict(r.conf)}) for r in requests]
    dump = reader.archive.with_name(f"{reader.archive.name}.{os.getpid()}.{time.monotonic_ns()}")
    sharing = (f"-XX:SharedArchiveFile={reader.archive}" if reader.archive.is_file()
               else f"-XX:ArchiveClassesAtExit={dump}")
    result = subprocess.run(["java", *JVM_OPTIONS, sharing, "-cp", os.pathsep.join(reader.classpath),
                             MAIN_CLASS, *args], capture_output=True, timeout=timeout_s, check=False)
    if dump.is_file():
        if result.returncode == 0:
            os.replace(dump, reader.archive)
        dump.unlink(missing_ok=True)
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


def _is_flat(kind: pa.DataType) -> bool:
    """Types whose ``to_pylist`` values already are the reader's JSON values."""
    return (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_integer(kind)
            or pa.types.is_boolean(kind))


def _column_values(table: pa.Table, name: str) -> list[Any]:
    """One column of a hudi-rs read in the reader's value form, converted by Arrow where it
    can (a 20,000-row table compares in a fraction of a second)."""
    kind = table.schema.field(name).type
    column = table.column(name)
    if pa.types.is_timestamp(kind):
        return column.cast(pa.timestamp("us", kind.tz)).cast(pa.int64()).to_pylist()
    if pa.types.is_date32(kind):
        return column.cast(pa.int32()).to_pylist()
    values = column.to_pylist()
    if _is_flat(kind) or (pa.types.is_floating(kind) and pc.all(pc.is_finite(column)).as_py() is not False):
        return values
    return [_plain(v, kind) for v in values]


def _hashable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True, ensure_ascii=False) if isinstance(value, (dict, list)) else value


def _row_counts(columns: list[list[Any]]) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(_hashable(v) for v in row) for row in zip(*columns, strict=True))


def arrow_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of a hudi-rs read in the Java reader's value form."""
    columns = [_column_values(table, name) for name in table.column_names]
    return [dict(zip(table.column_names, row, strict=True)) for row in zip(*columns, strict=True)]


def assert_same_rows(java: JavaRead, rust: pa.Table, what: str) -> None:
    """Hudi's rows and hudi-rs's rows are the same multiset, every column compared; on a
    difference, a readable sample of rows only one of them returned."""
    if java.num_rows == 0 and rust.num_rows == 0:
        return
    if set(java.columns) != set(rust.column_names):
        raise AssertionError(f"{what}: columns differ: Hudi {java.columns}, hudi-rs {rust.column_names}")
    ours = _row_counts([list(column) for column in zip(*java.rows, strict=True)] if java.rows
                       else [[] for _ in java.columns])
    theirs = _row_counts([_column_values(rust, name) for name in java.columns])
    if ours == theirs:
        return
    only_java, only_rust = ours - theirs, theirs - ours
    sample = {"Hudi": only_java, "hudi-rs": only_rust}
    raise AssertionError(
        f"{what}: Hudi's Java reader and hudi-rs disagree (Hudi {java.num_rows} rows, hudi-rs "
        f"{rust.num_rows}; {sum(only_java.values())} only in Hudi, {sum(only_rust.values())} only "
        f"in hudi-rs; query instant {java.query_instant}; columns {java.columns})\n"
        + "\n".join(f"only in {who}: {list(rows)[:3]}" for who, rows in sample.items()))


def rust_read(base_uri: str, as_of: str | None = None,
              storage_options: Mapping[str, str] | None = None) -> pa.Table:
    """A hudi-rs read (a snapshot, or as of an instant); an empty table reads as one ``id``
    column without rows."""
    builder = HudiTableBuilder.from_base_uri(base_uri)
    if storage_options:
        builder = builder.with_storage_options(dict(storage_options))
    options = HudiReadOptions() if as_of is None else HudiReadOptions().with_as_of_timestamp(as_of)
    batches = builder.build().read(options)
    return pa.Table.from_batches(batches) if batches else pa.table({"id": pa.array([], pa.string())})


def read_agreed(base_uri: str, *as_of: str | None,
                storage_options: Mapping[str, str] | None = None) -> list[tuple[JavaRead, pa.Table]]:
    """Hudi's reads of the table (one JVM; ``None`` is a snapshot), each asserted to hold the
    same rows as hudi-rs as of the instant Hudi's read used (a table being written moves on
    between the two). ``s3://`` tables go through S3A with the same ``storage_options``."""
    instants = as_of or (None,)
    if base_uri.startswith(("s3://", "s3a://")):
        requests = [s3a_request(base_uri, storage_options or {}, instant) for instant in instants]
    else:
        requests = [ReadRequest(base_uri, instant) for instant in instants]
    pairs = []
    for instant, java in zip(instants, read_tables(requests), strict=True):
        rust = rust_read(base_uri, java.query_instant, storage_options)
        assert_same_rows(java, rust, f"{base_uri} as of {instant or 'now'}")
        pairs.append((java, rust))
    return pairs
