"""Reading a config file: YAML, TOML (``*.toml``, the same structure), or a ``.properties``
file with the Hudi Kafka Connect sink's key names (``shared.config.seed``), into the
YAML-shaped mapping ``shared.config.settings`` validates."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hudi_sink.shared.config.java_properties import parse_properties
from hudi_sink.shared.config.seed import translate
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


def read_config_file(path: str | Path) -> ConfigFile:
    """Read YAML (``*.yaml``, ``*.yml``, ``*.json``: JSON is YAML), TOML (``*.toml``), or
    (``*.properties``) Java properties with the Hudi Kafka Connect sink's key names
    (``shared.config.seed``). Raises ``ConfigError`` naming the file or the key; any other
    extension is refused."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file not found: {file}")
    suffix = file.suffix.lower()
    if suffix not in CONFIG_SUFFIXES:
        # Guessing a format from the contents misreads files (a .toml read as YAML parsed
        # into something else); a name that says nothing is refused with the names that do.
        raise ConfigError(
            f"config file {file}: unknown extension {file.suffix or '(none)'!r}; use "
            f"{', '.join(CONFIG_SUFFIXES[:-1])} or {CONFIG_SUFFIXES[-1]} (YAML, .json as YAML, "
            "TOML, Java properties)")
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
        return ConfigFile(seed.data, base_dir, seed.origins, seed.warnings)
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
