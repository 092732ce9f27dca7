"""A Copy-on-Write Hudi table (table version 6, timeline layout 1) written without Java.

Only what an append-only, exactly-once sink needs: create the table, run the commit protocol
(requested -> inflight -> staged files placed -> ``<T>.commit``), roll back failed instants and
read the timeline back. The on-disk format follows ``reference/hudi-table-format.md``; the
relevant section is cited where a choice is not obvious.

The single source of truth for "is this data committed" is the existence of ``<T>.commit``:
it is created exclusively (never overwritten) and only after every file it lists is in place,
so readers see an instant completely or not at all.

Durability: every timeline and properties file is written with ``write_atomic`` or
``create_exclusive``, which return only once content and directory entry are synced (temp file
+ fsync + rename/link + directory fsync), so a ``<T>.commit`` that survives a power loss is
complete. Data files are moved with a plain rename; making them durable before the commit file
exists is the committer's job (one sync per file, one per directory, for the whole commit).
"""

from __future__ import annotations

import posixpath
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from shared.config import TableConfig
from shared.errors import ConfigError, TableFormatError
from shared.fs import FileSystem
from shared.hudi.naming import ensure_inside, is_instant_time, parse_base_file_name
from shared.schema import TableSchema

__all__ = [
    "TABLE_VERSION",
    "TIMELINE_LAYOUT_VERSION",
    "InstantState",
    "Instant",
    "WriteStat",
    "HudiTable",
    "build_commit_metadata",
    "format_properties",
    "parse_properties",
]

TABLE_VERSION = "6"
TIMELINE_LAYOUT_VERSION = "1"
COMMIT_ACTION = "commit"
METAFOLDER = ".hoodie"
PROPERTIES_FILE = "hoodie.properties"
PARTITION_METADATA_FILE = ".hoodie_partition_metadata"

_SIMPLE_KEYGEN = "org.apache.hudi.keygen.SimpleKeyGenerator"
_NONPARTITIONED_KEYGEN = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"

# Commit-action timeline files of layout 1 (reference §1/§4): <T>.commit.requested,
# <T>.inflight (the commit action's inflight has no action infix), <T>.commit.
_COMMIT_FILE = re.compile(r"^(\d{14}|\d{17})\.(commit\.requested|inflight|commit)$")
# Any timeline file of any action/state, e.g. <T>.replacecommit.inflight or <T>.rollback.
_ANY_INSTANT_FILE = re.compile(r"^(\d{14}|\d{17})\.[a-z]")


class InstantState(StrEnum):
    """Life cycle of an instant on the timeline."""

    REQUESTED = "REQUESTED"
    INFLIGHT = "INFLIGHT"
    COMPLETED = "COMPLETED"


_SUFFIX_STATE = {
    "commit.requested": InstantState.REQUESTED,
    "inflight": InstantState.INFLIGHT,
    "commit": InstantState.COMPLETED,
}
_STATE_ORDER = {InstantState.REQUESTED: 0, InstantState.INFLIGHT: 1, InstantState.COMPLETED: 2}


@dataclass(frozen=True)
class Instant:
    """One timeline file of a commit action."""

    time: str
    action: str
    state: InstantState


# ------------------------------------------------------------------------------------------
# hoodie.properties (Java Properties syntax)


def _escape(text: str, *, is_key: bool) -> str:
    """Java ``Properties.store`` escaping, restricted to what both readers agree on.

    ``:`` and ``=`` are escaped (Java unescapes them; hudi-rs strips ``\\:`` in the schema and
    splits at the first ``=``, which an escaped ``\\=`` never is for our plain keys). Non-ASCII
    becomes ``\\uXXXX`` because Java loads the file as ISO-8859-1.
    """
    out: list[str] = []
    for index, ch in enumerate(text):
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch in ":=" or (is_key and ch in "#! "):
            out.append("\\" + ch)
        elif ch == " " and index == 0:
            out.append("\\ ")
        elif ch in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[ch])
        elif code < 0x20 or code > 0x7E:
            encoded = ch.encode("utf-16-be")
            for unit in range(0, len(encoded), 2):
                out.append(f"\\u{int.from_bytes(encoded[unit:unit + 2], 'big'):04x}")
        else:
            out.append(ch)
    return "".join(out)


