"""``sink.properties``: the Hudi Kafka Connect sink's configuration keys (RFC-32, "Configurations")
mapped onto hudi-sink's own config, so people migrating bring their file as it is.

The mapping lives here once (``SEED_KEYS``, ``IGNORED_KEYS``); the README's table is written
from it and ``tests/unit/test_seed_config.py`` checks both agree. A seed key is either

- **mapped** onto a YAML key (``target.base.path`` → ``table.base_path``), its value converted
  and checked here so an error names the key the user wrote;
- **checked** only: accepted with the one value that describes what hudi-sink does
  (``hoodie.table.base.file.format=PARQUET``), refused with the reason otherwise;
- **ignored** with a warning saying why (``tasks.max``: parallelism is the number of participant
  processes).

A key written as hudi-sink's own dotted path (``table.record_key_field=id``, ``name=orders``)
is taken as it is, for the settings the seed has no name for; the config's strict validation
then refuses what it does not know. Any other key is an error naming it. Values of own keys
that start with ``[`` or ``{`` are JSON, as in environment overrides.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hudi_sink.shared.errors import ConfigError

__all__ = ["SeedKey", "SEED_KEYS", "IGNORED_KEYS", "OWN_SECTIONS", "SeedTranslation", "translate"]

KeyPath = tuple[str, ...]

OWN_SECTIONS = frozenset({"name", "kafka", "table", "transaction", "errors", "deletion", "admin",
                          "service", "spark", "maintenance", "avro", "log", "upsert"})
"""First segments of hudi-sink's own dotted keys (sections of ``SinkConfig``; a section the
config does not have is still refused by its validation, naming the key)."""


def _text(value: str) -> str:
    if not value.strip():
        raise ValueError("empty value")
    return value.strip()


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"expected true or false, got {value!r}")
    return lowered == "true"


def _int(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(f"expected an integer, got {value!r}") from None


def _list(value: str) -> list[str]:
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items:
        raise ValueError("expected a comma-separated list, got nothing")
    return items


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min)?\s*$")


def _seconds_ms(value: str) -> int:
    """A duration in seconds (the unit of Hudi's own ``hoodie.kafka.coordinator.write.timeout.secs``);
    a ``ms``, ``s`` or ``min`` suffix makes the unit explicit."""
    match = _DURATION.match(value)
    if match is None:
        raise ValueError(f"expected a duration (seconds, or with ms/s/min), got {value!r}")
    number, unit = float(match.group(1)), match.group(2) or "s"
    return int(number * {"ms": 1, "s": 1000, "m": 60000, "min": 60000}[unit])


def _tolerance(value: str) -> str:
    return "dlq" if _bool(value) else "fail"


def _codec(value: str) -> str:
    codec = value.strip().lower()
    if codec == "uncompressed":
        codec = "none"
    if codec not in ("snappy", "zstd", "gzip", "lz4", "none"):
        raise ValueError(f"unsupported Parquet codec {value!r} (snappy, zstd, gzip, lz4, none)")
    return codec


def _only(allowed: Mapping[str, str | None]) -> Callable[[str], Any]:
    """A checked key: a value in ``allowed`` passes; its reason (when not None) refuses it."""

    def check(value: str) -> None:
        reason = allowed.get(value.strip(), "")
        if reason is None:
            return
        raise ValueError(reason or f"{value!r} is not supported "
                         f"(accepted: {', '.join(k for k, v in allowed.items() if v is None)})")

    return check


_CONVERTERS = {
    "org.apache.kafka.connect.json.JsonConverter": None,  # value_format from schemas.enable
    "org.apache.kafka.connect.storage.StringConverter": None,
    "io.confluent.connect.avro.AvroConverter": "avro",
}


def _converter(value: str) -> str | None:
    """``kafka.value_format`` of a Connect value converter (None: set by schemas.enable)."""
    if value.strip() not in _CONVERTERS:
        raise ValueError(f"{value!r} is not supported (accepted: {', '.join(_CONVERTERS)})")
    return _CONVERTERS[value.strip()]


def _user_info(value: str) -> dict[str, str]:
    user, sep, password = value.partition(":")
    if not sep or not user:
        raise ValueError("expected user:password")
    return {"registry_username": user, "registry_password": password}


@dataclass(frozen=True)
class SeedKey:
    """One seed key: where it goes and how its text becomes a value."""

    path: tuple[KeyPath, ...]
    """YAML keys it sets (empty: checked only)."""
    convert: Callable[[str], Any]
    also: Mapping[KeyPath, Any] = field(default_factory=dict)
    """Further YAML keys it implies, set unless the file sets them itself."""


SEED_KEYS: dict[str, SeedKey] = {
    "target.base.path": SeedKey((("table", "base_path"),), _text),
    "target.table.name": SeedKey((("table", "name"),), _text),
    "target.database.name": SeedKey((("table", "database"),), _text),
    "partition.field.name": SeedKey((("table", "partition_field"),), _text),
    "schemaprovider.class": SeedKey((), _only({
        "org.apache.hudi.utilities.schema.FilebasedSchemaProvider": None,
        "org.apache.hudi.utilities.schema.SchemaRegistryProvider": None})),
    "write.ignore.failed": SeedKey((("errors", "tolerance"),), _tolerance),
    "hoodie.table.base.file.format": SeedKey((), _only({
        "PARQUET": None,
        "ORC": "ORC base files are not written: hudi-sink writes Parquet only",
        "HFILE": "HFile base files are not written: hudi-sink writes Parquet only"})),
    "hoodie.allow.empty.commit": SeedKey((("transaction", "allow_empty_commit"),), _bool),
    "kafka.topic.names": SeedKey((("kafka", "topics"),), _list),
    "kafka.bootstrap.servers": SeedKey((("kafka", "bootstrap_servers"),), _text),
    "kafka.tls.certificate": SeedKey((("kafka", "ssl_cafile"),), _text,
                                     also={("kafka", "security_protocol"): "SSL"}),
    "value.converter": SeedKey((("kafka", "value_format"),), _converter),
    "value.converter.schemas.enable": SeedKey((("kafka", "value_format"),),
                                              lambda v: "connect_json" if _bool(v) else "json"),
    "enhanced.avro.schema.support": SeedKey((), _bool),
    "flush.size": SeedKey((("transaction", "flush_records"),), _int),
    "transaction.interval.ms": SeedKey((("transaction", "interval_ms"),), _int),
    "connect.meta.data": SeedKey((("table", "kafka_metadata"),), _bool),
    "retry.backoff.ms": SeedKey((("service", "retry_backoff_ms"),), _int),
    "shutdown.timeout.ms": SeedKey((("service", "shutdown_timeout_ms"),), _int),
    "parquet.codec": SeedKey((("table", "parquet_codec"),), _codec),
    "control.topic.name": SeedKey((("kafka", "control_topic"),), _text),
    "coordinator.writestatus.timeout": SeedKey((("transaction", "write_status_timeout_ms"),),
                                               _seconds_ms),
    "write.retry.timeout": SeedKey((("service", "retry_timeout_ms"),), _seconds_ms),
}
"""Seed key → what it sets. ``enhanced.avro.schema.support`` is checked as a boolean and has no
effect (it changes how Connect's Avro converter names enums and unions; values are JSON)."""

CONVERTER_KEYS: dict[str, SeedKey] = {
    "value.converter.schema.registry.url": SeedKey((("avro", "registry_url"),), _text),
    "value.converter.basic.auth.user.info": SeedKey((("avro",),), _user_info),
    **{f"hoodie.{tool}.schemaprovider.source.schema.file": SeedKey(
        (("table", "schema"),), lambda v: f"avsc:{_text(v)}") for tool in ("deltastreamer", "streamer")},
    **{f"hoodie.{tool}.schemaprovider.registry.url": SeedKey(
        (("table", "schema"),), lambda v: f"registry:{_text(v)}") for tool in ("deltastreamer", "streamer")},
}
"""Kafka Connect's own keys of the Avro converter and the settings of Hudi's two schema
providers (not in the seed's list, but in every file that uses them): the table schema from an
``.avsc`` file or a registry subject (``shared.schema.avro_ddl``)."""

IGNORED_KEYS: dict[str, str] = {
    "connector.class": "hudi-sink runs as its own services (hudi-sink coordinator/participant/"
                       "deleter), not inside a Kafka Connect worker",
    "tasks.max": "parallelism is the number of participant processes (scale the participant "
                 "Deployment or its autoscaler), at most one partition owner each",
    "hoodie.writestatus.class": "write statuses are hudi-sink's own control messages "
                                "(WRITE_STATUS in shared/kafka/protocol.py), not a pluggable class",
    "format.class": "base files are always written as Parquet through Spark",
    "key.converter": "record keys come from the value (table.record_key_field); the Kafka key "
                     "is kept as bytes in dead letters and in the connect.meta.data column",
    "avro.codec": "no Avro files are written (Parquet base files, JSON timeline); "
                  "see parquet.codec",
}
"""Keys of a Connect deployment that mean nothing here: accepted, with a warning saying why."""


@dataclass(frozen=True)
class SeedTranslation:
    """A properties file as a YAML-shaped mapping, and where each value came from."""

    data: dict[str, Any]
    origins: dict[KeyPath, str]
    """YAML key → the properties key that set it."""
    warnings: list[str]


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


def translate(properties: Mapping[str, str]) -> SeedTranslation:
    """Map parsed ``key=value`` pairs onto the YAML config; raises ``ConfigError`` naming the
    properties key for an unknown key or a value it refuses."""
    data: dict[str, Any] = {}
    origins: dict[KeyPath, str] = {}
    warnings: list[str] = []
    implied: dict[KeyPath, tuple[Any, str]] = {}
    for key, raw in properties.items():
        if key in IGNORED_KEYS:
            warnings.append(f"{key} is ignored: {IGNORED_KEYS[key]}")
            continue
        seed = SEED_KEYS.get(key) or CONVERTER_KEYS.get(key)
        if seed is None:
            if key.split(".", 1)[0] not in OWN_SECTIONS:
                raise ConfigError("unknown key (neither a Hudi Kafka Connect sink key nor a "
                                  "hudi-sink key such as table.record_key_field)", key)
            try:
                value = _own_value(raw)
            except ValueError:
                raise ConfigError("invalid JSON value", key) from None
            path = tuple(key.split("."))
            _set(data, path, value)
            origins[path] = key
            continue
        try:
            value = seed.convert(raw)
        except ValueError as exc:
            raise ConfigError(str(exc), key) from None
        if key == "enhanced.avro.schema.support":
            warnings.append(f"{key} has no effect: values are JSON, enums are strings")
        for path in seed.path if value is not None else ():
            if isinstance(value, dict):  # one key setting several (user:password)
                for name, item in value.items():
                    _set(data, (*path, name), item)
                    origins[(*path, name)] = key
                continue
            if path == ("kafka", "value_format") and path in origins and value != "avro":
                continue  # JsonConverter leaves the format to schemas.enable
            _set(data, path, value)
            origins[path] = key
        for path, implied_value in seed.also.items():
            implied[path] = (implied_value, key)
    for path, (value, key) in implied.items():
        if path not in origins:
            _set(data, path, value)
            origins[path] = key
    return SeedTranslation(data, origins, warnings)
