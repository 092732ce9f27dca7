"""Every Kafka Connect and Hudi configuration key hudi-sink knows, each with its fate: the one
table a migrating team's file is read by (``shared.config.seed`` applies it; the README's
table of keys is checked against it by ``tests/unit/test_connector_keys.py``).

The keys come from four places: the Hudi Kafka Connect sink's RFC (RFC-32, "Configurations"),
the connector as Hudi ships it (``KafkaConnectConfigs`` and its demo ``config-sink.json``),
Kafka Connect's own connector keys, and the Hudi write settings such files carry. Each has one
status:

- **mapped**: sets hudi-sink's key(s) named in ``paths``, its value converted (a value the
  converter refuses is refused, naming the key the user wrote);
- **honoured**: accepted as it is because its value describes what hudi-sink does anyway
  (``hoodie.table.type=COPY_ON_WRITE``); any other value is refused with the reason
  (``MERGE_ON_READ``: not written yet);
- **ignored**: accepted, does nothing here, and the reason is shown (``hoodie.metadata.enable``:
  no metadata table is written);
- **refused**: the setting asks for something hudi-sink does not do; the file is refused with
  the reason rather than run without it.

A key not in the table is refused as unknown (with the closest known key as a suggestion),
unless it is written as hudi-sink's own dotted key (``table.record_key_field``; Connect's
``errors.tolerance``, ``errors.deadletterqueue.*`` and ``errors.log.*`` are such keys, read by
the ``errors`` section itself).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from hudi_sink.shared.config import key_values as v

__all__ = ["Status", "KeyRule", "KEYS", "PREFIXES", "rule_for", "SCHEMA_PROVIDERS"]

Status = Literal["mapped", "honoured", "ignored", "refused"]
KeyPath = tuple[str, ...]
Origin = Literal["RFC-32", "connector", "Connect", "Hudi"]


@dataclass(frozen=True)
class KeyRule:
    """What one key does here."""

    status: Status
    reason: str
    """mapped/honoured: what it does (shown beside the key); ignored/refused: why."""
    paths: tuple[KeyPath, ...] = ()
    """hudi-sink keys a mapped key sets."""
    convert: Callable[[str], Any] = v.text
    """The value's text → the value set (or None: checked only); ValueError refuses it."""
    also: Mapping[KeyPath, Any] = field(default_factory=dict)
    """Further keys it implies, set unless the file sets them itself."""
    origin: Origin = "RFC-32"

    @property
    def targets(self) -> str:
        return ", ".join(".".join(path) for path in self.paths)


def _mapped(path: str, convert: Callable[[str], Any] = v.text, reason: str = "", *,
            origin: Origin = "RFC-32", also: Mapping[KeyPath, Any] | None = None) -> KeyRule:
    return KeyRule("mapped", reason, (tuple(path.split(".")),), convert, also or {}, origin)


def _honoured(convert: Callable[[str], Any], reason: str, origin: Origin = "Hudi") -> KeyRule:
    return KeyRule("honoured", reason, (), convert, {}, origin)


def _ignored(reason: str, origin: Origin = "Hudi") -> KeyRule:
    return KeyRule("ignored", reason, (), v.text, {}, origin)


def _refused(reason: str, origin: Origin = "Connect") -> KeyRule:
    return KeyRule("refused", reason, (), v.text, {}, origin)


SCHEMA_PROVIDERS = {
    f"org.apache.hudi.{package}.{name}": None
    for package in ("schema", "utilities.schema")
    for name in ("FilebasedSchemaProvider", "SchemaRegistryProvider")
}
"""Hudi's two schema providers, under the connector's package (``org.apache.hudi.schema``)
and the utilities' (``org.apache.hudi.utilities.schema``) that the RFC names."""

_PROVIDER = ("the table schema comes from the provider's file or registry subject "
             "(hoodie.*.schemaprovider.source.schema.file / .registry.url → table.schema); "
             "other provider classes are refused")

_TABLE_TYPE = v.only({
    "COPY_ON_WRITE": None,
    "MERGE_ON_READ": "MERGE_ON_READ tables are not written yet: hudi-sink writes COPY_ON_WRITE "
                     "tables (Parquet base files, no log files to compact). Set hoodie.table.type"
                     "=COPY_ON_WRITE to write the same rows as a COPY_ON_WRITE table",
}, fold_case=True)

