"""Time travel: the instant an ``as of`` read resolves to, and whether the table still holds it.

A reader at ``T`` takes each file group's greatest slice ``<= T``. Once a clean deleted slices
older than its earliest retained instant E (and the files of groups replaced at or before E),
a read before E misses rows — and hudi-rs 0.5 returns what is left without a word (an empty
table when every group was updated since). Reads at or after E are whole: every slice at or
after E and each group's latest slice before E are kept (``shared.hudi.retention``). So
``hudi-sink table read --as-of T`` refuses a ``T`` before the retained history (the greatest E
of the recorded cleans, ``replace.retention_floor``); with no clean recorded every instant is
whole. A ``T`` before the table's first commit is answered, not refused: the table was empty
then, which is what hudi-rs returns.

``T`` is parsed as hudi-rs's ``format_timestamp`` does (``crates/core/src/timeline/util.rs``),
so the check compares the instant the reader will use: a timeline instant (14 or 17 digits)
as it is; other digits as epoch seconds (up to 10), milliseconds (13), microseconds (16) or
nanoseconds; else an RFC 3339 time with an offset. Converted to the table's timeline timezone
(``hoodie.table.timeline.timezone``, UTC for every table this sink writes). Instants compare as
strings, as Hudi's timeline does.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.layout import InstantState
from hudi_sink.shared.hudi.naming import ensure_inside
from hudi_sink.shared.hudi.replace import ReplaceTimeline, retention_floor
from hudi_sink.shared.hudi.table import HudiTable

__all__ = ["AsOf", "AsOfError", "as_of_instant", "resolve_as_of"]

_TIMELINE = re.compile(r"^(\d{14}|\d{17})$")
_EPOCH = re.compile(r"^\+?\d+$")
_MAX_INSTANT = "99991231235959999"
"""An epoch past what a datetime holds (year 9999) reads as after every instant."""
_ARCHIVED_COMPLETED = re.compile(r"^(\d{14}|\d{17})\.(commit|replacecommit)$")


class AsOfError(ValueError):
    """The value is no timestamp hudi-rs reads."""


def as_of_instant(value: str, timezone: str = "UTC") -> str:
    """The timeline instant hudi-rs reads ``value`` as (AsOfError when it reads none)."""
    text = value.strip()
    if _TIMELINE.match(text):
        return text
    moment = _epoch(text) if _EPOCH.match(text) else _rfc3339(text)
    if moment is None:
        return _MAX_INSTANT
    if timezone.lower() == "local":
        moment = moment.astimezone()
    return moment.strftime("%Y%m%d%H%M%S") + f"{moment.microsecond // 1000:03d}"


def _epoch(text: str) -> datetime | None:
    number = int(text)
    if number >= 1 << 63:
        raise AsOfError(f"{text!r} is too large for an epoch time")
    digits = len(text)
    scale = 1 if digits <= 10 else 1_000 if digits <= 13 else 1_000_000 if digits <= 16 else 10**9
    seconds, fraction = divmod(number, scale)
    try:
        return datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=fraction * 1_000_000 // scale)
    except (OverflowError, OSError, ValueError):
        return None


def _rfc3339(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise AsOfError(f"{text!r} is not a timestamp hudi-rs reads: an instant "
                        "(yyyyMMddHHmmss or yyyyMMddHHmmssSSS), epoch seconds or milliseconds, "
                        "or RFC 3339 with an offset (2025-01-31T12:00:00Z)")
    return moment.astimezone(UTC)


@dataclass(frozen=True)
class AsOf:
    """Where an ``as of`` read stands in the table's history."""

    instant: str
    """The instant the reader uses."""
    retained_from: str | None
    """The earliest instant every read at or after which is whole (None: nothing cleaned)."""
    clean: str | None
    """The recorded clean that set ``retained_from``."""
    first_commit: str | None
    """The table's first completed instant, archived ones included (None: none yet)."""

    @property
    def too_old(self) -> bool:
        """Older than the retained history: the read would silently miss rows."""
        return self.retained_from is not None and self.instant < self.retained_from

    @property
    def before_first_commit(self) -> bool:
        """Before the table had any commit: the answer is an empty table."""
        return self.first_commit is None or self.instant < self.first_commit


def resolve_as_of(table: HudiTable, value: str) -> AsOf:
    """Resolve ``value`` against the table's timeline and recorded cleans (blocking I/O)."""
    timezone = table.read_properties().get("hoodie.table.timeline.timezone", "UTC")
    instant = as_of_instant(value, timezone)
    floor = retention_floor(ReplaceTimeline(table).cleans())
    return AsOf(instant, floor.earliest_retained if floor is not None else None,
                floor.instant if floor is not None else None, _first_commit(table))


def _first_commit(table: HudiTable) -> str | None:
    """The oldest completed commit or replacecommit, on the active timeline or archived."""
    times = [i.time for i in table.list_instants() if i.state is InstantState.COMPLETED]
    archive = ensure_inside(table.base_path, layout.SINK_ARCHIVE_DIR)
    for info in table.fs.list_dir(archive):
        match = _ARCHIVED_COMPLETED.match(posixpath.basename(info.path))
        if match is not None and not info.is_dir:
            times.append(match.group(1))
    return min(times, default=None)
