"""Environment overrides of a config: ``HUDI_SINK__SECTION__KEY=value`` as the nested mapping
the loader merges over the file's (precedence: CLI flag > environment > file > default).

``config check`` parses the environment with the same function, so the source it shows for
a value ("env") is exactly what the loader applied.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hudi_sink.shared.config.problems import ENV_PREFIX
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.redaction import is_secret_key

__all__ = ["env_overrides", "deep_merge"]


def env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """Turn ``HUDI_SINK__SECTION__KEY=value`` into a nested dict.

    Lists and maps are JSON (``HUDI_SINK__KAFKA__TOPICS='["a","b"]'``); ``null`` is None,
    except for a secret (``HUDI_SINK__ADMIN__TOKEN=null``: ``ConfigError`` naming the key);
    other values stay strings and are converted by the field's type.
    """
    nested: dict[str, Any] = {}
    for env_key, raw in environ.items():
        if not env_key.startswith(ENV_PREFIX):
            continue
        parts = [p.lower() for p in env_key[len(ENV_PREFIX):].split("__") if p]
        if not parts:
            continue
        value: Any = raw
        if raw.strip() == "null" and is_secret_key(parts[-1]):
            # Not "no secret": a template that rendered a missing value, or a Secret holding
            # the word, must not quietly switch authentication off.
            raise ConfigError(f"environment variable {env_key} is 'null': a secret is never "
                              "switched off that way (an unrendered or wrong Secret?); set a "
                              "real value, or unset the variable to run without one",
                              ".".join(parts))
        if raw.lstrip().startswith(("[", "{")) or raw.strip() == "null":
            # Lists and maps come as JSON; scalars stay strings and pydantic converts them
            # per field, so HUDI_SINK__NAME=2024 stays the string "2024".
            try:
                value = json.loads(raw)
            except ValueError:
                raise ConfigError(f"invalid JSON in environment variable {env_key}",
                                  ".".join(parts)) from None
        node = nested
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError("environment sets both a section and a value", ".".join(parts))
        node[parts[-1]] = value
    return nested


def deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` over ``base``: sections merged key by key (an environment variable sets
    one key of a file's section, not the whole section); any other value replaces."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged
