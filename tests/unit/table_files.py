"""Table state on disk for the deleter's unit tests: files with a chosen age, a completed
instant listing one base file, an instant decided ABORT and rolled back — the moves the
coordinator makes, reduced to what the deleter reads."""

from __future__ import annotations

import os
import time
from pathlib import Path

from hudi_sink.shared.hudi.sink_log import SinkLog
from hudi_sink.shared.hudi.sink_log_state import EntryKind, LogEntry
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.write_stats import WriteStat, build_commit_metadata
from hudi_sink.shared.storage.fs import LocalFileSystem

FS = LocalFileSystem()


def write_file(path: Path, age_s: float = 0) -> str:
    """An 11-byte file at ``path``, last modified ``age_s`` ago; returns its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"parquet-ish")
    if age_s:
        then = time.time() - age_s
        os.utime(path, (then, then))
    return str(path)


def complete(table: HudiTable, instant: str, fid: str, age_s: float = 0) -> str:
    """Complete ``instant`` listing one base file of it; returns the file's absolute path."""
    table.start_instant(instant)
    relative = f"de/{fid}_0-0-1_{instant}.parquet"
    path = write_file(Path(table.base_path) / relative, age_s)
    stat = WriteStat(file_id=fid, path=relative, partition_path="de", num_writes=1,
                     num_inserts=1, file_size_bytes=11, total_write_bytes=11)
    table.complete_instant(instant, build_commit_metadata([stat], {"schema": "{}"}))
    return path


def abort(table: HudiTable, instant: str) -> None:
    """Decide ABORT in the sink log, then roll back (staging left to the deleter)."""
    log = SinkLog(FS, table.base_path)
    assert log.try_append(LogEntry(seq=log.read_state().last_seq + 1, kind=EntryKind.ABORT,
                                   epoch=1, instant=instant))
    table.rollback_instant(instant, delete_staging=False)
