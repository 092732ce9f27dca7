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
from hudi_sink.shared.errors import ConfigError

__all__ = ["OWN_SECTIONS", "KeyFate", "SeedTranslation", "translate"]

KeyPath = tuple[str, ...]

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

    def __init__(self) -> None:
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
        if earlier is not None and earlier != key and _get(self.data, path) != value:
            self.problems.append((key, f"sets {'.'.join(path)} to {value!r}, which {earlier} "
                                       f"already set to {_get(self.data, path)!r}: keep one"))
            return
        try:
            _set(self.data, path, value)
        except ConfigError as exc:
            self.problems.append((key, str(exc)))
            return
        self.origins[path] = key

    def apply(self, key: str, raw: str, rule: KeyRule) -> None:
        if rule.status == "refused":
            self.refuse(key, raw, rule.reason)
            return
        if rule.status == "ignored":
            self.warnings.append(f"{key} is ignored: {rule.reason}")
            self.fates.append(KeyFate(key, raw, "ignored", rule.reason))
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
            if path == ("kafka", "value_format") and path in self.origins:
                if value != "avro":
                    continue  # JsonConverter leaves the format to schemas.enable
                self.origins.pop(path)  # AvroConverter decides it, whatever schemas.enable said
            self.put(key, path, value)
        for path, implied_value in rule.also.items():
            self.implied[path] = (implied_value, key)
        detail = f"→ {rule.targets}" + (f" ({rule.reason})" if rule.reason else "")
        self.fates.append(KeyFate(key, raw, rule.status,
                                  detail if rule.status == "mapped" else rule.reason))


def _get(data: Mapping[str, Any], path: KeyPath) -> Any:
    node: Any = data
    for part in path:
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def translate(properties: Mapping[str, str]) -> SeedTranslation:
    """Map the file's ``key=value`` pairs onto the YAML config by ``connector_keys.KEYS``;
    raises one ``ConfigError`` listing every problem, each naming the file's key."""
    reader = _Reader()
    for key, raw in properties.items():
        rule = rule_for(key)
        if rule is not None:
            reader.apply(key, raw, rule)
        elif key.split(".", 1)[0] in OWN_SECTIONS:
            reader.own(key, raw)
        else:
            reader.refuse(key, raw, _unknown(key))
    for path, (value, key) in reader.implied.items():
        if path not in reader.origins:
            reader.put(key, path, value)
    if reader.problems:
        first, message = reader.problems[0]
        others = len(reader.problems) - 1
        if others:
            message += f" (and {others} more problem{'s' if others > 1 else ''})"
        raise ConfigError(message, first, problems=reader.problems)
    return SeedTranslation(reader.data, reader.origins, reader.warnings, reader.fates)
