"""The one settings object every service receives.

Precedence: CLI flag > environment (``HUDI_SINK__SECTION__KEY``) > YAML file > default.
Validation is strict (unknown keys are errors) so a typo fails at start, naming the key,
instead of silently running with a default.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hudi_sink.shared.config.deprecated import deprecations
from hudi_sink.shared.config.environment import deep_merge, env_overrides
from hudi_sink.shared.config.errors_section import ErrorsConfig, refuse_dlq_clash
from hudi_sink.shared.config.files import read_config_file
from hudi_sink.shared.config.kafka_security import security_problems
from hudi_sink.shared.config.keyed import UpsertConfig, delete_field_problem, mode_problems
from hudi_sink.shared.config.maintenance import MaintenanceConfig
from hudi_sink.shared.config.problems import validation_problems
from hudi_sink.shared.config.sections import AdminConfig, AvroConfig, LogConfig, ServiceConfig
from hudi_sink.shared.config.signing_keys import signing_keys
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.hudi.record_key import split_key_fields
from hudi_sink.shared.schema.avro_ddl import resolve_table_schema
from hudi_sink.shared.schema.table_schema import TableSchema
from hudi_sink.shared.storage.backend import check_base_path

__all__ = [
    "SinkConfig", "KafkaConfig", "TableConfig", "TransactionConfig",
    "DeletionConfig", "SparkConfig", "load_config", "config_from_mapping",
]

log = logging.getLogger("hudi_sink.config")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaConfig(_Section):
    """Where the data and control topics live and how to reach them."""

    bootstrap_servers: str = "127.0.0.1:9092"
    topics: list[str] = Field(default_factory=lambda: ["orders"], min_length=1)
    session_timeout_ms: int = Field(10000, ge=1000)
    heartbeat_interval_ms: int | None = Field(None, ge=100)
    startup_timeout_s: float = Field(60, ge=0)
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER",
                            "GSSAPI"] | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = Field(None, repr=False)
    sasl_oauth_token_file: str | None = None
    """OAUTHBEARER: a file holding the token, re-read at every login (rotated by a sidecar)."""
    sasl_oauth_msk_region: str | None = None
    """OAUTHBEARER: tokens from the Amazon MSK IAM signer for this region (AWS credentials)."""
    sasl_kerberos_service_name: str = "kafka"
    sasl_kerberos_domain_name: str | None = None
    """GSSAPI: the brokers' Kerberos service name and (if not their host names) domain."""
    create_topics: bool = True
    """False: the sink creates no topic; one missing at start is an error naming it."""
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    control_topic: str | None = Field(None, min_length=1)
    """The control topic's name (seed ``control.topic.name``); default ``<name>-control``."""
    value_format: Literal["json", "connect_json", "avro"] = "json"
    """A JSON object, or Connect's ``{"schema", "payload"}`` (seed ``…schemas.enable=true``)."""
    isolation_level: Literal["read_committed", "read_uncommitted"] = "read_committed"
    """What the sink's consumers read of transactional producers' data: committed data only
    (records of aborted transactions never reach the table; an open transaction holds back its
    partition until it ends), or everything, aborted records included. ``read_uncommitted``
    exists for brokers without transactions support; an exactly-once sink should not use it."""
    replication_factor: int | None = Field(None, ge=1)
    """Replicas of the topics the sink creates; None takes the broker's
    ``default.replication.factor``."""
    envelope: Literal["none", "debezium"] = "none"
    """``debezium``: each value is a Debezium change event (``before``, ``after``, ``op``, …),
    in any ``value_format``; ``none``: the value is the row."""
    control_signing_key: str | list[str] | None = Field(None, repr=False)
    """HMAC key of the control messages (README, "Signed control messages"): set, each message
    is signed and unsigned or wrongly signed ones are ignored; a list signs with the first
    and accepts each (rotation). Unset: unsigned, and nothing checked."""
    control_signing_key_file: str | None = None
    """A file (a mounted Secret) holding the key(s) instead, one per line; read by the services
    that use the control topic when they start."""

    @field_validator("topics")
    @classmethod
    def _distinct_topics(cls, topics: list[str]) -> list[str]:
        if len(set(topics)) != len(topics):
            raise ValueError("topics must be distinct")
        for topic in topics:
            if not topic or ":" in topic or "," in topic or "=" in topic:
                raise ValueError(f"invalid topic name {topic!r} (empty, or holds ':' ',' '=')")
        return topics

    # Security keys that relate to each other or to files: shared.config.kafka_security.

    @model_validator(mode="after")
    def _signing_keys(self) -> KafkaConfig:
        """Inline control signing keys (the file is read by the services that sign)."""
        signing_keys(self.control_signing_key, self.control_signing_key_file, read_file=False)
        return self


