"""Config sections kept out of ``shared.config.settings`` (which assembles them): ``log`` — the
log lines' format — ``avro`` — where Avro writer schemas come from (``kafka.value_format:
avro``) — ``admin`` — the REST surface — and ``service`` — how every service process retries
and stops."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

__all__ = ["AdminConfig", "AvroConfig", "LogConfig", "ServiceConfig"]


class LogConfig(BaseModel):
    """How the process writes its log lines (stderr)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["text", "json"] = "text"
    """``json``: one JSON object per line (time, level, logger, message, exception), for log
    pipelines that would split a traceback into unrelated lines."""


class AdminConfig(BaseModel):
    """The FastAPI admin surface of each service."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "0.0.0.0"
    port: int = Field(8080, ge=0, le=65535)
    token: str | None = Field(None, repr=False, min_length=1)
    """Bearer token every service route needs. Surrounding whitespace is trimmed: a Secret
    written with ``echo`` ends in a newline that no client sends, and kept it would refuse
    everyone. Empty (or only whitespace) is an error rather than "no token": an empty Secret
    mounted as ``HUDI_SINK__ADMIN__TOKEN`` must fail at start, not open the door; so is
    ``HUDI_SINK__ADMIN__TOKEN=null`` (``shared.config.environment``)."""
    allow_unauthenticated: bool = False
    """Without a token, requests that change the sink (POST …) are refused unless this is true
    (``hudi-sink dev``, tests on a trusted machine). Ignored when ``token`` is set."""

    @field_validator("token", mode="before")
    @classmethod
    def _trimmed(cls, token: object) -> object:
        if isinstance(token, str):
            token = token.strip()
            if not token:
                raise ValueError("is empty (or only whitespace), so it would mean no token: "
                                 "an empty Secret? Put a token in it, or unset "
                                 "HUDI_SINK__ADMIN__TOKEN (remove admin.token) to run without one")
        return token


class ServiceConfig(BaseModel):
    """How every service process retries and stops."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    retry_backoff_ms: int = Field(2000, ge=1)
    """First wait between retries (seed ``retry.backoff.ms``); doubles, at most 10x."""
    retry_timeout_ms: int = Field(60000, ge=0)
    """No retry starts after this long (seed ``write.retry.timeout``)."""
    shutdown_timeout_ms: int = Field(30000, ge=100)
    """Bound of graceful shutdown (seed ``shutdown.timeout.ms``); the rest is cancelled."""


class AvroConfig(BaseModel):
    """Values in the Confluent wire format; writer schemas from a schema registry (by the id
    each value carries) and/or one ``.avsc`` file, which decodes only the values of its own id
    (``schema_id``, required with it; with a registry as well, every other id is looked up
    there)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    registry_url: str | None = None
    """Schema registry base URL (seed ``value.converter.schema.registry.url``)."""
    registry_username: str | None = None
    registry_password: str | None = Field(None, repr=False)
    """Basic auth (seed ``value.converter.basic.auth.user.info`` = ``user:password``)."""
    registry_ca_file: str | None = None
    """CA bundle for an ``https`` registry (default: the system's)."""
    registry_timeout_s: float = Field(5, gt=0)
    subject: str | None = None
    """The registry subject ``table.schema_source: registry`` creates the table from (its
    latest version); default ``<first topic>-value`` (TopicNameStrategy)."""
    schema_file: str | None = None
    """An ``.avsc`` writer schema: decodes the values of ``schema_id`` only."""
    schema_id: int | None = Field(None, ge=0, le=2**32 - 1, validate_default=True)
    """The id ``schema_file``'s schema has in the values' framing; required with it. No id is
    guessed: "the first id read" differs between processes and restarts, and values of
    another id decoded with the file's schema put values in the wrong fields."""

    @field_validator("schema_id")
    @classmethod
    def _id_of_the_file(cls, schema_id: int | None, info: ValidationInfo) -> int | None:
        has_file = info.data.get("schema_file") is not None
        if schema_id is None and has_file:
            raise ValueError(
                "required with avro.schema_file: the id the file's schema has in the values "
                "(bytes 1-4 of a value written with it, after the magic byte 0, big-endian; or "
                "the schema's id in the registry: GET /subjects/<subject>/versions/latest "
                "answers it as \"id\")")
        if schema_id is not None and not has_file:
            raise ValueError("names the id of avro.schema_file, which is not set")
        return schema_id

    @model_validator(mode="after")
    def _files_exist(self, info: ValidationInfo) -> AvroConfig:
        offline = bool(info.context and info.context.get("offline"))  # config check --offline
        for key in ("schema_file",) if offline else ("registry_ca_file", "schema_file"):
            path = getattr(self, key)
            if path is not None and not Path(path).is_file():
                raise ValueError(f"{key}: file not found: {path}")
        if self.registry_ca_file is not None and not offline:
            try:  # loaded by every fetch; refused here rather than at the first unknown id
                ssl.create_default_context(cafile=self.registry_ca_file)
            except (ssl.SSLError, OSError, ValueError) as exc:
                raise ValueError(f"registry_ca_file: {self.registry_ca_file} is not a CA bundle "
                                 f"in PEM ({exc})") from None
        return self