def format_properties(properties: dict[str, str], header: str = "Hudi table config") -> bytes:
    """Serialise ``key=value`` lines; the result is pure ASCII."""
    lines = [f"#{header}"]
    lines.extend(
        f"{_escape(key, is_key=True)}={_escape(value, is_key=False)}"
        for key, value in properties.items()
    )
    return ("\n".join(lines) + "\n").encode("ascii")


def _unescape(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        ch = text[index]
        if ch != "\\" or index + 1 == len(text):
            out.append(ch)
            index += 1
            continue
        nxt = text[index + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[index + 2:index + 6]):
            out.append(chr(int(text[index + 2:index + 6], 16)))
            index += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        index += 2
    # \uXXXX pairs may have produced surrogates; join them back into real characters.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


def _logical_lines(text: str) -> Iterable[str]:
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java Properties text (comments, ``=``/``:``/space separators, escapes)."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        index = 0
        while index < len(line):
            ch = line[index]
            if ch == "\\":
                index += 2
                continue
            if ch in "=: \t\f":
                break
            index += 1
        key, rest = line[:index], line[index:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        result[_unescape(key)] = _unescape(rest)
    return result


# ------------------------------------------------------------------------------------------
# Commit metadata


@dataclass(frozen=True)
class WriteStat:
    """One new base file of an instant, as listed in ``partitionToWriteStats`` (reference §4).

    The sink only ever creates new file groups, so ``prevCommit`` is always ``"null"`` and the
    update/delete counters are zero.
    """

    file_id: str
    path: str
    partition_path: str
    num_writes: int
    num_inserts: int
    file_size_bytes: int
    total_write_bytes: int

    def to_json(self) -> dict[str, Any]:
        """Every field of Hudi's HoodieWriteStat JSON, so Java readers find no surprise."""
        return {
            "fileId": self.file_id,
            "path": self.path,
            "prevCommit": "null",
            "numWrites": self.num_writes,
            "numDeletes": 0,
            "numUpdateWrites": 0,
            "numInserts": self.num_inserts,
            "totalWriteBytes": self.total_write_bytes,
            "totalWriteErrors": 0,
            "partitionPath": self.partition_path,
            "fileSizeInBytes": self.file_size_bytes,
            "totalLogRecords": 0,
            "totalLogFilesCompacted": 0,
            "totalLogSizeCompacted": 0,
            "totalUpdatedRecordsCompacted": 0,
            "totalLogBlocks": 0,
            "totalCorruptLogBlock": 0,
            "totalRollbackBlocks": 0,
            "minEventTime": None,
            "maxEventTime": None,
            "tempPath": None,
            "cdcStats": None,
            "runtimeStats": None,
            "baseFile": None,
            "logFiles": None,
            "logVersion": None,
            "logOffset": None,
            "totalLogFiles": None,
            "totalLogReadTimeMs": 0,
            "numUpdates": 0,
        }

    @classmethod
    def from_json(cls, data: Any) -> WriteStat:
        """Parse one write stat; TableFormatError when a field is missing or mistyped."""
        if not isinstance(data, dict):
            raise TableFormatError(f"write stat must be an object, got {type(data).__name__}")

        def text(key: str) -> str:
            value = data.get(key)
            if not isinstance(value, str):
                raise TableFormatError(f"write stat field {key!r} must be a string: {value!r}")
            return value

        def number(key: str) -> int:
            value = data.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TableFormatError(f"write stat field {key!r} must be an integer: {value!r}")
            return value

        return cls(
            file_id=text("fileId"),
            path=text("path"),
            partition_path=text("partitionPath"),
            num_writes=number("numWrites"),
            num_inserts=number("numInserts"),
            file_size_bytes=number("fileSizeInBytes"),
            total_write_bytes=number("totalWriteBytes"),
        )


def _check_stat(stat: WriteStat) -> str:
    """Validate a stat's path against its partition and file id; return the file's instant.

    A data path must be normalised, must not start with ``.`` (so it can never land in
    ``.hoodie``) and its file name must be a base file name of ``stat.file_id``: hudi-rs builds
    file groups from these names, so a mismatch would corrupt the table view.
    """
    path = stat.path
    if not path or path.startswith("/") or posixpath.normpath(path) != path:
        raise TableFormatError(f"write stat path {path!r} is not a normalised relative path")
    if path.split("/", 1)[0].startswith("."):
        raise TableFormatError(f"write stat path {path!r} points into a hidden directory")
    directory, name = posixpath.split(path)
    if directory != stat.partition_path:
        raise TableFormatError(
            f"write stat path {path!r} is not in partition {stat.partition_path!r}"
        )
    parsed = parse_base_file_name(name)
    if parsed is None or parsed.file_id != stat.file_id:
        raise TableFormatError(
            f"write stat path {path!r} is not a base file of file id {stat.file_id!r}"
        )
    return parsed.instant


def build_commit_metadata(
    stats: list[WriteStat], extra_metadata: dict[str, str], operation: str = "INSERT"
) -> dict[str, Any]:
    """HoodieCommitMetadata JSON for a set of new files (one write stat per file).

    ``extraMetadata.schema`` is mandatory: hudi-rs and Java take the table schema from the
    latest commit's ``schema``. Two stats for the same (partition, fileId) are refused because
    readers fail the whole read on duplicate file slices.
    """
    if not isinstance(extra_metadata.get("schema"), str) or not extra_metadata["schema"]:
        raise ValueError("extra_metadata must contain the Avro writer schema under 'schema'")
    for key, value in extra_metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"extra_metadata entries must be strings: {key!r}={value!r}")
    by_partition: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, str]] = set()
    for stat in stats:
        _check_stat(stat)
        group = (stat.partition_path, stat.file_id)
        if group in seen:
            raise ValueError(f"two write stats for file group {group}")
        seen.add(group)
        by_partition.setdefault(stat.partition_path, []).append(stat.to_json())
    return {
        "partitionToWriteStats": by_partition,
        "compacted": False,
        "extraMetadata": dict(extra_metadata),
        "operationType": operation,
    }


