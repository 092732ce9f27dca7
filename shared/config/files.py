"""Reading a config file: YAML, TOML (``*.toml``, the same structure), a ``.properties`` file
with the Hudi Kafka Connect sink's key names, or a Kafka Connect JSON connector config
(``*.json``: ``{"name": …, "config": {…}}`` as teams POST it to Connect, or a bare object of
those keys), the last two read by ``shared.config.seed``, into the YAML-shaped mapping
``shared.config.settings`` validates."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hudi_sink.shared.config.environment import deep_merge, env_overrides
from hudi_sink.shared.config.java_properties import parse_properties
from hudi_sink.shared.config.seed import KeyFate, translate
from hudi_sink.shared.errors import ConfigError

__all__ = ["ConfigFile", "read_config_file", "CONFIG_SUFFIXES"]

CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".properties")
"""The config file names the loader knows how to read (any case); others are refused."""


@dataclass(frozen=True)
class ConfigFile:
    """A config file's contents as the YAML-shaped mapping the loader validates."""

    data: dict[str, Any]
    base_dir: Path
    origins: dict[tuple[str, ...], str] = field(default_factory=dict)
    """For a properties file: YAML key → the properties key that set it."""
    warnings: list[str] = field(default_factory=list)
    """Keys accepted but ignored, each with the reason."""
    fates: list[KeyFate] = field(default_factory=list)
    """For a file of Connect / Hudi keys: every key with its fate (``config check``'s table)."""

    def check_schema_source(self, environ: Mapping[str, str],
                            overrides: Mapping[str, Any] | None) -> None:
        """A file that names Hudi's schema provider but none of its keys (registry URL or
        schema file) would run with hudi-sink's default ``table.schema``, a schema nobody
        chose: ``ConfigError`` naming the provider key, unless the environment or a flag sets
        ``table.schema`` instead."""
        provider = next((f for f in self.fates if f.key.endswith("schemaprovider.class")), None)
        if provider is None or ("table", "schema") in self.origins:
            return
        given = deep_merge(env_overrides(environ), overrides or {}).get("table")
        if isinstance(given, Mapping) and "schema" in given:
            return
        kind = "registry.url" if provider.value.endswith("SchemaRegistryProvider") else \
            "source.schema.file"
        raise ConfigError(f"{provider.value.rsplit('.', 1)[-1]} needs "
                          f"hoodie.deltastreamer.schemaprovider.{kind} (or hoodie.streamer.…) for "
                          "the table's schema, or table.schema", provider.key)

    def named(self, error: ConfigError) -> ConfigError:
        """``error`` naming the properties key that set the YAML key at fault, when one did
        (``transaction.interval.ms (→ transaction.interval_ms): …``), for every problem."""
        problems = [(self._name(key), message) for key, message in error.problems]
        if all(new == old for (new, _), (old, _) in zip(problems, error.problems, strict=True)):
            return error
        key = self._name(error.key)
        return ConfigError(str(error).removeprefix(f"{error.key}: "), key,
                           problems=problems)

    def _name(self, key: str | None) -> str | None:
        origin = self.origins.get(tuple(key.split("."))) if key else None
        return key if origin is None or origin == key else f"{origin} (→ {key})"


def _flat_text(key: str, value: Any) -> str:
    """A Connect JSON value as the text a ``.properties`` file would hold: Connect takes
    ``"hoodie.keep.max.commits": 10`` and ``"10"`` alike; true/false are lower case; a list or
    object (only meaningful for hudi-sink's own keys) is its JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def _connect_keys(file: Path) -> dict[str, str] | None:
    """The flat keys of a Connect JSON connector config: ``{"name": …, "config": {…}}`` (the
    body of Connect's ``POST /connectors``, or what ``GET /connectors/<name>`` answers, with
    ``tasks`` and ``type`` beside; ``name`` becomes a key beside the others, as in
    ``PUT /connectors/<name>/config``), or a bare object whose values are all scalars. None
    for any other JSON (a YAML-shaped config written as JSON, with sections)."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"config file {file} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {file} must hold an object at the top level")
    if isinstance(data.get("config"), dict) and set(data) <= {"name", "config", "tasks", "type"}:
        connector = dict(data["config"])
        if "name" in data and "name" not in connector:
            connector = {"name": data["name"], **connector}
        return {key: _flat_text(key, value) for key, value in connector.items()}
    if data and not any(isinstance(value, dict) for value in data.values()):
        return {key: _flat_text(key, value) for key, value in data.items()}
    return None


def read_config_file(path: str | Path) -> ConfigFile:
    """Read YAML (``*.yaml``, ``*.yml``), TOML (``*.toml``), Java properties
    (``*.properties``) or a Connect JSON connector config (``*.json``; both with Kafka Connect /
    Hudi key names, ``shared.config.seed``; a ``*.json`` with sections is our YAML structure
    written as JSON, read as YAML). Raises ``ConfigError`` naming the file or the key; any
    other extension is refused."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file not found: {file}")
    suffix = file.suffix.lower()
    if suffix not in CONFIG_SUFFIXES:
        # Guessing a format from the contents misreads files (a .toml read as YAML parsed
        # into something else); a name that says nothing is refused with the names that do.
        raise ConfigError(
            f"config file {file}: unknown extension {file.suffix or '(none)'!r}; use "
            f"{', '.join(CONFIG_SUFFIXES[:-1])} or {CONFIG_SUFFIXES[-1]} (YAML, JSON: a Connect "
            "connector config or YAML's structure, TOML, Java properties)")
    base_dir = file.resolve().parent
    if suffix == ".properties":
        # Java reads .properties as ISO-8859-1; UTF-8 is what people write today, and
        # \uXXXX escapes work in both.
        raw = file.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
        seed = translate(parse_properties(text))
        return ConfigFile(seed.data, base_dir, seed.origins, seed.warnings, seed.fates)
    if suffix == ".json":
        flat = _connect_keys(file)
        if flat is not None:
            seed = translate(flat)
            return ConfigFile(seed.data, base_dir, seed.origins, seed.warnings, seed.fates)
    if suffix == ".toml":
        # TOML has the YAML file's structure (tables for sections); read as YAML, a TOML
        # file failed with a confusing YAML error or, worse, parsed into something else.
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {file} is not valid TOML: {exc}") from None
        return ConfigFile(data, base_dir)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {file} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {file} must hold a mapping at the top level")
    return ConfigFile(data, base_dir)
