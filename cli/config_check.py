"""``hudi-sink config check``: what a service would run with, before it runs.

The config is loaded by the same loader the services use (``shared.config.settings.load_config``: file,
then environment, strict validation, relative ``base_path`` resolved), so a config that passes
here starts a service and one that fails here fails there with the same message (exit 2
naming the key). Deployments run it on the rendered ConfigMap (the Helm chart's tests do) and
operators run it in a pod to see the effective settings.

A ``.properties`` file or a Connect JSON connector config (Kafka Connect / Hudi key names,
``shared.config.seed``) is read by the same reader; each value it set names the file's key too
(``# file (target.base.path)``), and a table lists every key of the file with its fate —
mapped (onto which key), honoured, ignored (why) — so a migrating team sees what became of
each setting (a refused key fails the check, exit 2, with the reason).

The output is the resolved configuration as YAML, each value followed by where it came from
(``file``, ``env`` or ``default``), with secrets redacted by ``shared.redaction`` (the rules
every log line follows too): fields declared ``repr=False`` in ``shared.config.settings``
(``admin.token``, ``kafka.sasl_plain_password``, ``avro.registry_password``), and anywhere —
sections and free-form maps such as ``spark.conf`` and ``table.storage_options`` — entries
whose key looks like a credential (``aws_secret_access_key``, ``azure_storage_master_key``,
``fs.s3a.encryption.key``, ``sas_token`` …), plus the password and secret parameters inside
URLs (``https://user:***@registry``, ``sc://host:15002/;token=***``, ``?…&sig=***``). A
redacted value that is set shows as ``<redacted>``; an unset one stays ``null``, so an operator
can still see whether the token reached the pod.

A deprecated key (``shared.config.deprecated``) is listed with its replacement, and the value
it set is shown under the new key with the old key's source, so the output is already the
renamed config.

The table the config names is read too (``cli.table_check``, read-only, local tables only):
a config it was not created for — another write mode, record key or name — fails here as it
would fail every service's start, and a line says what was found (``# table: …``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from hudi_sink.cli.table_check import check_table
from hudi_sink.shared.config.deprecated import DEPRECATED_KEYS, deprecations

# The loader's own environment parsing, so "env" is attributed exactly as the loader applied it.
from hudi_sink.shared.config.environment import deep_merge, env_overrides
from hudi_sink.shared.config.errors_section import nest_dotted
from hudi_sink.shared.config.files import read_config_file
from hudi_sink.shared.config.kafka_security import offline_notes
from hudi_sink.shared.config.seed import KeyFate
from hudi_sink.shared.config.settings import SinkConfig, load_config
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.redaction import REDACTED, redact_value

__all__ = ["Checked", "check_config", "render_yaml", "render_json", "secret_paths"]

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

KeyPath = tuple[str, ...]


def secret_paths(model: type[BaseModel] = SinkConfig, prefix: KeyPath = ()) -> set[KeyPath]:
    """Paths (YAML key names) of every field declared secret (``repr=False``) in the model."""
    found: set[KeyPath] = set()
    for name, field in model.model_fields.items():
        path = (*prefix, field.alias or name)
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found |= secret_paths(annotation, path)
        elif field.repr is False:
            found.add(path)
    return found


def _leaves(node: Any, path: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    if isinstance(node, Mapping) and node:
        for key, value in node.items():
            yield from _leaves(value, (*path, str(key)))
    else:
        yield path, node


def _has(nested: Mapping[str, Any], path: KeyPath) -> bool:
    """Whether ``nested`` sets ``path`` or a section above it (a whole section from env JSON)."""
    node: Any = nested
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
        if not isinstance(node, Mapping):
            return True
    return True


def _redact(data: dict[str, Any]) -> dict[str, Any]:
    """Fields declared secret show as ``<redacted>`` whatever their name; every other leaf,
    in a section or a free-form map, by ``shared.redaction`` (its key, URLs in its value)."""
    secrets = secret_paths()

    def walk(node: Any, path: KeyPath) -> Any:
        if isinstance(node, Mapping):  # a section, or a map (spark.conf, storage_options)
            return {key: walk(value, (*path, key)) for key, value in node.items()}
        if path in secrets:
            return REDACTED if node is not None else None
        if isinstance(node, list):  # kafka.topics …: each item judged under the list's key
            return [redact_value(path[-1], item) for item in node]
        return redact_value(path[-1], node) if path else node

    return dict(walk(data, ()))


@dataclass(frozen=True)
class Checked:
    """A config as a service would run with it, and where each value came from."""

    config: SinkConfig
    data: dict[str, Any]
    """The resolved config, secrets redacted."""
    sources: dict[KeyPath, str]
    """Each leaf: ``file``, ``env`` or ``default``."""
    origins: dict[KeyPath, str] = dc_field(default_factory=dict)
    """Leaves a properties file set: the properties key that set them."""
    warnings: list[str] = dc_field(default_factory=list)
    """Properties keys accepted but ignored, with the reason."""
    deprecated: list[str] = dc_field(default_factory=list)
    """Deprecated keys the config uses, each with what replaces it."""
    table: str = ""
    """What was found at ``table.base_path`` (``cli.table_check``)."""
    fates: list[KeyFate] = dc_field(default_factory=list)
    """A file of Connect / Hudi keys: each key with its fate, secret values redacted."""
    offline: list[str] = dc_field(default_factory=list)
    """With ``--offline``: each file or package key that was not checked."""


def check_config(path: str | Path, environ: Mapping[str, str] | None = None, *,
                 offline: bool = False) -> Checked:
    """Load ``path`` as a service would; return the config, its redacted dump and each leaf's
    source. Raises ``ConfigError`` (exit 2 naming the key) exactly where a service would.
    ``offline``: files and packages only the sink's machine has are not checked, and the
    result's ``offline`` lists each such key."""
    env = dict(os.environ if environ is None else environ)
    # log_notes=False: the output lists them, once
    config = load_config(path, environ=env, log_notes=False, offline=offline)
    problems, table = check_table(config)  # the table it names, read-only, as a service checks it
    if problems:
        raise ConfigError(problems[0][1], problems[0][0], problems=problems)
    file = read_config_file(path)
    file_data = file.data
    if isinstance(file_data.get("errors"), Mapping):  # Connect's dotted names, as the model reads them
        file_data = {**file_data, "errors": nest_dotted(file_data["errors"])}
    env_data = env_overrides(env)
    dumped = config.model_dump(mode="json", by_alias=True)
    sources: dict[KeyPath, str] = {}
    for leaf, _ in _leaves(dumped):
        if _has(env_data, leaf):
            sources[leaf] = "env"
        elif _has(file_data, leaf):
            sources[leaf] = "file"
        else:
            sources[leaf] = "default"
    origins = {leaf: key for leaf, key in file.origins.items() if sources.get(leaf) == "file"}
    for old, (new, _) in DEPRECATED_KEYS.items():  # the old key set the new one's value
        old_path, new_path = tuple(old.split(".")), tuple(new.split("."))
        for data, source in ((env_data, "env"), (file_data, "file")):
            if sources.get(new_path) == "default" and _has(data, old_path):
                sources[new_path] = source
    skipped = offline_notes(deep_merge(dict(file_data), env_data)) if offline else []
    return Checked(config, _redact(dumped), sources, origins, list(file.warnings),
                   deprecations(config), table, _redacted_fates(file.fates, file.origins),
                   skipped)


