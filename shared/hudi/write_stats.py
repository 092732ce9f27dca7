"""Commit metadata: write stats of new base files and the HoodieCommitMetadata JSON
(docs/design.md §3.8, facts 5 and 6).

Pure functions over data: the table (``shared.hudi.table``) checks the files on disk, the
coordinator aggregates participants' statuses into stats.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from hudi_sink.shared.errors import TableFormatError
from hudi_sink.shared.hudi.naming import parse_base_file_name

__all__ = ["WriteStat", "check_stat", "build_commit_metadata", "stats_of"]


@dataclass(frozen=True)
class WriteStat:
    """One new base file of an instant, as listed in ``partitionToWriteStats`` (docs/design.md
    §3.8, fact 5).

    A new file group has ``prevCommit`` ``"null"``; a new slice of a group names the slice it
    was written over (its rows carried into this file: ``numWrites`` counts them,
    ``numInserts`` only the new rows).
    """

    file_id: str
    path: str
    partition_path: str
    num_writes: int
    num_inserts: int
    file_size_bytes: int
    total_write_bytes: int
    prev_commit: str | None = None
    num_update_writes: int = 0
    num_deletes: int = 0

    def to_json(self) -> dict[str, Any]:
        """Every field of Hudi's HoodieWriteStat JSON, so Java readers find no surprise."""
        return {
            "fileId": self.file_id,
            "path": self.path,
            "prevCommit": self.prev_commit or "null",
            "numWrites": self.num_writes,
            "numDeletes": self.num_deletes,
            "numUpdateWrites": self.num_update_writes,
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
            prev_commit=None if data.get("prevCommit") in (None, "null") else text("prevCommit"),
            num_update_writes=number("numUpdateWrites"),
            num_deletes=number("numDeletes"),
        )


def check_stat(stat: WriteStat) -> str:
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
        check_stat(stat)
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


def stats_of(metadata: dict[str, Any]) -> list[WriteStat]:
    """Every write stat of a commit's metadata, each checked against the partition it is under."""
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