class TableConfig(_Section):
    """The Hudi table written by the sink."""

    base_path: str = "./warehouse/orders"
    name: str = "orders"
    database: str = "default"
    write_mode: Literal["insert", "upsert"] = "insert"
    """``upsert``: one row per record key, updates and deletes applied. Fixed at creation."""
    record_key_field: str = "id"
    """The record key's field, or several separated by commas (``a,b``: Hudi's composite key
    ``a:1,b:2``); whitespace around names is dropped. Required explicitly in upsert mode."""
    partition_field: str | None = None
    precombine_field: str | None = None
    schema_ddl: str = Field(
        "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE, payload STRING",
        alias="schema",
        min_length=1,
    )
    schema_source: Literal["ddl", "registry"] = "ddl"
    """``ddl``: ``schema``, fixed; ``registry``: the table follows its producers' schemas."""
    hive_style_partitioning: bool = False
    parquet_codec: Literal["snappy", "zstd", "gzip", "lz4", "none"] = "snappy"
    """Compression of the Parquet base files (seed ``parquet.codec``)."""
    kafka_metadata: bool = False
    """Add the record's Kafka coordinates as columns (seed ``connect.meta.data``)."""
    small_file_bytes: int = Field(104857600, ge=0)
    """Groups below this take new rows as their next slice (``hoodie.parquet.small.file.limit``)."""
    storage_options: dict[str, str] = Field(default_factory=dict, repr=False)  # s3: see README

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("record_key_field")
    @classmethod
    def _key_fields(cls, text: str) -> str:  # " a , b " -> "a,b", as hoodie.properties holds it
        return ",".join(split_key_fields(text))

    @property
    def record_key_fields(self) -> tuple[str, ...]:  # in key order; one for a simple key
        return tuple(self.record_key_field.split(","))

    @field_validator("storage_options", mode="before")
    @classmethod
    def _stringify_options(cls, options: Any) -> Any:  # YAML true -> "true", 30 -> "30"
        return {str(k): str(v).lower() if isinstance(v, bool) else str(v)
                for k, v in options.items()} if isinstance(options, Mapping) else options

    def table_schema(self, ddl: str | None = None) -> TableSchema:
        """``schema`` (or an evolved table's ``ddl``) parsed, checked against the key fields."""
        return TableSchema.parse(
            self.schema_ddl if ddl is None else ddl,
            table_name=self.name,
            record_key_field=self.record_key_field,
            partition_field=self.partition_field,
            precombine_field=self.precombine_field,
            kafka_metadata=self.kafka_metadata,
        )


