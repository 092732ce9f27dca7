"""A Copy-on-Write Hudi table (table version 6, timeline layout 1) written without Java.

Only what an append-only, exactly-once sink needs: create the table, run the commit protocol
(requested -> inflight -> staged files placed -> ``<T>.commit``), roll back failed instants and
read the timeline back. The on-disk format follows ``docs/design.md`` §3 (its table format facts
in §3.8); the relevant fact is cited where a choice is not obvious.

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
from collections.abc import Iterable
from typing import Any

import orjson

from hudi_sink.shared.config.java_properties import format_properties, parse_properties
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.errors import TableFormatError
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.layout import Instant, InstantState
from hudi_sink.shared.hudi.naming import ensure_inside, instant_key, is_instant_time, parse_base_file_name
from hudi_sink.shared.hudi.properties import table_properties, validate_properties
from hudi_sink.shared.hudi.table_record import check_table_record
from hudi_sink.shared.hudi.write_stats import WriteStat, build_commit_metadata, check_stat, stats_of
from hudi_sink.shared.schema.table_schema import TableSchema
from hudi_sink.shared.storage.fs import FileSystem

__all__ = ["HudiTable"]


class HudiTable:
    """A v6 COW table at ``base_path`` accessed through ``fs``.

    Paths are joined with ``/`` and never normalised as a whole, so the same code works for
    URIs once an object-store FileSystem exists; every path derived from data (partition
    values, stats, file lists) goes through :func:`ensure_inside`.
    """

    #: Also reachable as methods, for callers holding only the table.
    build_commit_metadata = staticmethod(build_commit_metadata)
    table_properties = staticmethod(table_properties)

    def __init__(self, fs: FileSystem, base_path: str) -> None:
        if not base_path:
            raise ValueError("base_path must not be empty")
        self.fs = fs
        self.base_path = base_path.rstrip("/") or "/"
        self.meta_path = ensure_inside(self.base_path, layout.METAFOLDER)
        self.properties_path = ensure_inside(self.meta_path, layout.PROPERTIES_FILE)

    # -- properties --------------------------------------------------------------------

    def is_initialized(self) -> bool:
        """Whether ``.hoodie/hoodie.properties`` exists."""
        return self.fs.exists(self.properties_path)

    def initialize(self, table: TableConfig, schema: TableSchema, *,
                   kafka_partitions: int | None = None) -> None:
        """Create the table if needed, else check that it is the table the config describes.

        The properties file is created exclusively, so two processes initialising at once
        cannot both write it: the loser validates the winner's file like any existing one.
        The sink's record of the write mode (``shared.hudi.table_record``) is written first and
        checked the same way: a config the table was not created for is a ConfigError. A table
        created here records ``kafka_partitions`` (upsert mode: the data topic's partition
        count, which only the coordinator knows; others leave it to the coordinator).
        """
        self.fs.makedirs(self.meta_path)
        exists = self.fs.exists(self.properties_path)
        check_table_record(self.fs, self.base_path, table, create=not exists,
                           kafka_partitions=kafka_partitions)
        if not exists:
            data = format_properties(table_properties(table, schema))
            if self.fs.create_exclusive(self.properties_path, data):
                return
        validate_properties(self.read_properties(), table)

    def read_properties(self) -> dict[str, str]:
        """``hoodie.properties`` as a dict (Java syntax, ISO-8859-1 like Java reads it)."""
        try:
            raw = self.fs.read_bytes(self.properties_path)
        except FileNotFoundError:
            raise TableFormatError(
                f"not a Hudi table: {self.properties_path} does not exist"
            ) from None
        return parse_properties(raw.decode("latin-1"))

    # -- timeline ----------------------------------------------------------------------

    def _timeline_path(self, instant: str, suffix: str) -> str:
        if not is_instant_time(instant):
            raise TableFormatError(f"not an instant time: {instant!r}")
        return f"{self.meta_path}/{layout.timeline_file(instant, suffix)}"

    def commit_path(self, instant: str) -> str:
        """``.hoodie/<T>.commit``: the file whose creation completes instant ``T``."""
        return self._timeline_path(instant, layout.COMMIT_SUFFIX)

    def list_instants(self) -> list[Instant]:
        """Commit and replacecommit timeline files directly in ``.hoodie/``, sorted by time
        then state (``completed_commits``/``pending_instants`` keep to the commit action)."""
        instants: list[Instant] = []
        for info in self.fs.list_dir(self.meta_path):
            if info.is_dir:
                continue
            instant = layout.parse_timeline_file(info.name)
            if instant is not None:
                instants.append(instant)
        instants.sort(key=lambda i: (i.time, layout.state_order(i.state)))
        return instants

    def completed_commits(self) -> list[str]:
        """Times of completed commits, oldest first."""
        return sorted(
            {i.time for i in self.list_instants()
             if i.state is InstantState.COMPLETED and i.action == layout.COMMIT_ACTION}
        )

    def pending_instants(self) -> list[str]:
        """Times of commits that were started but never completed (need roll back)."""
        instants = [i for i in self.list_instants() if i.action == layout.COMMIT_ACTION]
        completed = {i.time for i in instants if i.state is InstantState.COMPLETED}
        return sorted({i.time for i in instants} - completed)

    def latest_instant_time(self) -> str | None:
        """Greatest instant time on the timeline, of any action and state.

        New instants must be greater than this, including pending ones and instants other
        writers (Java clustering, rollbacks) may have left, so every timeline file counts.
        """
        times = [
            time
            for info in self.fs.list_dir(self.meta_path)
            if not info.is_dir and (time := layout.timeline_file_instant(info.name)) is not None
        ]
        return max(times, key=instant_key, default=None)

    def read_commit_metadata(self, instant: str) -> dict[str, Any]:
        """The JSON of ``<T>.commit`` (or of ``<T>.replacecommit``, a clustering instant's,
        which lists its new files the same way); TableFormatError when missing or not JSON."""
        path = self.commit_path(instant)
        try:
            try:
                data = orjson.loads(self.fs.read_bytes(path))
            except FileNotFoundError:
                path = self._timeline_path(instant, layout.REPLACE_ACTION)
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
        self.fs.write_atomic(self._timeline_path(instant, layout.COMMIT_REQUESTED_SUFFIX), b"")
        inflight = {
            "partitionToWriteStats": {},
            "compacted": False,
            "extraMetadata": {},
            "operationType": "INSERT",
        }
        self.fs.write_atomic(self._timeline_path(instant, layout.INFLIGHT_SUFFIX), orjson.dumps(inflight))
        self.fs.makedirs(self.staging_dir(instant))

    # -- data files --------------------------------------------------------------------

    def staging_dir(self, instant: str) -> str:
        """Where participants write files of ``instant`` before the commit places them.

        Inside ``.hoodie`` so no reader ever lists a staged file as data.
        """
        if not is_instant_time(instant):
            raise TableFormatError(f"not an instant time: {instant!r}")
        return ensure_inside(self.base_path, layout.staging_dir(instant))

    def staging_path(self, instant: str, partition_path: str, file_name: str) -> str:
        """Staged location of one file: ``.hoodie/.temp/<T>/<partition>/<file>``."""
        if not file_name or "/" in file_name or file_name in (".", ".."):
            raise TableFormatError(f"invalid file name {file_name!r}")
        relative = f"{partition_path}/{file_name}" if partition_path else file_name
        return ensure_inside(self.staging_dir(instant), relative)

    def final_path(self, stat: WriteStat) -> str:
        """Absolute location of a write stat's file (validated to stay in the table)."""
        check_stat(stat)
        return ensure_inside(self.base_path, stat.path)

    def _relative(self, path: str) -> str:
        prefix = self.base_path.rstrip("/") + "/"
        if not path.startswith(prefix):
            raise TableFormatError(f"path {path!r} is outside the table {self.base_path!r}")
        relative = path[len(prefix):]
        ensure_inside(self.base_path, relative)
        return relative

    def _ensure_partition_metadata(self, partition_path: str, instant: str) -> None:
        """Write ``<partition>/.hoodie_partition_metadata`` once (docs/design.md §3.8, fact 11).

        Exclusive create: several participants may place the first files of a partition
        concurrently; the first one wins and the file is never rewritten.
        """
        if not partition_path:
            return
        path = ensure_inside(self.base_path, f"{partition_path}/{layout.PARTITION_METADATA_FILE}")
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
        instant = check_stat(stat)
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
        if not self.fs.exists(self._timeline_path(instant, layout.INFLIGHT_SUFFIX)):
            raise TableFormatError(
                f"instant {instant} is not inflight (never started, or rolled back)"
            )
        extra = metadata.get("extraMetadata")
        if not isinstance(extra, dict) or not isinstance(extra.get("schema"), str):
            raise TableFormatError("commit metadata must carry extraMetadata.schema")
        for stat in stats_of(metadata):
            file_instant = check_stat(stat)
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
        self.fs.delete(self._timeline_path(instant, layout.INFLIGHT_SUFFIX))
        self.fs.delete(self._timeline_path(instant, layout.COMMIT_REQUESTED_SUFFIX))
