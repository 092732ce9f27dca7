"""How the text of a Kafka Connect or Hudi configuration value becomes a value of hudi-sink's
config (``shared.config.connector_keys`` names one of these per key).

Each converter takes the value's text (a ``.properties`` value, or a Connect JSON value
turned into text) and returns the value to set, or raises ``ValueError`` with the reason,
which the caller reports against the key the user wrote. A checked key's converter returns
None: nothing is set, the value only has to be one hudi-sink does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

__all__ = ["text", "boolean", "integer", "comma_list", "seconds_ms", "secs_as_ms",
           "tolerance", "codec", "only", "converter", "user_info", "local_path", "write_mode",
           "CONVERTERS"]


def text(value: str) -> str:
    if not value.strip():
        raise ValueError("empty value")
    return value.strip()


def boolean(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"expected true or false, got {value!r}")
    return lowered == "true"


def integer(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(f"expected an integer, got {value!r}") from None


def comma_list(value: str) -> list[str]:
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items:
        raise ValueError("expected a comma-separated list, got nothing")
    return items


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min)?\s*$")


def seconds_ms(value: str) -> int:
    """A duration in seconds (the unit of Hudi's own ``hoodie.kafka.coordinator.write.timeout.secs``)
    as milliseconds; a ``ms``, ``s`` or ``min`` suffix makes the unit explicit."""
    match = _DURATION.match(value)
    if match is None:
        raise ValueError(f"expected a duration (seconds, or with ms/s/min), got {value!r}")
    number, unit = float(match.group(1)), match.group(2) or "s"
    return int(number * {"ms": 1, "s": 1000, "m": 60000, "min": 60000}[unit])


def secs_as_ms(value: str) -> int:
    """A whole number of seconds (a Hudi ``….secs`` key) as milliseconds."""
    seconds = integer(value)
    if seconds < 0:
        raise ValueError(f"expected seconds >= 0, got {value!r}")
    return seconds * 1000


def tolerance(value: str) -> str:
    """``true`` (commit although some records failed) → ``dlq``: the failed records go to the
    dead-letter topic and the commit goes on; ``false`` → ``fail``: the partition stops."""
    return "dlq" if boolean(value) else "fail"


def codec(value: str) -> str:
    name = value.strip().lower()
    if name == "uncompressed":
        name = "none"
    if name not in ("snappy", "zstd", "gzip", "lz4", "none"):
        raise ValueError(f"unsupported Parquet codec {value!r} (snappy, zstd, gzip, lz4, none)")
    return name


def only(allowed: Mapping[str, str | None], *, fold_case: bool = False) -> Callable[[str], None]:
    """A checked key: a value in ``allowed`` with None passes; one with a reason is refused
    with it; any other value is refused naming the accepted ones."""

    def check(value: str) -> None:
        given = value.strip()
        table = {k.lower(): v for k, v in allowed.items()} if fold_case else allowed
        reason = table.get(given.lower() if fold_case else given, "")
        if reason is None:
            return
        raise ValueError(reason or f"{value!r} is not supported "
                         f"(accepted: {', '.join(k for k, v in allowed.items() if v is None)})")

    return check


CONVERTERS: dict[str, str | None] = {
    "org.apache.kafka.connect.json.JsonConverter": None,  # value_format from schemas.enable
    "org.apache.kafka.connect.storage.StringConverter": "json",
    "io.confluent.connect.avro.AvroConverter": "avro",
}
"""Connect value converters and the ``kafka.value_format`` each means. None: JsonConverter's
format comes from ``value.converter.schemas.enable`` (``connect_json`` unless it is
``false``, as Connect defaults it to ``true``: ``shared.config.seed``). StringConverter and
AvroConverter ignore ``schemas.enable``, as Connect does."""


def converter(value: str) -> str | None:
    """``kafka.value_format`` of a Connect value converter (None: JsonConverter, set by
    schemas.enable)."""
    if value.strip() not in CONVERTERS:
        raise ValueError(f"{value!r} is not supported (accepted: {', '.join(CONVERTERS)})")
    return CONVERTERS[value.strip()]


def user_info(value: str) -> dict[str, str]:
    user, sep, password = value.partition(":")
    if not sep or not user:
        raise ValueError("expected user:password")
    return {"registry_username": user, "registry_password": password}


def local_path(value: str) -> str:
    """A base path; ``file:///tmp/t`` (how Hudi spells a local path) and ``file:/tmp/t`` (how
    Hadoop's ``Path`` prints it) are the path ``/tmp/t``. Other ``file:`` forms (a host,
    ``file://host/x``, or a relative ``file:x``) are refused: read as text they would become
    a relative directory named ``file:…`` beside the config."""
    path = text(value)
    if path.startswith("file:"):
        rest = path.removeprefix("file:")
        if rest.startswith("///"):
            return rest.removeprefix("//")
        if rest.startswith("/") and not rest.startswith("//"):
            return rest
        raise ValueError(f"a file: URI names an absolute path (file:///x or file:/x), "
                         f"got {value!r}")
    return path


_OPERATIONS = {"insert": "insert", "bulk_insert": "insert", "upsert": "upsert"}


def write_mode(value: str) -> str:
    """``table.write_mode`` of a Hudi write operation: ``insert`` and ``bulk_insert`` append
    (both write every record as a new row), ``upsert`` keeps one row per key."""
    operation = value.strip().lower()
    if operation not in _OPERATIONS:
        raise ValueError(f"write operation {value!r} is not run by hudi-sink (accepted: "
                         "insert, bulk_insert, upsert)")
    return _OPERATIONS[operation]
