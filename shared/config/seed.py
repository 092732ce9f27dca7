"""A flat file of Kafka Connect / Hudi keys (``sink.properties``, or a Connect JSON connector
config) read onto hudi-sink's own config, so a team migrating from Hudi's Kafka Connect sink
brings its file as it is.

What each key does is decided by one table, ``shared.config.connector_keys.KEYS`` (mapped /
honoured / ignored / refused); this module applies it and records every key's fate
(``KeyFate``) for ``hudi-sink config check``. A key written as hudi-sink's own dotted path
(``table.record_key_field=id``, ``name=orders``) is taken as it is, for the settings the table
has no name for; the config's strict validation then refuses what it does not know. Values of
own keys that start with ``[`` or ``{`` are JSON, as in environment overrides.

Every problem of the file is reported at once (one ``ConfigError`` with all of them, each
naming the key the user wrote): an unknown key (with the closest known key), a refused key or
value (with the reason), two keys setting one hudi-sink key to different values.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hudi_sink.shared.config.connector_keys import KEYS, KeyRule, Status, rule_for
from hudi_sink.shared.config.errors_section import CONNECT_TOLERANCE
from hudi_sink.shared.errors import ConfigError

__all__ = ["OWN_SECTIONS", "KeyFate", "SeedTranslation", "translate"]

KeyPath = tuple[str, ...]

_JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
_SCHEMAS_ENABLE = "value.converter.schemas.enable"
_FORMAT: KeyPath = ("kafka", "value_format")
_TOLERANCE: KeyPath = ("errors", "tolerance")

OWN_SECTIONS = frozenset({"name", "kafka", "table", "transaction", "errors", "deletion", "admin",
                          "service", "spark", "maintenance", "avro", "log", "upsert"})
"""First segments of hudi-sink's own dotted keys (sections of ``SinkConfig``; a section the
config does not have is still refused by its validation, naming the key)."""


@dataclass(frozen=True)
class KeyFate:
    """What became of one key of the file: a row of ``config check``'s table."""

    key: str
    value: str
    status: Status
    detail: str
    """mapped: ``→ hudi-sink key`` and what it does; else the reason."""


@dataclass(frozen=True)
class SeedTranslation:
    """A flat file as a YAML-shaped mapping, and where each value came from."""

    data: dict[str, Any]
    origins: dict[KeyPath, str]
    """YAML key → the file's key that set it."""
    warnings: list[str]
    """``KEY is ignored: reason``, one per ignored key (services log them at start)."""
    fates: list[KeyFate]
    """Every key of the file, in file order, with its fate."""


def _set(data: dict[str, Any], path: KeyPath, value: Any) -> None:
    node = data
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError("sets both a section and a value", ".".join(path))
        node = child
    node[path[-1]] = value


def _own_value(raw: str) -> Any:
    if raw.lstrip().startswith(("[", "{")) or raw.strip() == "null":
        return json.loads(raw)
    return raw


def _unknown(key: str) -> str:
    message = ("unknown key (neither a Kafka Connect / Hudi key hudi-sink knows nor a hudi-sink "
               "key such as table.record_key_field)")
    close = difflib.get_close_matches(key, list(KEYS), n=1, cutoff=0.8)
    return message + (f"; did you mean {close[0]!r}?" if close else "")


class _Reader:
    """One pass over the file's keys: the mapping, the origins, the fates and the problems."""

    def __init__(self, properties: Mapping[str, str]) -> None:
        self.converter = properties.get("value.converter", "").strip() or None
        """The file's ``value.converter``: ``schemas.enable`` means something only with
        JsonConverter, which Connect runs with ``schemas.enable=true`` unless told otherwise."""
        self.data: dict[str, Any] = {}
        self.origins: dict[KeyPath, str] = {}
        self.warnings: list[str] = []
        self.fates: list[KeyFate] = []
        self.problems: list[tuple[str | None, str]] = []
        self.implied: dict[KeyPath, tuple[Any, str]] = {}

    def refuse(self, key: str, raw: str, reason: str) -> None:
        self.problems.append((key, reason))
        self.fates.append(KeyFate(key, raw, "refused", reason))

    def own(self, key: str, raw: str) -> None:
        try:
            value = _own_value(raw)
        except ValueError:
            self.refuse(key, raw, "invalid JSON value")
            return
        path = tuple(key.split("."))
        self.put(key, path, value)
        self.fates.append(KeyFate(key, raw, "honoured", "hudi-sink's own key"))

    def put(self, key: str, path: KeyPath, value: Any) -> None:
        earlier = self.origins.get(path)
        if earlier is not None and earlier != key and not _same(path, _get(self.data, path), value):
            self.problems.append((key, f"sets {'.'.join(path)} to {value!r}, which {earlier} "
                                       f"already set to {_get(self.data, path)!r}: keep one"))
            return
        try:
            _set(self.data, path, value)
        except ConfigError as exc:
            self.problems.append((key, str(exc)))
            return
        self.origins[path] = key

    def ignore(self, key: str, raw: str, reason: str) -> None:
        self.warnings.append(f"{key} is ignored: {reason}")
        self.fates.append(KeyFate(key, raw, "ignored", reason))

    def apply(self, key: str, raw: str, rule: KeyRule) -> None:
        if key == _SCHEMAS_ENABLE and self.converter not in (None, _JSON_CONVERTER):
            self.ignore(key, raw, f"schemas.enable applies only to {_JSON_CONVERTER}; "
                                  f"value.converter is {self.converter}, which does not read it "
                                  "(as in Kafka Connect)")
            return
        if rule.status == "refused":
            self.refuse(key, raw, rule.reason)
            return
        if rule.status == "ignored":
            self.ignore(key, raw, rule.reason)
            return
        try:
            value = rule.convert(raw)
        except ValueError as exc:
            self.refuse(key, raw, str(exc))
            return
        for path in rule.paths if value is not None else ():
            if isinstance(value, dict):  # one key setting several (user:password)
                for name, item in value.items():
                    self.put(key, (*path, name), item)
                continue
            self.put(key, path, value)
        for path, implied_value in rule.also.items():
            self.implied[path] = (implied_value, key)
        detail = f"→ {rule.targets}" + (f" ({rule.reason})" if rule.reason else "")
        self.fates.append(KeyFate(key, raw, rule.status,
                                  detail if rule.status == "mapped" else rule.reason))


