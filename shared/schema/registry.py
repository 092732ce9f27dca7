"""Avro writer schemas by id: a Confluent-compatible schema registry client, or one ``.avsc`` file.

The registry client speaks the documented endpoint ``GET /schemas/ids/{id}`` (answer
``{"schema": "<Avro schema JSON text>"}``), with HTTP basic auth and TLS (a CA bundle), and
caches every schema it fetched for the life of the process: a schema id never changes meaning.
Two failures are told apart, because the participant treats them differently:

- ``UnknownSchemaId``: the registry answered that the id does not exist (404) — the record is
  bad and goes to the dead-letter topic;
- ``RegistryUnavailable``: every other failure of the fetch — no answer, a 5xx, an auth
  failure, a reply that is not HTTP (a bad status line, a cut-off body, an over-long header
  line: ``http.client.HTTPException``), JSON nested too deep to parse, a CA bundle that cannot
  be loaded, an answer over :data:`MAX_ANSWER_BYTES` or slower than ``registry_timeout_s``, a
  redirect that would take the credentials to another host or down to plain http. Nothing is
  wrong with the record, so its partition pauses and retries instead of dead-lettering good
  data.

Plain ``urllib`` keeps this free of another HTTP dependency; the calls block (a cache miss is
rare: once per schema id per process), so the participant makes them in worker threads
(:mod:`services.participant.schema_fetches`), never on its event loop.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPMessage
from pathlib import Path
from typing import IO, Any, Protocol

from hudi_sink.shared.config.sections import AvroConfig
from hudi_sink.shared.errors import ConfigError, HudiSinkError
from hudi_sink.shared.redaction import redact_text, redact_url

__all__ = ["WriterSchemas", "RegistrySchemas", "FileSchema", "UnknownSchemaId", "RegistryUnavailable",
           "writer_schemas", "fetch_json", "MAX_ANSWER_BYTES"]

MAX_ANSWER_BYTES = 8 << 20
"""Largest registry answer read (8 MiB; a registry stores schemas of about 1 MB at most)."""
_CHUNK = 64 << 10


class UnknownSchemaId(HudiSinkError):
    """The registry does not know the id a value carries."""


class RegistryUnavailable(HudiSinkError):
    """The registry could not be asked (down, 5xx, refused credentials): retry later."""


class WriterSchemas(Protocol):
    def get(self, schema_id: int) -> dict[str, Any]:
        """The parsed writer schema of ``schema_id``; raises the two errors above. May block
        on the registry."""

    def cached(self, schema_id: int) -> dict[str, Any] | None:
        """The schema when it is known without asking anyone (never blocks), else None."""


class FileSchema:
    """One writer schema from an ``.avsc`` file, for one schema id only (``avro.schema_id``).

    A value's id names the schema it was written with; decoding it with another schema reads
    its bytes in the other schema's field order (after a producer reorders its fields,
    ``city`` and ``name`` swap values without any error). So the file decodes only the values
    of its configured id — never a guessed one: "the first id read" differs between
    processes and restarts. Other ids go to ``others`` (the registry, when one is configured
    as well), or are bad records (``UnknownSchemaId`` naming both ids)."""

    def __init__(self, path: str, schema_id: int, others: WriterSchemas | None = None) -> None:
        self._path = path
        self._schema: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
        self._id = schema_id
        self._others = others

    def cached(self, schema_id: int) -> dict[str, Any] | None:
        if schema_id == self._id:
            return self._schema
        return self._others.cached(schema_id) if self._others is not None else None

    def get(self, schema_id: int) -> dict[str, Any]:
        if schema_id == self._id:
            return self._schema
        if self._others is not None:
            return self._others.get(schema_id)
        raise UnknownSchemaId(f"schema id {schema_id} is not the id of avro.schema_file "
                              f"{self._path}, which is id {self._id} (avro.schema_id); decoding "
                              "it with the file's schema could put values in the wrong fields")


def _headers(config: AvroConfig) -> dict[str, str]:
    headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
    if config.registry_username is not None:
        token = f"{config.registry_username}:{config.registry_password or ''}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(token).decode()
    return headers


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only where the credentials may go along.

    urllib copies every header of a request, ``Authorization`` included, to the URL a
    redirect names, whatever its host and even from https to plain http: a registry (or
    anything in front of it) answering 302 would hand the password to another server. With
    credentials, a redirect to another host:port or from https to http is refused (the
    fetch fails: ``RegistryUnavailable`` naming both URLs); without them, any is followed."""

    def __init__(self, credentials: bool) -> None:
        self._credentials = credentials

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: HTTPMessage, newurl: str) -> urllib.request.Request | None:
        if self._credentials and not _same_origin(req.full_url, newurl):
            raise RegistryUnavailable(redact_text(
                f"registry at {req.full_url} redirects ({code}) to {newurl}: refused, the "
                "credentials would go to another host or over plain http (configure the final URL)"))
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _same_origin(old: str, new: str) -> bool:
    """Same host and port, and not from https down to http."""
    before, after = urllib.parse.urlsplit(old), urllib.parse.urlsplit(new)
    default = {"http": 80, "https": 443}
    return (before.hostname == after.hostname
            and (before.port or default.get(before.scheme)) == (after.port or default.get(after.scheme))
            and not (before.scheme == "https" and after.scheme != "https"))