def _stats_of(metadata: dict[str, Any]) -> list[WriteStat]:
    partitions = metadata.get("partitionToWriteStats")
    if not isinstance(partitions, dict):
        raise TableFormatError("commit metadata has no partitionToWriteStats object")
    stats: list[WriteStat] = []
    for partition, entries in partitions.items():
        if not isinstance(entries, list):
            raise TableFormatError(f"write stats of partition {partition!r} must be a list")
        for entry in entries:
            stat = WriteStat.from_json(entry)
            if stat.partition_path != partition:
                raise TableFormatError(
                    f"write stat of {stat.path!r} listed under partition {partition!r}"
                )
            stats.append(stat)
    return stats


# ------------------------------------------------------------------------------------------
# The table


class HudiTable:
    """A v6 COW table at ``base_path`` accessed through ``fs``.

    Paths are joined with ``/`` and never normalised as a whole, so the same code works for
    URIs once an object-store FileSystem exists; every path derived from data (partition
    values, stats, file lists) goes through :func:`ensure_inside`.
    """

    #: Also reachable as a method, for callers holding only the table.
    build_commit_metadata = staticmethod(build_commit_metadata)

    def __init__(self, fs: FileSystem, base_path: str) -> None:
        if not base_path:
            raise ValueError("base_path must not be empty")
        self.fs = fs
        self.base_path = base_path.rstrip("/") or "/"
        self.meta_path = ensure_inside(self.base_path, METAFOLDER)
        self.properties_path = ensure_inside(self.meta_path, PROPERTIES_FILE)

    # -- properties --------------------------------------------------------------------

    @staticmethod
    def table_properties(table: TableConfig, schema: TableSchema) -> dict[str, str]:
        """The recommended v6 key set (reference §3), metadata table left off."""
        props: dict[str, str] = {
            "hoodie.table.name": table.name,
            "hoodie.table.type": "COPY_ON_WRITE",
            "hoodie.table.version": TABLE_VERSION,
            "hoodie.timeline.layout.version": TIMELINE_LAYOUT_VERSION,
            "hoodie.database.name": table.database,
            "hoodie.table.recordkey.fields": table.record_key_field,
        }
        if table.partition_field is not None:
            props["hoodie.table.partition.fields"] = table.partition_field
        props.update(
            {
                "hoodie.table.keygenerator.class": (
                    _SIMPLE_KEYGEN if table.partition_field is not None else _NONPARTITIONED_KEYGEN
                ),
                "hoodie.table.base.file.format": "PARQUET",
                "hoodie.populate.meta.fields": "true",
                "hoodie.datasource.write.hive_style_partitioning": (
                    "true" if table.hive_style_partitioning else "false"
                ),
                # Partition values are percent-encoded by naming.encode_partition_value.
                "hoodie.datasource.write.partitionpath.urlencode": "true",
                "hoodie.datasource.write.drop.partition.columns": "false",
                "hoodie.table.timeline.timezone": "UTC",
                "hoodie.archivelog.folder": "archived",
                "hoodie.table.create.schema": schema.avro_schema_json(),
            }
        )
        if table.precombine_field is not None:
            props["hoodie.table.precombine.field"] = table.precombine_field
        # Java validates the checksum whenever the key is present, so it must be exact.
        props["hoodie.table.checksum"] = str(
            zlib.crc32(f"{table.database}.{table.name}".encode())
        )
        return props

    def is_initialized(self) -> bool:
        """Whether ``.hoodie/hoodie.properties`` exists."""
        return self.fs.exists(self.properties_path)

    def initialize(self, table: TableConfig, schema: TableSchema) -> None:
        """Create the table if needed, else check that it is the table the config describes.

        The properties file is created exclusively, so two processes initialising at once
        cannot both write it: the loser validates the winner's file like any existing one.
        """
        self.fs.makedirs(self.meta_path)
        if not self.fs.exists(self.properties_path):
            data = format_properties(self.table_properties(table, schema))
            if self.fs.create_exclusive(self.properties_path, data):
                return
        self._validate_properties(self.read_properties(), table)

    def read_properties(self) -> dict[str, str]:
        """``hoodie.properties`` as a dict (Java syntax, ISO-8859-1 like Java reads it)."""
        try:
            raw = self.fs.read_bytes(self.properties_path)
        except FileNotFoundError:
            raise TableFormatError(
                f"not a Hudi table: {self.properties_path} does not exist"
            ) from None
        return parse_properties(raw.decode("latin-1"))

    @staticmethod
    def _validate_properties(props: dict[str, str], table: TableConfig) -> None:
        version = props.get("hoodie.table.version")
        if version != TABLE_VERSION:
            raise TableFormatError(
                f"table version {version!r} is not supported (only {TABLE_VERSION})"
            )
        layout = props.get("hoodie.timeline.layout.version", TIMELINE_LAYOUT_VERSION)
        if layout != TIMELINE_LAYOUT_VERSION:
            raise TableFormatError(f"timeline layout {layout!r} is not supported")
        table_type = props.get("hoodie.table.type", "COPY_ON_WRITE")
        if table_type != "COPY_ON_WRITE":
            raise TableFormatError(f"table type {table_type!r} is not supported")
        if props.get("hoodie.table.metadata.partitions", "").strip():
            # A metadata table we would not update would make Java readers miss our files.
            raise TableFormatError("the table has a metadata table, which this writer cannot keep")
        existing_name = props.get("hoodie.table.name")
        if existing_name != table.name:
            raise ConfigError(
                f"existing table is named {existing_name!r}, config says {table.name!r}",
                "table.name",
            )
        existing_key = props.get("hoodie.table.recordkey.fields")
        if existing_key != table.record_key_field:
            raise ConfigError(
                f"existing table has record key {existing_key!r}, "
                f"config says {table.record_key_field!r}",
                "table.record_key_field",
            )
        existing_partition = props.get("hoodie.table.partition.fields", "").strip() or None
        if existing_partition != table.partition_field:
            raise ConfigError(
                f"existing table is partitioned by {existing_partition!r}, "
                f"config says {table.partition_field!r}",
                "table.partition_field",
            )
        hive = props.get("hoodie.datasource.write.hive_style_partitioning", "false").lower()
        if (hive == "true") != table.hive_style_partitioning:
            # Mixing "sf" and "country=sf" directories would break partition pruning.
            raise ConfigError(
                f"existing table has hive_style_partitioning={hive}",
                "table.hive_style_partitioning",
            )

    # -- timeline ----------------------------------------------------------------------

    def _timeline_path(self, instant: str, suffix: str) -> str:
        if not is_instant_time(instant):
            raise TableFormatError(f"not an instant time: {instant!r}")
        return f"{self.meta_path}/{instant}.{suffix}"

    def commit_path(self, instant: str) -> str:
        """``.hoodie/<T>.commit``: the file whose creation completes instant ``T``."""
        return self._timeline_path(instant, "commit")

    def list_instants(self) -> list[Instant]:
        """Commit-action timeline files directly in ``.hoodie/``, sorted by time then state."""
        instants: list[Instant] = []
        for info in self.fs.list_dir(self.meta_path):
            if info.is_dir:
                continue
            match = _COMMIT_FILE.match(info.name)
            if match is None:
                continue
            instants.append(Instant(match.group(1), COMMIT_ACTION, _SUFFIX_STATE[match.group(2)]))
        instants.sort(key=lambda i: (i.time, _STATE_ORDER[i.state]))
        return instants

    def completed_commits(self) -> list[str]:
        """Times of completed commits, oldest first."""
        return sorted(
            {i.time for i in self.list_instants() if i.state is InstantState.COMPLETED}
        )

    def pending_instants(self) -> list[str]:
        """Times of commits that were started but never completed (need roll back)."""
        instants = self.list_instants()
        completed = {i.time for i in instants if i.state is InstantState.COMPLETED}
        return sorted({i.time for i in instants} - completed)

    def latest_instant_time(self) -> str | None:
        """Greatest instant time on the timeline, of any action and state.

        New instants must be greater than this, including pending ones and instants other
        writers (Java clustering, rollbacks) may have left, so every timeline file counts.
        """
        times = [
            match.group(1)
            for info in self.fs.list_dir(self.meta_path)
            if not info.is_dir and (match := _ANY_INSTANT_FILE.match(info.name)) is not None
        ]
        return max(times, key=lambda t: t if len(t) == 17 else t + "000", default=None)

    def read_commit_metadata(self, instant: str) -> dict[str, Any]:
        """The JSON of ``<T>.commit``; TableFormatError when missing or not JSON."""
        path = self.commit_path(instant)
        try:
            data = orjson.loads(self.fs.read_bytes(path))
        except FileNotFoundError:
            raise TableFormatError(f"instant {instant} is not completed") from None
        except orjson.JSONDecodeError as exc:
            raise TableFormatError(f"{path} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise TableFormatError(f"{path} does not hold a JSON object")
        return data

    def latest_commit_metadata(self) -> dict[str, Any] | None:
        """Metadata of the newest completed commit (where the resume offsets live)."""
        completed = self.completed_commits()
        return self.read_commit_metadata(completed[-1]) if completed else None

    def start_instant(self, instant: str) -> None:
        """Write ``<T>.commit.requested`` (empty) then ``<T>.inflight``; safe to repeat.

        Refuses an instant that is already completed or older than the latest completed
        commit: instant times must only grow, or time travel and incremental reads break.
        """
        if self.fs.exists(self.commit_path(instant)):
            raise TableFormatError(f"instant {instant} is already completed")
        completed = self.completed_commits()
        if completed and instant < completed[-1]:
            raise TableFormatError(
                f"instant {instant} is older than the latest completed commit {completed[-1]}"
            )
        self.fs.write_atomic(self._timeline_path(instant, "commit.requested"), b"")
        inflight = {
            "partitionToWriteStats": {},
            "compacted": False,
            "extraMetadata": {},
            "operationType": "INSERT",
        }
        self.fs.write_atomic(self._timeline_path(instant, "inflight"), orjson.dumps(inflight))
        self.fs.makedirs(self.staging_dir(instant))

    # -- data files --------------------------------------------------------------------

    def staging_dir(self, instant: str) -> str:
        """Where participants write files of ``instant`` before the commit places them.

        Inside ``.hoodie`` so no reader ever lists a staged file as data.
        """
        if not is_instant_time(instant):
            raise TableFormatError(f"not an instant time: {instant!r}")
        return ensure_inside(self.meta_path, f".temp/{instant}")

    def staging_path(self, instant: str, partition_path: str, file_name: str) -> str:
        """Staged location of one file: ``.hoodie/.temp/<T>/<partition>/<file>``."""
        if not file_name or "/" in file_name or file_name in (".", ".."):
            raise TableFormatError(f"invalid file name {file_name!r}")
        relative = f"{partition_path}/{file_name}" if partition_path else file_name
        return ensure_inside(self.staging_dir(instant), relative)

    def final_path(self, stat: WriteStat) -> str:
        """Absolute location of a write stat's file (validated to stay in the table)."""
        _check_stat(stat)
        return ensure_inside(self.base_path, stat.path)

    def _relative(self, path: str) -> str:
        prefix = self.base_path.rstrip("/") + "/"
        if not path.startswith(prefix):
            raise TableFormatError(f"path {path!r} is outside the table {self.base_path!r}")
        relative = path[len(prefix):]
        ensure_inside(self.base_path, relative)
        return relative

    def _ensure_partition_metadata(self, partition_path: str, instant: str) -> None:
        """Write ``<partition>/.hoodie_partition_metadata`` once (reference §6).

        Exclusive create: several participants may place the first files of a partition
        concurrently; the first one wins and the file is never rewritten.
        """
        if not partition_path:
            return
        path = ensure_inside(self.base_path, f"{partition_path}/{PARTITION_METADATA_FILE}")
        if self.fs.exists(path):
            return
        depth = partition_path.count("/") + 1
        content = f"#partition metadata\ncommitTime={instant}\npartitionDepth={depth}\n"
        self.fs.create_exclusive(path, content.encode("ascii"))

    def place_file(self, staged_path: str, stat: WriteStat) -> None:
        """Move a staged file to ``<base>/<stat.path>``; idempotent for roll-forward.

        After a crash the same placement may run again: a missing staged file together with
        a final file of the expected size is success. A staged file whose size differs from
        the stat, or a different file already at the final path, is an error rather than a
        silent overwrite.

        The move is not durable by itself (``FileSystem.rename``): the caller syncs the file
        and the directories of a whole commit once, before ``complete_instant``.
        """
        instant = _check_stat(stat)
        final = ensure_inside(self.base_path, stat.path)
        staged = ensure_inside(self.base_path, self._relative(staged_path))
        staged_info = self.fs.file_info(staged)
        if staged_info is not None:
            if staged_info.size != stat.file_size_bytes:
                raise TableFormatError(
                    f"staged file {staged} has {staged_info.size} bytes, "
                    f"write stat says {stat.file_size_bytes}"
                )
            self._ensure_partition_metadata(stat.partition_path, instant)
            try:
                self.fs.rename(staged, final)
            except FileExistsError:
                raise TableFormatError(
                    f"cannot place {staged}: a different file exists at {final}"
                ) from None
            return
        final_info = self.fs.file_info(final)
        if final_info is not None and final_info.size == stat.file_size_bytes:
            return
        raise TableFormatError(f"staged file {staged} is missing and {final} is not in place")

    def list_data_files(self, instant: str) -> list[str]:
        """Relative paths of all base files written with ``instant`` (for recovery/rollback).

        Walks the whole table, so it is meant for rare recovery paths, not the commit path.
        """
        if not is_instant_time(instant):
            raise TableFormatError(f"not an instant time: {instant!r}")
        found: list[str] = []
        for info in self.fs.walk_files(self.base_path):
            relative = self._relative(info.path)
            if relative.split("/", 1)[0].startswith("."):
                continue
            parsed = parse_base_file_name(info.name)
            if parsed is not None and parsed.instant == instant:
                found.append(relative)
        return sorted(found)

    # -- completion and rollback -------------------------------------------------------

    def complete_instant(self, instant: str, metadata: dict[str, Any]) -> None:
        """Commit: create ``<T>.commit`` exclusively, after checking what it lists.

        Checks before the point of no return: the instant is started (a rolled-back instant
        can never be completed by a late coordinator), every stat names a base file of this
        instant that is in place, and ``extraMetadata.schema`` is present.
        """
        commit_path = self.commit_path(instant)
        if self.fs.exists(commit_path):
            raise TableFormatError(f"instant {instant} is already completed")
        if not self.fs.exists(self._timeline_path(instant, "inflight")):
            raise TableFormatError(
                f"instant {instant} is not inflight (never started, or rolled back)"
            )
        extra = metadata.get("extraMetadata")
        if not isinstance(extra, dict) or not isinstance(extra.get("schema"), str):
            raise TableFormatError("commit metadata must carry extraMetadata.schema")
        for stat in _stats_of(metadata):
            file_instant = _check_stat(stat)
            if file_instant != instant:
                raise TableFormatError(
                    f"{stat.path} belongs to instant {file_instant}, not {instant}"
                )
            if not self.fs.exists(ensure_inside(self.base_path, stat.path)):
                raise TableFormatError(f"{stat.path} is listed in the commit but not in place")
        if not self.fs.create_exclusive(commit_path, orjson.dumps(metadata)):
            raise TableFormatError(f"instant {instant} was completed concurrently")

    def rollback_instant(
        self, instant: str, data_files: Iterable[str] = (), *, delete_staging: bool = True
    ) -> None:
        """Undo a failed instant: its data files, staging dir, then inflight and requested.

        Timeline files go last so a crash mid-way leaves the instant pending and the rollback
        is simply repeated. Only base files of ``instant`` may be named: a bug passing another
        instant's file must not delete committed data.
        """
        if self.fs.exists(self.commit_path(instant)):
            raise TableFormatError(f"instant {instant} is completed and cannot be rolled back")
        targets: list[str] = []
        for relative in data_files:
            path = ensure_inside(self.base_path, relative)
            if relative.split("/", 1)[0].startswith("."):
                raise TableFormatError(f"{relative!r} is not a data file")
            parsed = parse_base_file_name(posixpath.basename(relative))
            if parsed is None or parsed.instant != instant:
                raise TableFormatError(f"{relative!r} is not a base file of instant {instant}")
            targets.append(path)
        for path in targets:
            self.fs.delete(path)
        if delete_staging:  # the sink hands staged files to its deletion service instead
            self.fs.delete_tree(self.staging_dir(instant))
        self.fs.delete(self._timeline_path(instant, "inflight"))
        self.fs.delete(self._timeline_path(instant, "commit.requested"))
