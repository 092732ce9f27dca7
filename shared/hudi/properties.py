"""``hoodie.properties``: Java Properties syntax, the v6 key set, and the checks an existing
table must pass before the sink writes to it (reference §3)."""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable

from shared.config import TableConfig
from shared.errors import ConfigError, TableFormatError
from shared.schema import TableSchema

__all__ = [
    "TABLE_VERSION",
    "TIMELINE_LAYOUT_VERSION",
    "format_properties",
    "parse_properties",
    "table_properties",
    "validate_properties",
]

TABLE_VERSION = "6"
TIMELINE_LAYOUT_VERSION = "1"

_SIMPLE_KEYGEN = "org.apache.hudi.keygen.SimpleKeyGenerator"
_NONPARTITIONED_KEYGEN = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"


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


def validate_properties(props: dict[str, str], table: TableConfig) -> None:
    """Refuse a table this writer cannot keep, or one the config does not describe."""
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