_KEY_GENERATORS = {
    **{f"org.apache.hudi.keygen.{name}": None for name in (
        "SimpleKeyGenerator", "ComplexKeyGenerator", "NonpartitionedKeyGenerator",
        "SimpleAvroKeyGenerator", "ComplexAvroKeyGenerator", "NonpartitionedAvroKeyGenerator")},
    **{name: None for name in ("SIMPLE", "COMPLEX", "NON_PARTITION")},
}

_NO_SYNC = ("hudi-sink syncs no catalog (Hive metastore, Glue, …): register the table with "
            "Hudi's sync tool or the catalog's own crawler; hoodie.meta.sync.enable=true is refused")

_CONVERTER = ("JsonConverter → connect_json (json with schemas.enable=false), "
              "StringConverter → json, AvroConverter → avro")

KEYS: dict[str, KeyRule] = {
    # --- The RFC's keys (RFC-32, "Configurations") -------------------------------------------
    "target.base.path": _mapped("table.base_path", v.local_path),
    "target.table.name": _mapped("table.name"),
    "target.database.name": _mapped("table.database"),
    "partition.field.name": _mapped("table.partition_field"),
    "schemaprovider.class": _honoured(v.only(SCHEMA_PROVIDERS), _PROVIDER, "RFC-32"),
    "write.ignore.failed": _mapped("errors.tolerance", v.tolerance, "true → dlq, false → fail"),
    "hoodie.table.base.file.format": _honoured(v.only({
        "PARQUET": None,
        "ORC": "ORC base files are not written: hudi-sink writes Parquet only",
        "HFILE": "HFile base files are not written: hudi-sink writes Parquet only"}),
        "base files are Parquet", "RFC-32"),
    "hoodie.allow.empty.commit": _mapped("transaction.allow_empty_commit", v.boolean),
    "kafka.topic.names": _mapped("kafka.topics", v.comma_list, "comma-separated"),
    "kafka.bootstrap.servers": _mapped("kafka.bootstrap_servers"),
    "kafka.tls.certificate": _mapped("kafka.ssl_cafile", also={("kafka", "security_protocol"): "SSL"},
                                     reason="and kafka.security_protocol: SSL unless set"),
    "value.converter": _mapped("kafka.value_format", v.converter, _CONVERTER),
    "value.converter.schemas.enable": _mapped(
        "kafka.value_format", lambda text: "connect_json" if v.boolean(text) else "json",
        "true → connect_json, false → json"),
    "enhanced.avro.schema.support": _ignored(
        "enums are always read as their symbol (a string), unions by their branch", "RFC-32"),
    "flush.size": _mapped("transaction.flush_records", v.integer),
    "transaction.interval.ms": _mapped("transaction.interval_ms", v.integer),
    "connect.meta.data": _mapped("table.kafka_metadata", v.boolean),
    "retry.backoff.ms": _mapped("service.retry_backoff_ms", v.integer),
    "shutdown.timeout.ms": _mapped("service.shutdown_timeout_ms", v.integer),
    "parquet.codec": _mapped("table.parquet_codec", v.codec),
    "control.topic.name": _mapped("kafka.control_topic"),
    "coordinator.writestatus.timeout": _mapped("transaction.write_status_timeout_ms", v.seconds_ms,
                                               "seconds, or with an ms/s/min suffix"),
    "write.retry.timeout": _mapped("service.retry_timeout_ms", v.seconds_ms,
                                   "seconds, or with an ms/s/min suffix"),
    "connector.class": _ignored("hudi-sink runs as its own services (hudi-sink coordinator/"
                                "participant/deleter), not inside a Kafka Connect worker",
                                "RFC-32"),
    "tasks.max": _ignored("parallelism is the number of participant processes (scale the "
                          "participant Deployment or its autoscaler), at most one partition "
                          "owner each", "RFC-32"),
    "hoodie.writestatus.class": _ignored("write statuses are hudi-sink's own control messages "
                                         "(WRITE_STATUS in shared/kafka/protocol.py), not a "
                                         "pluggable class", "RFC-32"),
    "format.class": _ignored("base files are always written as Parquet through Spark", "RFC-32"),
    "key.converter": _ignored("record keys come from the value (table.record_key_field); the "
                              "Kafka key is kept as bytes in dead letters and in the "
                              "connect.meta.data column", "RFC-32"),
    "avro.codec": _ignored("no Avro files are written (Parquet base files, JSON timeline); "
                           "see parquet.codec", "RFC-32"),
    # --- The connector as Hudi ships it (KafkaConnectConfigs, demo/config-sink.json) --------
    "bootstrap.servers": _mapped("kafka.bootstrap_servers", origin="connector"),
    "hoodie.kafka.control.topic": _mapped(
        "kafka.control_topic", origin="connector",
        reason="unset: <name>-control (the connector's default is hudi-control-topic)"),
    "hoodie.schemaprovider.class": _honoured(v.only(SCHEMA_PROVIDERS), _PROVIDER, "connector"),
    "hoodie.kafka.commit.interval.secs": _mapped("transaction.interval_ms", v.secs_as_ms,
                                                 "seconds", origin="connector"),
    "hoodie.kafka.coordinator.write.timeout.secs": _mapped(
        "transaction.write_status_timeout_ms", v.secs_as_ms, "seconds", origin="connector"),
    "hoodie.kafka.allow.commit.on.errors": _mapped(
        "errors.tolerance", v.tolerance, origin="connector",
        reason="true → dlq (records that fail go to the dead-letter topic, the commit goes on), "
               "false → fail (the partition stops before the record)"),
    "hoodie.kafka.compaction.async.enable": _ignored(
        "compaction is a MERGE_ON_READ table service; a COPY_ON_WRITE table has nothing to "
        "compact", "connector"),
    "hoodie.meta.sync.enable": _honoured(v.only({"false": None, "true": _NO_SYNC}, fold_case=True),
                                         "false: no catalog sync", "connector"),
    "hoodie.meta.sync.classes": _ignored(_NO_SYNC, "connector"),
    "hadoop.conf.dir": _ignored("no Hadoop client: local paths and object stores (s3://, with "
                                "table.storage_options) are reached directly", "connector"),
    "hadoop.home": _ignored("no Hadoop client: local paths and object stores (s3://, with "
                            "table.storage_options) are reached directly", "connector"),
    # --- Hudi's write settings -----------------------------------------------------------------
    "hoodie.table.name": _mapped("table.name", origin="Hudi"),
    "hoodie.database.name": _mapped("table.database", origin="Hudi"),
    "hoodie.base.path": _mapped("table.base_path", v.local_path, "file:///x, file:/x → /x",
                                origin="Hudi"),
    "hoodie.table.type": _honoured(_TABLE_TYPE, "COPY_ON_WRITE: what hudi-sink writes; "
                                                "MERGE_ON_READ is refused (not written yet)"),
    "hoodie.datasource.write.table.type": _honoured(
        _TABLE_TYPE, "COPY_ON_WRITE: what hudi-sink writes; MERGE_ON_READ is refused"),
    "hoodie.datasource.write.recordkey.field": _mapped("table.record_key_field", origin="Hudi"),
    "hoodie.table.recordkey.fields": _mapped("table.record_key_field", origin="Hudi"),
    "hoodie.datasource.write.partitionpath.field": _mapped("table.partition_field", origin="Hudi"),
    "hoodie.table.partition.fields": _mapped("table.partition_field", origin="Hudi"),
    "hoodie.datasource.write.precombine.field": _mapped("table.precombine_field", origin="Hudi"),
    "hoodie.table.precombine.field": _mapped("table.precombine_field", origin="Hudi"),
    "hoodie.datasource.write.hive_style_partitioning": _mapped(
        "table.hive_style_partitioning", v.boolean, origin="Hudi"),
    "hoodie.datasource.write.operation": _mapped(
        "table.write_mode", v.write_mode, "insert, bulk_insert → insert; upsert → upsert",
        origin="Hudi"),
    "hoodie.datasource.write.keygenerator.class": _honoured(
        v.only(_KEY_GENERATORS), "the simple, complex and non-partitioned key generators: the "
        "key is table.record_key_field (a:1,b:2 for several); one contradicting the fields "
        "(complex with one key field, simple with several, non-partitioned with a partition "
        "field) and others are refused"),
    "hoodie.datasource.write.keygenerator.type": _honoured(
        v.only(_KEY_GENERATORS, fold_case=True), "SIMPLE, COMPLEX, NON_PARTITION"),
    "hoodie.parquet.compression.codec": _mapped("table.parquet_codec", v.codec, origin="Hudi"),
    "hoodie.parquet.small.file.limit": _mapped("table.small_file_bytes", v.integer, origin="Hudi"),
    "hoodie.metadata.enable": _ignored(
        "hudi-sink writes no metadata table (the table config lists no metadata partitions, so "
        "Hudi's readers list the files; a table that has one is refused at start): true or "
        "false, nothing changes"),
    "hoodie.keep.min.commits": _mapped("maintenance.archival.min_instants", v.integer,
                                       "instants kept on the active timeline", origin="Hudi"),
    "hoodie.keep.max.commits": _mapped("maintenance.archival.max_instants", v.integer,
                                       "archival starts above this many instants", origin="Hudi"),
    "hoodie.archive.automatic": _mapped("maintenance.archival.enabled", v.boolean, origin="Hudi"),
    "hoodie.cleaner.commits.retained": _mapped("maintenance.cleaner.commits_retained", v.integer,
                                               origin="Hudi"),
    "hoodie.clean.automatic": _mapped("maintenance.cleaner.enabled", v.boolean, origin="Hudi"),
    "hoodie.cleaner.policy": _honoured(v.only({"KEEP_LATEST_COMMITS": None}),
                                       "KEEP_LATEST_COMMITS, the cleaner's only policy"),
    "hoodie.clustering.async.enabled": _mapped("maintenance.clustering.enabled", v.boolean,
                                               origin="Hudi"),
    "hoodie.clustering.inline": _mapped("maintenance.clustering.enabled", v.boolean, origin="Hudi"),
    "hoodie.write.concurrency.mode": _ignored(
        "the leading coordinator is the table's only writer, fenced through the sink log; no "
        "other writer may commit to the table"),
    "hoodie.write.lock.provider": _ignored(
        "no lock provider: the leading coordinator is the table's only writer, fenced through "
        "the sink log"),
    "hoodie.embed.timeline.server": _ignored("no timeline server: participants write files of "
                                             "the instant the coordinator announced"),
    **{f"hoodie.{kind}.shuffle.parallelism": _ignored(
        "a flush is one Spark write of one partition's buffer; size Spark with spark.conf")
       for kind in ("insert", "upsert", "bulkinsert")},
    # --- Schema providers and the Avro converter (Connect's and Hudi's key names) ------------
    "value.converter.schema.registry.url": _mapped("avro.registry_url", origin="Connect"),
    "value.converter.basic.auth.user.info": KeyRule(
        "mapped", "user:password", (("avro",),), v.user_info, {}, "Connect"),
    "value.converter.basic.auth.credentials.source": _honoured(
        v.only({"USER_INFO": None}), "USER_INFO (from basic.auth.user.info)", "Connect"),
    **{f"hoodie.{tool}.schemaprovider.source.schema.file": _mapped(
        "table.schema", lambda text: f"avsc:{v.text(text)}", "avsc:FILE, read at start",
        origin="Hudi") for tool in ("deltastreamer", "streamer")},
    **{f"hoodie.{tool}.schemaprovider.registry.url": _mapped(
        "table.schema", lambda text: f"registry:{v.text(text)}",
        "registry:URL, the subject's schema read at start", origin="Hudi")
       for tool in ("deltastreamer", "streamer")},
    # --- Kafka Connect's connector keys ----------------------------------------------------------
    "name": _mapped("name", origin="Connect",
                    reason="the sink's name: its topics and groups derive from it"),
    "topics": _mapped("kafka.topics", v.comma_list, "comma-separated", origin="Connect"),
    "topics.regex": _refused("hudi-sink reads the topics it is given by name: list them in "
                             "topics (comma-separated) or kafka.topics"),
    "transforms": _refused("single message transforms are not run: values are decoded as they "
                           "are on the topic (kafka.envelope: debezium unwraps change events)"),
    "predicates": _refused("predicates select single message transforms, which are not run"),
    "key.converter.schemas.enable": _ignored("the Kafka key is not decoded (see key.converter)",
                                             "Connect"),
    "header.converter": _ignored("record headers are not decoded into the table", "Connect"),
    **{key: _ignored("a record that fails to decode is not retried (decoding is deterministic); "
                     "transient failures (storage, registry) retry within service.retry_timeout_ms",
                     "Connect")
       for key in ("errors.retry.timeout", "errors.retry.delay.max.ms")},
}
"""Key → its rule. ``shared.config.seed.translate`` applies it."""

PREFIXES: dict[str, KeyRule] = {
    "hoodie.datasource.hive_sync.": _ignored(_NO_SYNC, "connector"),
    "hive.metastore.": _ignored(_NO_SYNC, "connector"),
    "transforms.": _refused("single message transforms are not run"),
    "predicates.": _refused("predicates select single message transforms, which are not run"),
}
"""Families of keys sharing one rule (the connector's Hive sync settings, transforms)."""


def rule_for(key: str) -> KeyRule | None:
    """The rule of ``key``, from the table or a family of keys; None for an unknown key."""
    if key in KEYS:
        return KEYS[key]
    return next((rule for prefix, rule in PREFIXES.items() if key.startswith(prefix)), None)