def _redacted_fates(fates: list[KeyFate], origins: Mapping[KeyPath, str]) -> list[KeyFate]:
    """``fates`` with the value of a key that set a secret (or is named like one) redacted,
    and credentials inside the other values (a registry URL's password) masked."""
    secrets = secret_paths()
    secret_keys = {key for path, key in origins.items()
                   if any(path[:len(s)] == s for s in secrets) or path in secrets}
    return [KeyFate(f.key, REDACTED, f.status, f.detail) if f.key in secret_keys
            else KeyFate(f.key, str(redact_value(f.key, f.value)), f.status, f.detail)
            for f in fates]


def _fate_lines(checked: Checked, origin: str) -> list[str]:
    """The table of the file's keys: key, fate, value, and where it went or why."""
    if not checked.fates:
        return []
    width = max(len(f.key) for f in checked.fates)
    lines = [f"# keys of {origin} (Kafka Connect / Hudi names), each with its fate:"]
    lines += [f"#   {f.key:<{width}}  {f.status:<8}  {json.dumps(f.value, ensure_ascii=False)}"
              f"  {f.detail}" for f in checked.fates]
    return lines


def _key(text: str) -> str:
    return text if _PLAIN_KEY.match(text) else json.dumps(text)


def render_yaml(checked: Checked, origin: str) -> str:
    """YAML a service would accept again (values are JSON scalars, a subset of YAML), each
    value annotated with its source."""
    config, data, sources = checked.config, checked.data, checked.sources
    lines = [f"# hudi-sink config check: {origin} is valid. Secrets are redacted; after each",
             "# value: where it came from (file, env, default)."]
    fates = _fate_lines(checked, origin)
    lines += fates or [f"# ignored: {warning}" for warning in checked.warnings]
    lines += [f"# deprecated: {note}" for note in checked.deprecated]
    lines += [f"# table: {checked.table}"] if checked.table else []
    lines += [f"# offline: {note}" for note in checked.offline]

    def walk(node: Mapping[str, Any], path: KeyPath, depth: int) -> None:
        for key, value in node.items():
            here = (*path, key)
            indent = "  " * depth
            if isinstance(value, Mapping) and value:
                lines.append(f"{indent}{_key(key)}:")
                walk(value, here, depth + 1)
            else:
                rendered = json.dumps(value, ensure_ascii=False)
                source = sources.get(here, "default")
                if here in checked.origins:
                    source += f" ({checked.origins[here]})"
                lines.append(f"{indent}{_key(key)}: {rendered}  # {source}")

    walk(data, (), 0)
    lines += [
        f"# topics: {config.control_topic}, {config.dlq_topic}, {config.deletion_topic}, "
        f"{config.deletion_retry_topic}, {config.deletion_dlq_topic}",
        f"# groups: {config.participants_group}, {config.coordinator_group}, {config.deleter_group}",
    ]
    return "\n".join(lines) + "\n"


def render_json(checked: Checked) -> str:
    """Machine-readable form: ``{"valid", "config", "sources", "properties_keys", "ignored",
    "deprecated", …}`` (sources and properties keys by dotted path)."""
    config = checked.config
    return json.dumps({
        "valid": True,
        "config": checked.data,
        "sources": {".".join(path): source for path, source in checked.sources.items()},
        "properties_keys": {".".join(path): key for path, key in checked.origins.items()},
        "ignored": checked.warnings,
        "keys": [{"key": f.key, "value": f.value, "fate": f.status, "detail": f.detail}
                 for f in checked.fates],
        "deprecated": checked.deprecated,
        "table": checked.table,
        "offline": checked.offline,
        "topics": [config.control_topic, config.dlq_topic, config.deletion_topic,
                   config.deletion_retry_topic, config.deletion_dlq_topic],
        "groups": [config.participants_group, config.coordinator_group, config.deleter_group],
    }, indent=2, ensure_ascii=False)
