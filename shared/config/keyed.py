"""Keyed writes' config: the ``upsert`` section, the checks of ``table.write_mode: upsert``
that need more than one key.

``table.write_mode`` (``insert | upsert``) and the key fields live in ``table``
(``shared.config.settings``); this module holds what only upsert mode reads — how a record's
Kafka key is read (tombstones carry no value), which partitioner the producers used (a key must
live in one Kafka partition, so in one file group), and the soft-delete field — and the checks
that relate ``table`` to other sections or to the schema, each naming its key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from hudi_sink.shared.schema.table_schema import TableSchema

__all__ = ["UpsertConfig", "delete_field_problem",
           "mode_problems"]

class UpsertConfig(BaseModel):
    """How upsert mode (``table.write_mode: upsert``) reads keys and deletes; unused in
    insert mode."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kafka_key_format: Literal["string", "json", "avro"] = "string"
    """How a record's Kafka key is read where the value holds none (a tombstone: null value):
    ``string``, the key as UTF-8 text; ``json``, an object holding the key fields (Debezium's
    keys are JSON structs, with or without a Connect schema); ``avro``, a Confluent Avro struct
(Debezium's AvroConverter keys), decoded like Avro values (``kafka.value_format: avro``, the
registry)."""
    key_partitioner: Literal["murmur2", "crc32", "none"] = "murmur2"
    """The partitioner the producers used: ``murmur2`` is Kafka's default partitioner (Java
    clients, ``hudi-sink produce``), ``crc32`` librdkafka's ``consistent_random``. A record whose
    key hashes to another partition than the one it came from is a bad record
    (``KeyPartitionMismatch``): a key must live in one Kafka partition, so in one file group.
    ``none`` skips the check (the producers guarantee it some other way)."""
    delete_field: str | None = Field(None, min_length=1)
    """A soft-delete column (``__deleted`` of Debezium's ``ExtractNewRecordState``,
    ``_hoodie_is_deleted``): a record whose value of it equals ``delete_marker`` deletes its
    key. A column of ``table.schema``."""
    delete_marker: str = Field("true", min_length=1)
    """The text of ``delete_field`` that means "deleted" (a boolean true reads as ``true``)."""


_BOOL: TypeAdapter[bool] = TypeAdapter(bool)


def _flag(section: Any, name: str, default: bool) -> bool | None:
    """``maintenance.<section>.enabled`` as the model will read it (an environment variable's
    ``"false"`` is false), its default when unset; None when it is no boolean (the model
    reports that value itself)."""
    value = section.get(name, default) if isinstance(section, Mapping) else default
    try:
        return _BOOL.validate_python(value)
    except ValidationError:
        return None


def _maintenance_problems(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The table services upsert mode needs and the one it refuses."""
    maintenance = data.get("maintenance")
    maintenance = maintenance if isinstance(maintenance, Mapping) else {}
    problems: list[tuple[str, str]] = []
    if _flag(maintenance.get("cleaner"), "enabled", True) is False:
        problems.append(("maintenance.cleaner.enabled", "false is refused with table.write_mode: "
                         "upsert: every update writes a new slice of its file group and "
                         "supersedes the old one, and only the cleaner removes superseded "
                         "slices, so without it they would pile up forever"))
    if _flag(maintenance.get("clustering"), "enabled", False) is True:
        problems.append(("maintenance.clustering.enabled", "true is refused with "
                         "table.write_mode: upsert: a replacecommit would race the owners' new "
                         "slices of the groups it rewrites; clustering is refused in upsert "
                         "mode, and write-time file sizing (table.small_file_bytes) keeps files "
                         "few"))
    return problems


def mode_problems(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What ``table.write_mode: upsert`` asks of other keys, from the merged file and
    environment before validation (so these are reported beside the model's problems, and
    "given" means written in the file or the environment): an explicit record key — the
    default ``id`` is no key to merge on — and one topic, since a key's versions are ordered
    by offset within one Kafka partition and two topics have no order between them; the
    cleaner on (superseded slices) and clustering off (it would race the groups' owners)."""
    table = data.get("table")
    if not isinstance(table, Mapping) or table.get("write_mode") != "upsert":
        return []
    problems: list[tuple[str, str]] = []
    if table.get("record_key_field") is None:
        problems.append(("table.record_key_field", "required with table.write_mode: upsert, "
                         "given explicitly (the default 'id' is not taken as the key to merge "
                         "on)"))
    kafka = data.get("kafka")
    topics = kafka.get("topics") if isinstance(kafka, Mapping) else None
    if isinstance(topics, list) and len(topics) > 1:
        problems.append(("kafka.topics", f"table.write_mode: upsert reads one topic (got "
                         f"{len(topics)}): a key's versions are ordered by offset within one "
                         "partition, and two topics have no order between them"))
    upsert = data.get("upsert")
    key_format = upsert.get("kafka_key_format") if isinstance(upsert, Mapping) else None
    value_format = kafka.get("value_format") if isinstance(kafka, Mapping) else None
    if key_format == "avro" and value_format != "avro":
        problems.append(("upsert.kafka_key_format", "avro keys are decoded like Avro values: "
                         "they need kafka.value_format: avro (and its registry)"))
    return problems + _maintenance_problems(data)


def delete_field_problem(delete_field: str | None, schema: TableSchema) -> str | None:
    """``upsert.delete_field`` must be a top-level column of the schema."""
    if delete_field is None or delete_field in {c.name for c in schema.value_columns}:
        return None
    return f"delete field {delete_field!r} is not a column of table.schema"