_KEY_GENERATOR_KEYS = ("hoodie.datasource.write.keygenerator.class",
                       "hoodie.datasource.write.keygenerator.type")


def _key_generator_problem(properties: Mapping[str, str], data: Mapping[str, Any]) -> \
        tuple[str, str] | None:
    """A key generator that contradicts the key fields, as (its key, the reason).

    hudi-sink writes the record key as the value of ``table.record_key_field`` for one field
    and ``a:1,b:2`` for several: that is what SimpleKeyGenerator and ComplexKeyGenerator (with
    several fields) write. ComplexKeyGenerator with one field writes ``id:1`` in Hudi, so it
    is refused rather than written differently; a non-partitioned generator with a partition
    field, and a simple one with several key fields, contradict themselves."""
    for key in _KEY_GENERATOR_KEYS:
        generator = properties.get(key, "").strip().rsplit(".", 1)[-1].upper()
        if not generator:
            continue
        fields = str(_get(data, ("table", "record_key_field")) or "id").split(",")
        partition = _get(data, ("table", "partition_field"))
        if generator.startswith("NONPARTITIONED") or generator == "NON_PARTITION":
            if partition:
                return key, (f"a non-partitioned key generator with a partition field "
                             f"({partition!r}): drop the partition path field, or use the "
                             "simple or complex key generator")
        elif generator.startswith("COMPLEX") and len(fields) == 1:
            return key, ("the complex key generator with one key field writes keys as "
                         "field:value (id:1); hudi-sink writes the bare value for one field, as "
                         "the simple key generator does: use SimpleKeyGenerator (or list "
                         "several key fields)")
        elif generator.startswith("SIMPLE") and len(fields) > 1:
            return key, (f"the simple key generator takes one key field, got {len(fields)}: "
                         "use ComplexKeyGenerator for several")
    return None


def _same(path: KeyPath, earlier: Any, value: Any) -> bool:
    """Two keys agree: ``errors.tolerance=all`` and ``hoodie.kafka.allow.commit.on.errors=true``
    both mean ``dlq`` (Connect's values are read through ``CONNECT_TOLERANCE``)."""
    if path == _TOLERANCE and isinstance(earlier, str) and isinstance(value, str):
        return (CONNECT_TOLERANCE.get(earlier.strip().lower(), earlier)
                == CONNECT_TOLERANCE.get(value.strip().lower(), value))
    return bool(earlier == value)


def _get(data: Mapping[str, Any], path: KeyPath) -> Any:
    node: Any = data
    for part in path:
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def translate(properties: Mapping[str, str]) -> SeedTranslation:
    """Map the file's ``key=value`` pairs onto the YAML config by ``connector_keys.KEYS``;
    raises one ``ConfigError`` listing every problem, each naming the file's key."""
    reader = _Reader(properties)
    for key, raw in properties.items():
        rule = rule_for(key)
        if rule is not None:
            reader.apply(key, raw, rule)
        elif key.split(".", 1)[0] in OWN_SECTIONS:
            reader.own(key, raw)
        else:
            reader.refuse(key, raw, _unknown(key))
    if reader.converter == _JSON_CONVERTER and _FORMAT not in reader.origins:
        reader.put("value.converter", _FORMAT, "connect_json")  # Connect's schemas.enable=true
    for path, (value, key) in reader.implied.items():
        if path not in reader.origins:
            reader.put(key, path, value)
    contradiction = _key_generator_problem(properties, reader.data)
    if contradiction is not None:
        reader.fates = [fate for fate in reader.fates if fate.key != contradiction[0]]
        reader.refuse(contradiction[0], properties[contradiction[0]], contradiction[1])
    if reader.problems:
        first, message = reader.problems[0]
        others = len(reader.problems) - 1
        if others:
            message += f" (and {others} more problem{'s' if others > 1 else ''})"
        raise ConfigError(message, first, problems=reader.problems)
    return SeedTranslation(reader.data, reader.origins, reader.warnings, reader.fates)
