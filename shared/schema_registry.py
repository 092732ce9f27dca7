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
           "writer_schemas"]


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


class RegistrySchemas:
    """``GET {url}/schemas/ids/{id}``, cached (thread-safe: flushes decode in worker threads)."""

    def __init__(self, config: AvroConfig) -> None:
        assert config.registry_url is not None
        self._url = config.registry_url.rstrip("/")
        self._timeout = config.registry_timeout_s
        self._headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
        if config.registry_username is not None:
            token = f"{config.registry_username}:{config.registry_password or ''}".encode()
            self._headers["Authorization"] = "Basic " + base64.b64encode(token).decode()
        self._context = (ssl.create_default_context(cafile=config.registry_ca_file)
                         if self._url.startswith("https") else None)
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
        url = f"{self._url}/schemas/ids/{schema_id}"
        request = urllib.request.Request(url, headers=self._headers)  # noqa: S310 - configured URL
        try:
            with urllib.request.urlopen(request, timeout=self._timeout,  # noqa: S310
                                        context=self._context) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise UnknownSchemaId(f"schema id {schema_id} is not in the registry") from None
            raise RegistryUnavailable(f"registry answered {exc.code} for {url}") from None
        except (OSError, ValueError) as exc:  # refused, timeout, TLS, a body that is not JSON
            raise RegistryUnavailable(f"registry {self._url} unreachable: {exc}") from None
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