class TransactionConfig(_Section):
    """Timing of the coordinator's transactions and the participants' buffers."""

    interval_ms: int = Field(60000, ge=100)
    """START → END; upsert mode: previous END → END (``CommitState.is_interval_reached``)."""
    write_status_timeout_ms: int = Field(300000, ge=1000)
    flush_records: int = Field(100000, ge=1)
    flush_bytes: int | None = Field(None, ge=1024, exclude=True)
    """Deprecated (``shared.config.deprecated``): read as ``buffer_bytes``; left out of dumps.
    Declared first so that a bad value's error names this key, the one the user wrote."""
    buffer_bytes: int = Field(24 * 1024 * 1024, ge=1024)
    """A partition's buffer is flushed at ``flush_records`` rows or this many bytes of record
    values, whichever comes first: what a participant holds stays bounded whatever the record
    size. 24 MiB and not 32: on the bench (1 KB records, 4 partitions, one participant) the
    Python side's peak went from ~640 to ~570 MB and the participant's from 2,000-2,080 to
    1,830-1,870 MB, throughput within the run-to-run spread."""
    resend_interval_ms: int = Field(2000, ge=100)
    """How often lost control messages are healed (re-announce / re-send)."""
    allow_empty_commit: bool = False
    """True: an instant in which no offset moved is committed anyway, an empty commit every
    interval (Hudi's default, seed ``hoodie.allow.empty.commit``). False: such an instant is
    withdrawn and leaves nothing on the table (``services.coordinator.idle``)."""

    @model_validator(mode="before")
    @classmethod
    def _old_flush_bytes(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or data.get("flush_bytes") is None:
            return data
        if data.get("buffer_bytes") is not None:
            raise ValueError("transaction.flush_bytes is the old name of transaction.buffer_bytes;"
                             " set only buffer_bytes (and spark.job_bytes for the Spark job bound)")
        return {**data, "buffer_bytes": data["flush_bytes"]}


class DeletionConfig(_Section):
    """Two-phase deletion (PIP-186) knobs."""

    partitions: int = Field(4, ge=1)
    send_delay_s: float = Field(60, ge=0)
    reconsume_later_s: float = Field(600, ge=0)
    max_redeliveries: int = Field(10, ge=0)
    cache_expiry_s: float = Field(600, ge=0)
    orphan_min_age_s: float = Field(3600, ge=0)
    reconcile_interval_s: float = Field(3600, ge=0)
    """How often one deleter pod runs the orphan scan and enqueues what it finds (0: never;
    ``POST /deletions/reconcile`` still works)."""


class SparkConfig(_Section):
    """The participant's SparkSession."""

    master: str = "local[2]"
    conf: dict[str, str] = Field(default_factory=dict)
    connect_token: str | None = Field(None, repr=False)
    """Spark Connect's pre-shared token (the server's ``spark.connect.authenticate.token``),
    sent as the ``authorization: Bearer`` header of every RPC over the plain gRPC the server
    speaks: PySpark's own ``;token=`` would dial TLS, which the server does not serve. Kept
    out of ``master`` so the URL can be shown and logged (docs/kubernetes.md)."""
    job_bytes: int | None = Field(None, ge=1024)
    """At most this much Arrow data in one Spark job: flushes of one instant that wait for a
    slot share a job up to this size (a single larger flush still gets its own). Unset: the
    same as ``transaction.buffer_bytes``, the bound both had when one key set them."""
    job_timeout_ms: int = Field(180000, ge=1000)
    """A Spark job (one or several flushes, with their uploads to an object store) that has
    not returned after this long means a driver that stopped answering (a heap-exhausted JVM
    never answers a py4j call): the participant logs it, kills its local JVM and exits 1, so
    its partitions move on (as after a kill) instead of stalling forever. A default flush
    takes seconds; below ``transaction.write_status_timeout_ms`` so a hang is over before
    the coordinator gives up on the instant (a warning at start says when it is not)."""

    @field_validator("master")
    @classmethod
    def _known_master(cls, master: str) -> str:
        if not (master.startswith("local") or master.startswith("sc://")
                or master.startswith("spark://") or master in ("yarn",)
                or master.startswith("k8s://")):
            raise ValueError(f"unsupported Spark master {master!r}")
        return master

    @model_validator(mode="after")
    def _token_needs_connect(self) -> SparkConfig:
        if self.connect_token is not None:
            if not self.master.startswith("sc://"):
                raise ValueError("connect_token: only with a Spark Connect master (sc://…)")
            if not self.connect_token.strip():
                raise ValueError("connect_token: empty")
        return self

    @field_validator("conf", mode="before")
    @classmethod
    def _stringify(cls, conf: Any) -> Any:
        if isinstance(conf, Mapping):
            return {str(k): str(v) for k, v in conf.items()}
        return conf


class _DerivedName:
    """A topic or consumer-group name of the sink: ``<name>-<suffix>`` (docs/design.md §5). A
    read-only descriptor, so the name is computed on every read and cannot be set apart."""

    def __init__(self, suffix: str) -> None:
        self._suffix = suffix

    def __get__(self, config: SinkConfig, owner: type | None = None) -> str:
        return f"{config.name}-{self._suffix}"


class SinkConfig(_Section):
    """Everything one sink needs; topic and group names derive from ``name``."""

    name: str = Field("orders", min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    """Where the records come from: brokers, data topics, security, the record envelope and
    value format."""
    table: TableConfig = Field(default_factory=TableConfig)
    """The Hudi table written: path, schema, keys, write mode, partitioning, file sizes."""
    transaction: TransactionConfig = Field(default_factory=TransactionConfig)
    """The coordinator's instants (interval, timeouts, empty commits) and what a
    participant buffers before a flush."""
    errors: ErrorsConfig = Field(default_factory=ErrorsConfig)
    """Bad records: the dead-letter topic, or stop the partition."""
    deletion: DeletionConfig = Field(default_factory=DeletionConfig)
    """The two-phase deleter's topics and timing."""
    admin: AdminConfig = Field(default_factory=AdminConfig)
    """Each service's REST surface: where it listens, and who may change things there
    (a token, or development's explicit opt-out)."""
    service: ServiceConfig = Field(default_factory=ServiceConfig)
    """How a process retries and stops."""
    avro: AvroConfig = Field(default_factory=AvroConfig)
    """Avro values: the schema registry, or a pinned schema file."""
    spark: SparkConfig = Field(default_factory=SparkConfig)
    """The participants' SparkSession (local, or a Spark Connect server) and the bounds of
    its jobs."""
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig)
    """Clustering (opt-in), cleaning and archival, run by the coordinator."""
    log: LogConfig = Field(default_factory=LogConfig)
    """Log level and format."""
    upsert: UpsertConfig = Field(default_factory=UpsertConfig)
    """Upsert mode's reading of keys, deletes and partitioners."""

    # Derived names (docs/design.md §5): computed on every read, so they never disagree with ``name``.
    @property
    def control_topic(self) -> str:
        return self.kafka.control_topic or f"{self.name}-control"

    @property
    def dlq_topic(self) -> str:
        """Bad records' topic: ``errors.deadletterqueue.topic.name``, or ``<name>-dlq``."""
        return self.errors.dlq_topic_name or f"{self.name}-dlq"

    deletion_topic: ClassVar[_DerivedName] = _DerivedName("deletion")
    deletion_retry_topic: ClassVar[_DerivedName] = _DerivedName("deletion-retry")
    deletion_dlq_topic: ClassVar[_DerivedName] = _DerivedName("deletion-dlq")
    participants_group: ClassVar[_DerivedName] = _DerivedName("participants")
    coordinator_group: ClassVar[_DerivedName] = _DerivedName("coordinator")
    deleter_group: ClassVar[_DerivedName] = _DerivedName("deleter")

    @property
    def spark_job_bytes(self) -> int:
        """``spark.job_bytes``, or ``transaction.buffer_bytes`` when that is unset."""
        return self.spark.job_bytes or self.transaction.buffer_bytes


def config_from_mapping(
    data: Mapping[str, Any],
    *,
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    log_notes: bool = True,
    offline: bool = False,
) -> SinkConfig:
    """Validate a config mapping (file contents) with env and CLI overrides applied;
    ``offline`` skips the checks of files and packages the clients need where the sink runs
    (``config check --offline``)."""
    env = os.environ if environ is None else environ
    merged = deep_merge(dict(data), env_overrides(env))
    if overrides:
        merged = deep_merge(merged, overrides)
    keyed = mode_problems(merged) + security_problems(merged, offline=offline)  # across keys
    try:
        config = SinkConfig.model_validate(merged, context={"offline": offline})
    except ValidationError as exc:
        raise validation_problems(exc, SinkConfig, env, also=keyed) from None
    if keyed:
        raise ConfigError(keyed[0][1], keyed[0][0], problems=keyed)
    refuse_dlq_clash(config)  # a DLQ that is another topic of the sink: ConfigError naming it
    base_path = Path(config.table.base_path)
    if not base_path.is_absolute() and "://" not in config.table.base_path:
        base_path = ((base_dir or Path.cwd()) / base_path).resolve()
        config = config.model_copy(
            update={"table": config.table.model_copy(update={"base_path": str(base_path)})}
        )
    canonical = check_base_path(config.table.base_path)  # no '//'; one trailing '/' dropped
    ddl = resolve_table_schema(config.table, config.kafka, config.avro, base_dir or Path.cwd())
    config = config.model_copy(update={"table": config.table.model_copy(
        update={"base_path": canonical, "schema_ddl": ddl})})  # the DDL of avsc:, registry:…
    # The schema must parse and hold the key fields; checked here so it fails at start.
    schema = config.table.table_schema()
    problem = delete_field_problem(config.upsert.delete_field, schema)
    if problem is not None:
        raise ConfigError(problem, "upsert.delete_field")
    for note in deprecations(config) if log_notes else ():
        log.warning("%s", note)
    return config


def load_config(
    path: str | Path | None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    log_notes: bool = True,
    offline: bool = False,
) -> SinkConfig:
    """Load a YAML, TOML or ``.properties`` config file (or only env/defaults when ``path`` is
    None). ``log_notes=False`` leaves the ignored keys and deprecations unlogged, for a caller
    that shows them itself (``config check`` prints them; logged as well, they showed twice)."""
    if path is None:
        return config_from_mapping({}, base_dir=Path.cwd(), environ=environ, overrides=overrides,
                                   log_notes=log_notes, offline=offline)
    file = read_config_file(path)
    for warning in file.warnings if log_notes else ():
        log.warning("%s: %s", path, warning)
    file.check_schema_source(os.environ if environ is None else environ, overrides)
    try:
        return config_from_mapping(file.data, base_dir=file.base_dir, environ=environ,
                                   overrides=overrides, log_notes=log_notes, offline=offline)
    except ConfigError as exc:
        raise file.named(exc) from None
