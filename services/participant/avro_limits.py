"""Bounds on what one Avro value may decode to: checked once per writer schema, free per record.

A writer schema is the sender's word, and the Avro binary encoding lets a few bytes claim a lot:

- an array's block count is a varint the sender picks. When an item takes at least one byte,
  a count larger than the bytes left fails at the end of the value (fastavro appends items
  one by one, it never allocates by the count), so the items a value decodes to are bounded
  by its size, and ``errors.max_record_bytes`` bounds that. When an item can take **zero**
  bytes (``null``, a record without fields, a record of only such fields, a ``fixed`` of size
  0) nothing bounds it: 12 bytes decode to a list of 10 million ``None`` (over a second of a
  blocked participant, 160 MB). Such a writer schema is refused, and so every record
  written with it is a bad record (``InvalidAvro``, dead-lettered). Maps are safe: every
  entry carries a key of at least one byte;
- a recursive schema (a record that contains itself, through a union or an array) lets the
  bytes nest values as deep as they like; fastavro's compiled reader recurses on the C stack
  and a 100 kB value kills the process with a segmentation fault (a poison record that
  crash-loops its partition). Recursive schemas are refused, and so are schemas nested
  deeper than :data:`MAX_DEPTH` (no table column nests that deep);
- a ``decimal``'s unscaled value is as many bytes as the sender says, and fastavro converts
  it in quadratic time (1 MB: over a minute) and rounds it silently to the writer's
  precision. The decimal reader registered below takes at most :data:`MAX_DECIMAL_BYTES`
  and refuses more digits than the writer's precision instead of rounding.

Why a schema check rather than a pre-scan of each value's block counts: the check runs once
per schema id and costs nothing per record, while a pre-scan in Python would walk every
value again next to fastavro's compiled decoder; the schemas it refuses carry no information
in their zero-byte items anyway (only a count).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from fastavro.read import LOGICAL_READERS

__all__ = ["unsafe_schema", "MAX_DEPTH", "MAX_DECIMAL_BYTES"]

MAX_DEPTH = 64
"""Deepest nesting of records, arrays, maps and unions a writer schema may have."""
MAX_DECIMAL_BYTES = 64
"""Longest unscaled decimal accepted: 64 bytes hold over 150 digits, DECIMAL columns 38."""

_MIN_BYTES = {"null": 0, "boolean": 1, "int": 1, "long": 1, "float": 4, "double": 8,
              "bytes": 1, "string": 1}
"""Fewest bytes each primitive type encodes to (varints and lengths take at least one)."""


class _Refused(Exception):
    """Why a writer schema is refused (internal: becomes the returned reason)."""


class _Walk:
    """(fewest bytes a type encodes to, levels nested below it), checking arrays, recursion and
    depth on the way. Named types are walked once (memoised), so a schema that references a
    type many times is checked in time linear in its size."""

    def __init__(self, named: dict[str, Any]) -> None:
        self._named = named
        self._done: dict[str, tuple[int, int]] = {}
        self._active: set[str] = set()

    def size(self, node: Any, path: str, depth: int) -> tuple[int, int]:
        if depth > MAX_DEPTH:
            raise _Refused(f"{path or 'the record'}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, str):
            return self._name(node, path, depth)
        if isinstance(node, list):  # a union: the branch index takes a byte
            return 1, 1 + max((self.size(b, path, depth + 1)[1] for b in node), default=0)
        if not isinstance(node, dict):
            raise _Refused(f"{path}: {node!r} is not an Avro type")
        kind = node.get("type")
        if not isinstance(kind, str):  # {"type": {...}}
            return self.size(kind, path, depth)
        if kind in ("record", "error"):
            return self._record(node, path, depth)
        if kind == "array":
            items = node.get("items")
            least, height = self.size(items, f"{path}[]", depth + 1)
            if least == 0:
                raise _Refused(f"{path}: an array of {_describe(items)} items, which take no "
                               "bytes: a few bytes could claim any number of them")
            return 1, height + 1
        if kind == "map":  # every entry has a key of at least one byte
            return 1, self.size(node.get("values"), f"{path}{{}}", depth + 1)[1] + 1
        if kind == "fixed":
            size = node.get("size")
            return (size if isinstance(size, int) else 1), 0
        if kind == "enum":
            return 1, 0
        return self._name(kind, path, depth)  # a primitive with a logical type, a reference

    def _name(self, name: str, path: str, depth: int) -> tuple[int, int]:
        if name in _MIN_BYTES:
            return _MIN_BYTES[name], 0
        if name in self._active:
            raise _Refused(f"{path}: the type {name} contains itself (a recursive schema "
                           "nests as deep as the bytes say)")
        done = self._done.get(name)
        if done is None:
            done = self._done[name] = self.size(self._named[name], path, depth)
        if depth + done[1] > MAX_DEPTH:
            raise _Refused(f"{path}: nested deeper than {MAX_DEPTH} levels")
        return done

    def _record(self, node: dict[str, Any], path: str, depth: int) -> tuple[int, int]:
        name = str(node.get("name"))
        self._active.add(name)
        sizes = [self.size(field.get("type"), f"{path}.{field.get('name')}".lstrip("."), depth + 1)
                 for field in node.get("fields", ())]
        self._active.discard(name)
        return sum(s[0] for s in sizes), 1 + max((s[1] for s in sizes), default=0)


def _describe(items: Any) -> str:
    return items if isinstance(items, str) else str(items.get("type") if isinstance(items, dict)
                                                    else "union")


def unsafe_schema(parsed: Any) -> str | None:
    """Why the parsed (``fastavro.parse_schema``) writer schema is refused, or ``None``."""
    if not isinstance(parsed, dict) or parsed.get("type") not in ("record", "error"):
        return "not a record schema"
    walk = _Walk(parsed.get("__named_schemas", {}))
    try:
        walk.size(parsed, "", 0)
    except _Refused as exc:
        return str(exc)
    except (KeyError, TypeError, RecursionError) as exc:  # a shape parse_schema let through
        return f"unexpected schema shape: {type(exc).__name__}: {exc}"
    return None


def _read_decimal(data: Any, writer_schema: dict[Any, Any] | None,
                  _reader: dict[Any, Any] | None = None) -> Decimal:
    """Avro ``decimal`` (bytes or fixed) → exact ``Decimal``; too long or too many digits for
    the writer's precision raises (fastavro's reader: the body does not decode)."""
    if len(data) > MAX_DECIMAL_BYTES:
        raise ValueError(f"a decimal of {len(data)} bytes (at most {MAX_DECIMAL_BYTES})")
    unscaled = int.from_bytes(data, "big", signed=True)
    writer_schema = writer_schema or {}
    precision = writer_schema.get("precision")
    digits = len(str(abs(unscaled)))
    if isinstance(precision, int) and digits > precision:
        raise ValueError(f"a decimal of {digits} digits, over the writer schema's precision "
                         f"{precision} (not rounded)")
    return Decimal(f"{unscaled}E{-int(writer_schema.get('scale', 0))}")


# fastavro's documented hook for logical types; this process reads Avro only through it.
LOGICAL_READERS["bytes-decimal"] = _read_decimal
LOGICAL_READERS["fixed-decimal"] = _read_decimal
