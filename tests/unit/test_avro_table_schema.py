"""The table schema from an Avro schema (seed ``schemaprovider.class``): ``table.schema`` as
``avsc:FILE`` (Hudi's FilebasedSchemaProvider) or ``registry:URL`` of a subject's latest version
(SchemaRegistryProvider), read once at load and turned into the equivalent DDL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from registry_app import LocalRegistry

from hudi_sink.shared.config.settings import config_from_mapping, load_config
from hudi_sink.shared.errors import ConfigError

ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "string"},
    {"name": "qty", "type": ["null", "int"]},
    {"name": "total", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "status", "type": {"type": "enum", "name": "S", "symbols": ["A", "B"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "double"}},
    {"name": "addr", "type": ["null", {"type": "record", "name": "Addr", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": "long"}]}]},
]}
DDL = ("id STRING NOT NULL, qty INT, total DECIMAL(12, 2) NOT NULL, ts TIMESTAMP, day DATE NOT NULL, "
       "ref STRING NOT NULL, status STRING NOT NULL, tags ARRAY<STRING> NOT NULL, "
       "attrs MAP<STRING, DOUBLE> NOT NULL, addr STRUCT<city: STRING, zip: BIGINT>")


def test_avsc_file_relative_to_the_properties_file(tmp_path: Path) -> None:
    (tmp_path / "order.avsc").write_text(json.dumps(ORDER))
    (tmp_path / "sink.properties").write_text(
        "schemaprovider.class=org.apache.hudi.utilities.schema.FilebasedSchemaProvider\n"
        "hoodie.deltastreamer.schemaprovider.source.schema.file=order.avsc\n"
        "table.record_key_field=id\n")
    config = load_config(tmp_path / "sink.properties", environ={})
    assert config.table.schema_ddl == DDL
    assert [c.name for c in config.table.table_schema().columns][-1] == "addr"


def test_registry_subject_latest_with_basic_auth() -> None:
    with LocalRegistry({7: ORDER}, user="u", password="p", subjects={"orders-value": 7}) as registry:
        config = config_from_mapping({
            "table": {"schema": f"registry:{registry.url}/subjects/orders-value/versions/latest",
                      "record_key_field": "id"},
            "avro": {"registry_username": "u", "registry_password": "p"}}, environ={})
        assert config.table.schema_ddl == DDL
        with pytest.raises(ConfigError, match="table.schema: cannot read"):
            config_from_mapping({"table": {"schema": f"registry:{registry.url}/subjects/nope/versions/"
                                                     "latest"}}, environ={})


def test_unmappable_avro_is_named(tmp_path: Path) -> None:
    (tmp_path / "bad.avsc").write_text(json.dumps(
        {"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "string"]}]}))
    with pytest.raises(ConfigError, match="union"):
        config_from_mapping({"table": {"schema": f"avsc:{tmp_path / 'bad.avsc'}",
                                       "record_key_field": "u"}}, environ={})