class _Body(Protocol):
    def read1(self, size: int = ..., /) -> bytes: ...


def _read_capped(response: _Body, url: str, deadline: float) -> bytes:
    """The answer's body, refused past :data:`MAX_ANSWER_BYTES` or ``deadline`` (read no
    further). Read a recv at a time: the socket timeout bounds each wait, not the whole
    answer, and a registry (or proxy) sending a byte every few seconds would hold the
    reading thread for as long as it likes."""
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read1(_CHUNK):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise RegistryUnavailable(f"registry answer from {redact_url(url)} is over "
                                      f"{MAX_ANSWER_BYTES} bytes (no registry schema is that "
                                      "large): refused")
        if time.monotonic() > deadline:
            raise RegistryUnavailable(f"registry answer from {redact_url(url)} still incomplete after "
                                      f"{size} bytes at its deadline: refused")
        chunks.append(chunk)
    return b"".join(chunks)


def fetch_json(url: str, config: AvroConfig) -> Any:
    """``GET url`` with the registry's credentials and CA bundle; 404 → ``UnknownSchemaId``,
    any other failure (see the module docstring) → ``RegistryUnavailable``. The body must be
    complete within ``registry_timeout_s`` of the request."""
    deadline = time.monotonic() + config.registry_timeout_s
    try:
        headers = _headers(config)
        opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=config.registry_ca_file)),
            _SameOriginRedirects(credentials="Authorization" in headers))
        request = urllib.request.Request(url, headers=headers)  # noqa: S310 - configured URL
        with opener.open(request, timeout=config.registry_timeout_s) as response:
            return json.loads(_read_capped(response, url, deadline))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise UnknownSchemaId(f"{redact_url(url)}: not in the registry (404)") from None
        raise RegistryUnavailable(f"registry answered {exc.code} for {redact_url(url)}") from None
    except RegistryUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - see the module docstring: never the record's fault
        raise RegistryUnavailable(redact_text(f"registry unreachable at {url}: "
                                              f"{type(exc).__name__}: {exc}")) from None


class RegistrySchemas:
    """``GET {url}/schemas/ids/{id}``, cached. Safe from several threads, and fetches of
    different ids do not wait for each other (a registry slow to answer one id holds up
    only that one); two threads asking for the same new id may both fetch it, harmlessly."""

    def __init__(self, config: AvroConfig) -> None:
        assert config.registry_url is not None
        self._config = config
        self._url = config.registry_url.rstrip("/")
        self._cache: dict[int, dict[str, Any]] = {}

    def cached(self, schema_id: int) -> dict[str, Any] | None:
        return self._cache.get(schema_id)

    def get(self, schema_id: int) -> dict[str, Any]:
        schema = self._cache.get(schema_id)
        if schema is None:
            schema = self._cache.setdefault(schema_id, self._fetch(schema_id))
        return schema

    def _fetch(self, schema_id: int) -> dict[str, Any]:
        try:
            body = fetch_json(f"{self._url}/schemas/ids/{schema_id}", self._config)
        except UnknownSchemaId:
            raise UnknownSchemaId(f"schema id {schema_id} is not in the registry") from None
        try:
            schema = json.loads(body["schema"])
        except (KeyError, TypeError, ValueError, RecursionError):
            raise RegistryUnavailable(f"registry answer for id {schema_id} holds no schema") from None
        if not isinstance(schema, dict):  # a bare primitive ("string") is no record
            raise UnknownSchemaId(f"schema id {schema_id} is not a record schema")
        return schema


def writer_schemas(config: AvroConfig) -> WriterSchemas:
    """The ``.avsc`` file for its id, the registry for every (other) id; at least one of them."""
    registry = RegistrySchemas(config) if config.registry_url is not None else None
    if config.schema_file is not None:
        assert config.schema_id is not None  # AvroConfig requires it with a file
        return FileSchema(config.schema_file, config.schema_id, registry)
    if registry is not None:
        return registry
    raise ConfigError("set avro.registry_url or avro.schema_file for kafka.value_format: avro",
                      "avro.registry_url")
