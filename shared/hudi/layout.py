"""Where things live in a table directory: the one home of every on-disk name the sink uses.

Hudi's own names (``.hoodie``, ``hoodie.properties``, timeline file suffixes, partition
metadata) follow ``docs/design.md`` §3.2 and §3.8; the sink's additions live under
``.hoodie`` so that no reader ever lists them as data:

- ``.hoodie/.temp/<T>/<partition>/<file>`` — files staged by participants for instant ``T``
  (Hudi's own marker/temp folder, which readers skip);
- ``.hoodie/.sink/`` — the sink's state: the table's creation record (``table.json``), the
  sink log (``log/``, ``checkpoint/``), recorded cleans (``clean/``), archived timeline files
  (``archived/``), the deleter's schedule and replay records (``deleter/``), the object-store
  start-up probe (``probe/``) and participants' warm-up scratch (``warmup-<participant>/``).

All names here are relative to the table base path and use ``/``. No other production module
spells one of them (``tests/unit/test_layout_owns_paths.py`` fails when one does), so moving a
directory is a change here and nowhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "METAFOLDER",
    "PROPERTIES_FILE",
    "PARTITION_METADATA_FILE",
    "TEMP_DIR",
    "SINK_DIR",
    "SINK_LOG_DIR",
    "SINK_CHECKPOINT_DIR",
    "DELETER_STATE_DIR",
    "DELETER_SCHEDULE_FILE",
    "DELETER_REPLAY_FILE",
    "SINK_CLEAN_DIR",
    "SINK_PROBE_DIR",
    "SINK_TABLE_FILE",
    "HUDI_ARCHIVE_FOLDER",
    "V8_TIMELINE_DIR",
    "REPLACE_REQUESTED_SUFFIX",
    "REPLACE_INFLIGHT_SUFFIX",
    "REPLACE_SUFFIX",
    "warmup_dir",
    "clean_record",
    "COMMIT_ACTION",
    "COMMIT_REQUESTED_SUFFIX",
    "INFLIGHT_SUFFIX",
    "COMMIT_SUFFIX",
    "InstantState",
    "Instant",
    "staging_dir",
    "timeline_file",
    "parse_commit_file",
    "parse_timeline_file",
    "REPLACE_ACTION",
    "SINK_ARCHIVE_DIR",
    "timeline_file_instant",
    "state_order",
]

METAFOLDER = ".hoodie"
PROPERTIES_FILE = "hoodie.properties"
PARTITION_METADATA_FILE = ".hoodie_partition_metadata"
TEMP_DIR = f"{METAFOLDER}/.temp"
SINK_DIR = f"{METAFOLDER}/.sink"
SINK_LOG_DIR = f"{SINK_DIR}/log"
SINK_CHECKPOINT_DIR = f"{SINK_DIR}/checkpoint"
DELETER_STATE_DIR = f"{SINK_DIR}/deleter"
SINK_ARCHIVE_DIR = f"{SINK_DIR}/archived"
"""Timeline files of archived instants, kept as they were (not Hudi's Avro ``archived/``)."""
SINK_CLEAN_DIR = f"{SINK_DIR}/clean"
"""Recorded cleans, ``<K>.json`` each (Hudi's ``.clean`` instants are Avro)."""
SINK_PROBE_DIR = f"{SINK_DIR}/probe"
"""Keys of the object-store start-up probe (exclusive create), removed right after."""
SINK_TABLE_FILE = f"{SINK_DIR}/table.json"
"""What the table was created for (``table.write_mode``, the record key fields, …), written once
when the table is created; a table without it is an insert-mode table."""
DELETER_SCHEDULE_FILE = f"{DELETER_STATE_DIR}/schedule.json"
"""The reconcile's last run, shared by every deleter pod."""
DELETER_REPLAY_FILE = f"{DELETER_STATE_DIR}/dlq-replayed.json"
"""How far the deletion DLQ was replayed, so two replays never send a letter twice."""
HUDI_ARCHIVE_FOLDER = "archived"
"""Java Hudi's archive folder inside ``.hoodie`` (``hoodie.archivelog.folder``); the sink
never writes there."""
V8_TIMELINE_DIR = f"{METAFOLDER}/timeline"
"""Where Hudi table version 8 keeps its timeline; the sink writes and reads version 6 (timeline
files directly in ``.hoodie``), so a table that has this directory is another format."""

COMMIT_ACTION = "commit"
# Commit-action timeline files of layout 1 (docs/design.md §3.8, facts 1 and 5):
# <T>.commit.requested, <T>.inflight (the commit action's inflight has no action infix),
# <T>.commit.
COMMIT_REQUESTED_SUFFIX = "commit.requested"
INFLIGHT_SUFFIX = "inflight"
COMMIT_SUFFIX = "commit"

_COMMIT_FILE = re.compile(r"^(\d{14}|\d{17})\.(commit\.requested|inflight|commit)$")
REPLACE_ACTION = "replacecommit"
# Replace-commit files (clustering): <T>.replacecommit.requested, .replacecommit.inflight,
# .replacecommit (docs/design.md §3.8, facts 1 and 12).
REPLACE_REQUESTED_SUFFIX = f"{REPLACE_ACTION}.requested"
REPLACE_INFLIGHT_SUFFIX = f"{REPLACE_ACTION}.inflight"
REPLACE_SUFFIX = REPLACE_ACTION
_REPLACE_FILE = re.compile(r"^(\d{14}|\d{17})\.replacecommit(\.requested|\.inflight)?$")

# Any timeline file of any action/state, e.g. <T>.replacecommit.inflight or <T>.rollback.
_ANY_INSTANT_FILE = re.compile(r"^(\d{14}|\d{17})\.[a-z]")


class InstantState(StrEnum):
    """Life cycle of an instant on the timeline."""

    REQUESTED = "REQUESTED"
    INFLIGHT = "INFLIGHT"
    COMPLETED = "COMPLETED"


_SUFFIX_STATE = {
    COMMIT_REQUESTED_SUFFIX: InstantState.REQUESTED,
    INFLIGHT_SUFFIX: InstantState.INFLIGHT,
    COMMIT_SUFFIX: InstantState.COMPLETED,
}
_STATE_ORDER = {InstantState.REQUESTED: 0, InstantState.INFLIGHT: 1, InstantState.COMPLETED: 2}


@dataclass(frozen=True)
class Instant:
    """One timeline file of a commit action."""

    time: str
    action: str
    state: InstantState


def state_order(state: InstantState) -> int:
    """Position of a state in an instant's life (requested < inflight < completed)."""
    return _STATE_ORDER[state]


def timeline_file(instant: str, suffix: str) -> str:
    """``<T>.<suffix>``: a timeline file's name inside ``.hoodie``."""
    return f"{instant}.{suffix}"


def staging_dir(instant: str) -> str:
    """``.hoodie/.temp/<T>``: where participants stage the files of instant ``T``."""
    return f"{TEMP_DIR}/{instant}"


def warmup_dir(participant_id: str) -> str:
    """``.hoodie/.sink/warmup-<participant>``: a participant's Spark warm-up scratch, written
    where its flushes go (same store, same credentials) and deleted once the JVM is warm."""
    return f"{SINK_DIR}/warmup-{participant_id}"


def clean_record(instant: str) -> str:
    """``.hoodie/.sink/clean/<K>.json``: the record of clean ``K``."""
    return f"{SINK_CLEAN_DIR}/{instant}.json"


def parse_commit_file(name: str) -> Instant | None:
    """The commit-action instant a timeline file name stands for, else None."""
    match = _COMMIT_FILE.match(name)
    if match is None:
        return None
    return Instant(match.group(1), COMMIT_ACTION, _SUFFIX_STATE[match.group(2)])


def parse_timeline_file(name: str) -> Instant | None:
    """A commit or replacecommit instant a timeline file name stands for, else None."""
    instant = parse_commit_file(name)
    if instant is not None:
        return instant
    match = _REPLACE_FILE.match(name)
    if match is None:
        return None
    state = {".requested": InstantState.REQUESTED, ".inflight": InstantState.INFLIGHT}.get(
        match.group(2) or "", InstantState.COMPLETED)
    return Instant(match.group(1), REPLACE_ACTION, state)


def timeline_file_instant(name: str) -> str | None:
    """The instant time of any timeline file (any action, any state), else None."""
    match = _ANY_INSTANT_FILE.match(name)
    return match.group(1) if match is not None else None
