"""Names of things in a Hudi table: partition directories, file ids, base files, instants.

These are pure functions so every component (participants naming files, the coordinator
committing them, tools listing them) derives exactly the same names from the same inputs.
"""

from __future__ import annotations

import posixpath
import re
import uuid
from datetime import UTC, date, datetime, time, timedelta
from typing import NamedTuple

from hudi_sink.shared.errors import InvalidPartitionValue, TableFormatError

__all__ = [
    "HIVE_DEFAULT_PARTITION",
    "MAX_DIR_NAME_BYTES",
    "BaseFileName",
    "encode_partition_value",
    "partition_path",
    "new_file_id",
    "write_token",
    "base_file_name",
    "parse_base_file_name",
    "next_instant_time",
    "parse_instant_time",
    "is_instant_time",
    "instant_key",
    "ensure_inside",
]

#: Hive's (and Hudi's) directory name for a null / empty partition value.
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

#: Top-level directory names hudi-rs does not read data from (docs/design.md §3.8, facts 1
#: and 9). A partition value spelling one of them gets its first character percent-encoded,
#: which still decodes to the same value but is no longer the reserved name.
_RESERVED_DIR_NAMES = frozenset({"metadata", "_delta_log"})

#: Longest directory name (UTF-8 bytes) common filesystems allow (ext4, XFS, APFS, NTFS...).
MAX_DIR_NAME_BYTES = 255

#: What Hudi's ``PartitionPathEncodeUtils.escapePathName`` escapes: the ASCII control
#: characters, DEL and ``"#%'*/:=?\{[]^``, each as ``%`` plus two uppercase hex digits
#: (Java's ``%1$02X``). Every other character, non-ASCII included, is kept as it is.
_HUDI_ESCAPED = [*map(chr, range(0x20)), *'"#%\'*/:=?\\\x7f{[]^']
_HUDI_ESCAPES = {ord(ch): f"%{ord(ch):02X}" for ch in _HUDI_ESCAPED}

_INSTANT = re.compile(r"^(\d{14}|\d{17})$")
_BASE_FILE = re.compile(r"^([^_/]+)_([^_/]+)_(\d{14}|\d{17})\.parquet$")


def _partition_text(value: object) -> str:
    """The text Spark/Java would print for ``value`` (``true``, not Python's ``True``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    return str(value)


def _escape(value: object) -> str:
    """Hudi's escaping plus our leading-dot and reserved-name escapes; no length check."""
    if value is None:
        return HIVE_DEFAULT_PARTITION
    text = _partition_text(value)
    if text == "":
        return HIVE_DEFAULT_PARTITION
    encoded = text.translate(_HUDI_ESCAPES)
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    elif encoded in _RESERVED_DIR_NAMES:
        encoded = f"%{ord(encoded[0]):02X}{encoded[1:]}"
    return encoded


def _check_dir_name(name: str, field: str | None) -> None:
    """Raise InvalidPartitionValue unless ``name`` fits in one directory entry."""
    if len(name) * 4 <= MAX_DIR_NAME_BYTES:
        return  # no character takes more than 4 UTF-8 bytes
    what = f"partition field {field!r}" if field is not None else "partition value"
    try:
        size = len(name.encode())
    except UnicodeEncodeError:
        raise InvalidPartitionValue(
            f"{what}: value {name[:40]!r}... is not valid Unicode (lone surrogate)"
        ) from None
    if size > MAX_DIR_NAME_BYTES:
        raise InvalidPartitionValue(
            f"{what}: the value's directory name ({name[:40]!r}...) is {size} UTF-8 bytes "
            f"long; a filesystem allows at most {MAX_DIR_NAME_BYTES}"
        )


def encode_partition_value(value: object) -> str:
    """One partition directory level for ``value``, exactly as Hudi's
    ``PartitionPathEncodeUtils.escapePathName`` writes it, so Java readers decode it back to
    ``value`` and prune partitions correctly.

    Hudi escapes a fixed set of ASCII characters as ``%XX`` (one escape per character) and
    keeps everything else, non-ASCII included: ``München`` stays ``München``. Because ``/``
    is in that set the result never contains a path separator. Two escapes of our own, which
    Hudi's decoder reads back to the same value: a leading ``.`` (so the name is never ``.``,
    ``..`` or ``.hoodie`` and no record can leave the table or hide in the timeline) and the
    first character of a name hudi-rs reserves. Raises InvalidPartitionValue when the name
    cannot be a directory (over 255 UTF-8 bytes): such a record is bad, not a flush to retry.
    """
    encoded = _escape(value)
    _check_dir_name(encoded, None)
    return encoded


