"""Kafka Connect's logical types in a ``connect_json`` payload, read by the envelope's schema.

Connect's ``JsonConverter`` writes ``Decimal`` as base64 of the unscaled value (big-endian
two's complement, ``BigInteger.toByteArray``; or a plain JSON number with
``decimal.format=NUMERIC``) with the scale in the schema's ``parameters``, and ``Date`` as days
since the epoch. Only the schema says so, at any depth: a struct's ``fields``, an array's
``items``, a map's ``values``. Read without it, the base64 ``"1234"`` (−26588.24 at scale 2)
would pass for the decimal text 1234.

How: the schema is compiled into a plan (:func:`payload_plan`) holding only the paths that
lead to a logical type, then the plan converts the payload in place. A struct's plan visits
``min(its planned fields, the value's keys)`` entries, so no schema can make one record cost
more than linear time (an array of a million items under a schema of a thousand fields would
otherwise be a billion steps).

Hostile values are bounded before any big-integer work: a Connect ``Decimal`` longer than 24
base64 characters (16 bytes: every value of up to 38 digits, Hudi's and Spark's limit) or with
a scale outside −38..38 is :class:`Unreadable` at once (converting a 300 KB one took 7.8 s,
a scale of −1,000,000 raised ``decimal.Overflow``). ``Unreadable`` only rejects the record if
the field is a column: a field the table does not have is ignored, whatever it holds.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from hudi_sink.services.participant.decoded import Unreadable

__all__ = ["ConnectSchemaTooDeep", "payload_plan", "MAX_DEPTH"]

Plan = Callable[[Any], Any]
"""A non-null payload value → the value to keep (containers are converted in place)."""

_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_DATE = "org.apache.kafka.connect.data.Date"
_CONTAINERS = ("struct", "array", "map")
_EPOCH_DAY = date(1970, 1, 1)
_FIRST_DAY, _LAST_DAY = -719162, 2932896  # 0001-01-01 and 9999-12-31 in days since the epoch

MAX_DEPTH = 64
"""Structs, arrays and maps nested deeper than this in an envelope's schema reject the record
(clearly, instead of a ``RecursionError``)."""
_MAX_SCALE = 38
_MAX_DIGITS_LIMIT = 10**38
_MAX_BASE64 = 24  # base64 of 16 bytes; |unscaled| < 10**38 < 2**127 fits in 16 bytes
_SCALE_TEXT = re.compile(r"-?[0-9]{1,10}")


class ConnectSchemaTooDeep(ValueError):
    """The envelope's schema nests containers deeper than :data:`MAX_DEPTH`."""


def payload_plan(schema: Any) -> Plan | None:
    """The plan converting the logical values of a payload of ``schema``; None when it has
    none (the payload is taken as it is)."""
    return _plan(schema, 0)


def _plan(schema: Any, depth: int) -> Plan | None:
    if type(schema) is not dict:
        return None
    logical = schema.get("name")
    if logical == _DECIMAL:
        return _decimal_plan(schema.get("parameters"))
    if logical == _DATE:
        return _date
    kind = schema.get("type")
    if kind not in _CONTAINERS:
        return None
    if depth >= MAX_DEPTH:
        raise ConnectSchemaTooDeep(f"the envelope's schema nests structs, arrays and maps deeper "
                                   f"than {MAX_DEPTH} levels")
    if kind == "struct":
        fields = schema.get("fields")
        return _struct_plan(fields, depth) if type(fields) is list else None
    inner = _plan(schema.get("items" if kind == "array" else "values"), depth + 1)
    if inner is None:
        return None
    return _array(inner) if kind == "array" else _map(inner)


def _struct_plan(fields: list[Any], depth: int) -> Plan | None:
    plans: dict[str, Plan] = {}
    for field in fields:
        if type(field) is not dict:
            continue
        name = field.get("field")
        if type(name) is not str:
            continue
        if field.get("name") is None and field.get("type") not in _CONTAINERS:
            plans.pop(name, None)  # a primitive field (the common case): nothing to do
            continue
        inner = _plan(field, depth + 1)
        if inner is None:
            plans.pop(name, None)  # of two entries for one name the last counts, as in JSON
        else:
            plans[name] = inner
    if not plans:
        return None
    entries = tuple(plans.items())

    def convert(value: Any) -> Any:
        if type(value) is dict:
            if len(entries) <= len(value):
                for name, plan in entries:
                    field = value.get(name)
                    if field is not None:
                        value[name] = plan(field)
            else:
                for name, field in list(value.items()):
                    found = plans.get(name)
                    if found is not None and field is not None:
                        value[name] = found(field)
        return value

    return convert


def _array(inner: Plan) -> Plan:
    def convert(value: Any) -> Any:
        if type(value) is list:
            for index, item in enumerate(value):
                if item is not None:
                    value[index] = inner(item)
        return value

    return convert


def _map(inner: Plan) -> Plan:
    def convert(value: Any) -> Any:
        if type(value) is dict:  # string keys: Connect writes other maps as [key, value] pairs
            for key, item in list(value.items()):
                if item is not None:
                    value[key] = inner(item)
        return value

    return convert


def _date(value: Any) -> Any:
    if type(value) is not int:
        return value  # not Connect's encoding: the column decides
    if _FIRST_DAY <= value <= _LAST_DAY:
        return (_EPOCH_DAY + timedelta(days=value)).isoformat()
    return Unreadable(f"Connect Date {value} (days since 1970-01-01) is outside years 1..9999")


def _scale(parameters: Any) -> int | str:
    """The scale of a Connect Decimal, or why there is none usable."""
    raw = parameters.get("scale") if type(parameters) is dict else None
    if type(raw) is str and _SCALE_TEXT.fullmatch(raw):
        raw = int(raw)
    if type(raw) is not int:
        return f"Connect Decimal without an integer parameters.scale (got {str(raw)[:40]!r})"
    if not -_MAX_SCALE <= raw <= _MAX_SCALE:
        return f"Connect Decimal scale {str(raw)[:40]} is outside -{_MAX_SCALE}..{_MAX_SCALE}"
    return raw


def _decimal_plan(parameters: Any) -> Plan:
    scale = _scale(parameters)

    def convert(value: Any) -> Any:
        if type(value) is not str:
            return value  # a number (decimal.format=NUMERIC), read as the column reads numbers
        if isinstance(scale, str):
            return Unreadable(scale)
        return _unscaled(value, scale)

    return convert


def _unscaled(text: str, scale: int) -> Decimal | Unreadable:
    """Base64 of the unscaled value at ``scale`` → the exact Decimal (never through a context
    that could round: 38 digits do not fit Python's default 28)."""
    if len(text) > _MAX_BASE64:
        return Unreadable(f"Connect Decimal of {len(text)} base64 characters holds more than 38 "
                          f"digits (at most {_MAX_BASE64} characters)")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return Unreadable(f"Connect Decimal {text!r} is not base64")
    if not raw:
        return Unreadable("Connect Decimal is empty")
    unscaled = int.from_bytes(raw, "big", signed=True)
    if abs(unscaled) >= _MAX_DIGITS_LIMIT:
        return Unreadable(f"Connect Decimal {unscaled} (unscaled) has more than 38 digits")
    return Decimal(f"{unscaled}E{-scale}")
