"""Avro writer schemas by id: a Confluent-compatible schema registry client, or one ``.avsc`` file.

The registry client speaks the documented endpoint ``GET /schemas/ids/{id}`` (answer
``{"schema": "<Avro schema JSON text>"}``), with HTTP basic auth and TLS (a CA bundle), and
caches every schema it fetched for the life of the process: a schema id never changes meaning.
Two failures are told apart, because the participant treats them differently:

- ``UnknownSchemaId``: the registry answered that the id does not exist (404) — the record is
  bad and goes to the dead-letter topic;
- ``RegistryUnavailable``: no answer, a 5xx, or an auth failure — nothing is wrong with the
  record, so its partition pauses and retries instead of dead-lettering good data.

Plain ``urllib`` keeps this free of another HTTP dependency; the calls block (a cache miss is
rare: once per schema id per process).
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Protocol

from shared.config_sections import AvroConfig
from shared.errors import ConfigError, HudiSinkError

__all__ = ["WriterSchemas", "RegistrySchemas", "FileSchema", "UnknownSchemaId", "RegistryUnavailable",
           "writer_schemas", "fetch_json"]


class UnknownSchemaId(HudiSinkError):
    """The registry does not know the id a value carries."""


class RegistryUnavailable(HudiSinkError):
    """The registry could not be asked (down, 5xx, refused credentials): retry later."""


class WriterSchemas(Protocol):
    def get(self, schema_id: int) -> dict[str, Any]:
        """The parsed writer schema of ``schema_id``; raises the two errors above."""


class FileSchema:
    """One writer schema from an ``.avsc`` file, whatever id a value carries."""

    def __init__(self, path: str) -> None:
        self._schema: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))

    def get(self, schema_id: int) -> dict[str, Any]:
        return self._schema


def _headers(config: AvroConfig) -> dict[str, str]:
    headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
    if config.registry_username is not None:
        token = f"{config.registry_username}:{config.registry_password or ''}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(token).decode()
    return headers


def fetch_json(url: str, config: AvroConfig) -> Any:
    """``GET url`` with the registry's credentials and CA bundle; 404 → ``UnknownSchemaId``,
    no answer, another error status or a body that is not JSON → ``RegistryUnavailable``."""
    context = ssl.create_default_context(cafile=config.registry_ca_file) if url.startswith("https") else None
    request = urllib.request.Request(url, headers=_headers(config))  # noqa: S310 - configured URL
    try:
        with urllib.request.urlopen(request, timeout=config.registry_timeout_s,  # noqa: S310
                                    context=context) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise UnknownSchemaId(f"{url}: not in the registry (404)") from None
        raise RegistryUnavailable(f"registry answered {exc.code} for {url}") from None
    except (OSError, ValueError) as exc:  # refused, timeout, TLS, a body that is not JSON
        raise RegistryUnavailable(f"registry unreachable at {url}: {exc}") from None


class RegistrySchemas:
    """``GET {url}/schemas/ids/{id}``, cached (thread-safe: flushes decode in worker threads)."""

    def __init__(self, config: AvroConfig) -> None:
        assert config.registry_url is not None
        self._config = config
        self._url = config.registry_url.rstrip("/")
        self._cache: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def get(self, schema_id: int) -> dict[str, Any]:
        cached = self._cache.get(schema_id)
        if cached is not None:
            return cached
        with self._lock:
            if schema_id not in self._cache:
                self._cache[schema_id] = self._fetch(schema_id)
            return self._cache[schema_id]

    def _fetch(self, schema_id: int) -> dict[str, Any]:
        try:
            body = fetch_json(f"{self._url}/schemas/ids/{schema_id}", self._config)
        except UnknownSchemaId:
            raise UnknownSchemaId(f"schema id {schema_id} is not in the registry") from None
        try:
            schema = json.loads(body["schema"])
        except (KeyError, TypeError, ValueError):
            raise RegistryUnavailable(f"registry answer for id {schema_id} holds no schema") from None
        if not isinstance(schema, dict):  # a bare primitive ("string") is no record
            raise UnknownSchemaId(f"schema id {schema_id} is not a record schema")
        return schema


def writer_schemas(config: AvroConfig) -> WriterSchemas:
    """The registry when one is configured, else the ``.avsc`` file."""
    if config.registry_url is not None:
        return RegistrySchemas(config)
    if config.schema_file is not None:
        return FileSchema(config.schema_file)
    raise ConfigError("set avro.registry_url or avro.schema_file for kafka.value_format: avro",
                      "avro.registry_url")