def partition_path(value: object, field: str | None, hive_style: bool) -> str:
    """Relative partition path of a record: ``""`` when the table is not partitioned.

    Raises InvalidPartitionValue (naming ``field``) when the directory name, ``field=``
    included in Hive style, is longer than a filesystem allows.
    """
    if field is None:
        return ""
    encoded = _escape(value)
    name = f"{field}={encoded}" if hive_style else encoded
    _check_dir_name(name, field)
    return name


def new_file_id() -> str:
    """A new file group id, ``<uuid4>-0`` as Hudi's ``FSUtils.createNewFileId`` forms it.

    Random rather than derived from the flush: a partition that moves away and back within
    one instant, a retried flush or a restarted writer must never reuse a name (the staged
    file's rename would collide and its rows be lost), and two writers must never produce the
    same (fileId, instant) pair, which hudi-rs rejects. A UUID never holds ``_`` or ``/``.
    """
    return f"{uuid.uuid4()}-0"


def write_token(source: int, flush_no: int, writer_nonce: int) -> str:
    """Hudi's ``<task>-<stage>-<attempt>`` token, with our own meaning; never holds ``_``.

    ``source`` is the writer's source index (the Kafka partition for the first topic): the
    group's owner (``shared.hudi.slices.owner_of``)."""
    token = f"{source}-{flush_no}-{writer_nonce}"
    if "_" in token:
        raise ValueError(f"write token {token!r} would contain '_'")
    return token


class BaseFileName(NamedTuple):
    """The three parts of ``<fileId>_<writeToken>_<instant>.parquet``."""

    file_id: str
    write_token: str
    instant: str


def base_file_name(file_id: str, write_token: str, instant: str) -> str:
    """``<fileId>_<writeToken>_<instant>.parquet``; rejects parts that would not parse back."""
    name = f"{file_id}_{write_token}_{instant}.parquet"
    if parse_base_file_name(name) != (file_id, write_token, instant):
        raise ValueError(f"invalid base file name parts: {file_id!r} {write_token!r} {instant!r}")
    return name


def parse_base_file_name(name: str) -> BaseFileName | None:
    """Split a base file name, or None when ``name`` is not one (temp files, metadata...)."""
    match = _BASE_FILE.match(name)
    if match is None:
        return None
    return BaseFileName(match.group(1), match.group(2), match.group(3))


def is_instant_time(value: str) -> bool:
    """Whether ``value`` is a 14- or 17-digit Hudi instant time."""
    return bool(_INSTANT.match(value))


def instant_key(instant: str) -> str:
    """Comparable form of an instant time: 14-digit (second) times padded to 17 digits.

    Hudi accepts both widths; comparing them as strings only works once both are 17 long.
    """
    return instant if len(instant) == 17 else instant + "000"


def parse_instant_time(instant: str) -> datetime:
    """UTC datetime of an instant (the table is written with timeline timezone UTC)."""
    if not is_instant_time(instant):
        raise TableFormatError(f"not an instant time: {instant!r}")
    padded = instant_key(instant)
    try:
        parsed = datetime.strptime(padded[:14], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        raise TableFormatError(f"not an instant time: {instant!r}") from None
    return parsed + timedelta(milliseconds=int(padded[14:]))


def _format_instant(moment: datetime) -> str:
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y%m%d%H%M%S") + f"{moment.microsecond // 1000:03d}"


def next_instant_time(latest: str | None, now: datetime) -> str:
    """A new instant time: ``max(now, latest + 1 ms)`` in UTC ``yyyyMMddHHmmssSSS``.

    Instants must be strictly increasing (readers compare them as strings), and a wall clock
    can step backwards or repeat within a millisecond, so the latest existing instant bounds
    the result from below. ``now`` must be timezone-aware: a naive local time here would
    silently shift the whole timeline.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    candidate = _format_instant(now)
    if latest is None:
        return candidate
    after_latest = _format_instant(parse_instant_time(latest) + timedelta(milliseconds=1))
    latest17 = instant_key(latest)
    result = max(candidate, after_latest)
    assert result > latest17
    return result


def ensure_inside(base_path: str, relative: str) -> str:
    """``base_path/relative``, refusing any ``relative`` that would leave ``base_path``.

    The relative part is normalised with POSIX rules (so this also works for URIs, whose base
    must not be normalised); absolute paths, ``..`` escapes and NUL bytes are rejected.
    ``""`` or ``"."`` mean the base itself.
    """
    if "\x00" in relative or "\\" in relative:
        raise TableFormatError(f"invalid path {relative!r}")
    if relative.startswith("/"):
        raise TableFormatError(f"path {relative!r} must be relative to the table base path")
    normalized = posixpath.normpath(relative) if relative else "."
    if normalized == ".." or normalized.startswith("../"):
        raise TableFormatError(f"path {relative!r} escapes the table base path")
    base = base_path.rstrip("/") or "/"
    if normalized == ".":
        return base
    return f"{base}/{normalized}" if base != "/" else f"/{normalized}"
