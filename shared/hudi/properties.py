"""``hoodie.properties``: Java Properties syntax, the v6 key set, and the checks an existing
table must pass before the sink writes to it (docs/design.md §3.8, facts 3 and 4)."""

from __future__ import annotations

import zlib

from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.errors import ConfigError, TableFormatError
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.schema.table_schema import TableSchema

__all__ = ["TABLE_VERSION", "TIMELINE_LAYOUT_VERSION", "table_properties", "validate_properties"]

TABLE_VERSION = "6"
TIMELINE_LAYOUT_VERSION = "1"

_SIMPLE_KEYGEN = "org.apache.hudi.keygen.SimpleKeyGenerator"
_COMPLEX_KEYGEN = "org.apache.hudi.keygen.ComplexKeyGenerator"
_NONPARTITIONED_KEYGEN = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"


def _key_generator(table: TableConfig) -> str:
    """The class Hudi infers (``KeyGenUtils.inferKeyGeneratorType``): no partition field,
    ``NonpartitionedKeyGenerator`` (which spells several key fields ``a:1,b:2`` too); one
    partition field and one key field, ``SimpleKeyGenerator``; several key fields,
    ``ComplexKeyGenerator``."""
    if table.partition_field is None:
        return _NONPARTITIONED_KEYGEN
    return _SIMPLE_KEYGEN if len(table.record_key_fields) == 1 else _COMPLEX_KEYGEN


def table_properties(table: TableConfig, schema: TableSchema) -> dict[str, str]:
    """The recommended v6 key set (docs/design.md §3.8, facts 3 and 4), metadata table left off."""
    props: dict[str, str] = {
        "hoodie.table.name": table.name,
        "hoodie.table.type": "COPY_ON_WRITE",
        "hoodie.table.version": TABLE_VERSION,
        "hoodie.timeline.layout.version": TIMELINE_LAYOUT_VERSION,
        "hoodie.database.name": table.database,
        "hoodie.table.recordkey.fields": table.record_key_field,
    }
    if table.partition_field is not None:
        props["hoodie.table.partition.fields"] = table.partition_field
    props.update(
        {
            "hoodie.table.keygenerator.class": _key_generator(table),
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.populate.meta.fields": "true",
            "hoodie.datasource.write.hive_style_partitioning": (
                "true" if table.hive_style_partitioning else "false"
            ),
            # Partition values are percent-encoded by naming.encode_partition_value.
            "hoodie.datasource.write.partitionpath.urlencode": "true",
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.table.timeline.timezone": "UTC",
            "hoodie.archivelog.folder": layout.HUDI_ARCHIVE_FOLDER,
            "hoodie.table.create.schema": schema.avro_schema_json(),
        }
    )
    if table.precombine_field is not None:
        props["hoodie.table.precombine.field"] = table.precombine_field
    # Java validates the checksum whenever the key is present, so it must be exact.
    props["hoodie.table.checksum"] = str(
        zlib.crc32(f"{table.database}.{table.name}".encode())
    )
    return props


def validate_properties(props: dict[str, str], table: TableConfig) -> None:
    """Refuse a table this writer cannot keep, or one the config does not describe."""
    version = props.get("hoodie.table.version")
    if version != TABLE_VERSION:
        raise TableFormatError(
            f"table version {version!r} is not supported (only {TABLE_VERSION})"
        )
    layout = props.get("hoodie.timeline.layout.version", TIMELINE_LAYOUT_VERSION)
    if layout != TIMELINE_LAYOUT_VERSION:
        raise TableFormatError(f"timeline layout {layout!r} is not supported")
    table_type = props.get("hoodie.table.type", "COPY_ON_WRITE")
    if table_type != "COPY_ON_WRITE":
        raise TableFormatError(f"table type {table_type!r} is not supported")
    if props.get("hoodie.table.metadata.partitions", "").strip():
        # A metadata table we would not update would make Java readers miss our files.
        raise TableFormatError("the table has a metadata table, which this writer cannot keep")
    existing_name = props.get("hoodie.table.name")
    if existing_name != table.name:
        raise ConfigError(
            f"existing table is named {existing_name!r}, config says {table.name!r}",
            "table.name",
        )
    existing_key = props.get("hoodie.table.recordkey.fields")
    if existing_key != table.record_key_field:
        raise ConfigError(
            f"existing table has record key {existing_key!r}, "
            f"config says {table.record_key_field!r}",
            "table.record_key_field",
        )
    existing_partition = props.get("hoodie.table.partition.fields", "").strip() or None
    if existing_partition != table.partition_field:
        raise ConfigError(
            f"existing table is partitioned by {existing_partition!r}, "
            f"config says {table.partition_field!r}",
            "table.partition_field",
        )
    hive = props.get("hoodie.datasource.write.hive_style_partitioning", "false").lower()
    if (hive == "true") != table.hive_style_partitioning:
        # Mixing "sf" and "country=sf" directories would break partition pruning.
        raise ConfigError(
            f"existing table has hive_style_partitioning={hive}",
            "table.hive_style_partitioning",
        )
