"""``avro.schema_file`` decodes only the values of its own schema id, ``avro.schema_id``,
which is required with it.

A value's id names the schema it was written with. After a producer moves to a compatible
schema with its fields in another order, decoding the new id's values with the file's schema
reads ``city`` into ``name`` and back, without any error. With a file, a value of another id
is a bad record (``UnknownSchemaId`` naming both ids), or is looked up in the registry when one
is configured as well. The id is never guessed: "the first id read" (what an unset
``avro.schema_id`` used to mean) differs between processes and restarts, so after a restart
past the file's own id's records a newer id was decoded with the file, its fields swapped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka_records import accept_values
from registry_app import LocalRegistry, confluent_avro

from hudi_sink.cli.main import main
from hudi_sink.services.participant.avro_format import AvroValues
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.shared.config.sections import AvroConfig
from hudi_sink.shared.config.settings import TableConfig, load_config
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.schema.registry import writer_schemas

TABLE = TableConfig(schema="id STRING NOT NULL, name STRING, city STRING",
                    record_key_field="id").table_schema()
OLD: dict[str, Any] = {"type": "record", "name": "Person", "fields": [
    {"name": "id", "type": "string"}, {"name": "name", "type": "string"},
    {"name": "city", "type": "string"}]}
NEW: dict[str, Any] = {"type": "record", "name": "Person", "fields": [  # compatible, reordered
    {"name": "id", "type": "string"}, {"name": "city", "type": "string"},
    {"name": "name", "type": "string"}]}
ALICE = {"id": "a", "name": "Alice", "city": "Paris"}


def _accept(avro: AvroConfig, values: list[bytes]) -> TransactionParticipant:
    parser = AvroValues(writer_schemas(avro)).parse
    return accept_values(RecordDecoder(TABLE, 1 << 20, value_parser=parser), values)


def _avsc(tmp_path: Path, schema: dict[str, Any]) -> str:
    path = tmp_path / "person.avsc"
    path.write_text(json.dumps(schema), encoding="utf-8")
    return str(path)


def _rows(p: TransactionParticipant) -> list[dict[str, object]]:
    return [{k: row.values[k] for k in ("id", "name", "city")} for row in p.rows]


def test_a_second_schema_id_is_never_decoded_with_the_file(tmp_path: Path) -> None:
    p = _accept(AvroConfig(schema_file=_avsc(tmp_path, OLD), schema_id=1), [
        confluent_avro(1, OLD, ALICE),
        confluent_avro(2, NEW, {**ALICE, "id": "b"}),  # the producer moved on
        confluent_avro(1, OLD, {**ALICE, "id": "c"}),
    ])
    assert _rows(p) == [ALICE, {**ALICE, "id": "c"}]  # never name="Paris", city="Alice"
    [letter] = p.dead_letters
    assert (letter.offset, letter.error_class) == (1, "UnknownSchemaId")
    assert "schema id 2" in letter.message and "id 1" in letter.message


def test_the_configured_id_wins_over_the_first_id_read(tmp_path: Path) -> None:
    """A process that starts on the newer id's records (a restart past the old ones, another
    participant) still decodes only the file's id with the file."""
    p = _accept(AvroConfig(schema_file=_avsc(tmp_path, NEW), schema_id=2), [
        confluent_avro(1, OLD, ALICE),  # read first, but not the file's id
        confluent_avro(2, NEW, {**ALICE, "id": "b"}),
    ])
    assert _rows(p) == [{**ALICE, "id": "b"}]
    [letter] = p.dead_letters
    assert letter.error_class == "UnknownSchemaId" and "avro.schema_id" in letter.message
    assert "schema id 1" in letter.message and "id 2" in letter.message


def test_with_a_registry_as_well_other_ids_are_looked_up(tmp_path: Path) -> None:
    with LocalRegistry({1: OLD, 2: NEW}) as registry:
        p = _accept(AvroConfig(schema_file=_avsc(tmp_path, OLD), schema_id=1,
                               registry_url=registry.url), [
            confluent_avro(1, OLD, ALICE), confluent_avro(2, NEW, {**ALICE, "id": "b"}),
            confluent_avro(3, NEW, {**ALICE, "id": "x"})])  # in neither: a bad record
        assert registry.requests == ["/schemas/ids/2", "/schemas/ids/3"]  # not the file's id
    assert _rows(p) == [ALICE, {**ALICE, "id": "b"}]
    assert [(d.offset, d.error_class) for d in p.dead_letters] == [(2, "UnknownSchemaId")]


def test_schema_id_config_rules_and_config_check(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    avsc = _avsc(tmp_path, OLD)
    for registry in (None, "http://registry:8081"):
        with pytest.raises(ValueError, match="schema_id\n.*required with avro.schema_file"):
            AvroConfig(schema_file=avsc, registry_url=registry)
    with pytest.raises(ValueError, match="schema_id\n.*names the id of avro.schema_file"):
        AvroConfig(schema_id=3)
    with pytest.raises(ValueError, match="less than or equal"):
        AvroConfig(schema_file=avsc, schema_id=2**32)
    base = {"name": "people", "kafka": {"bootstrap_servers": "kafka:9092", "topics": ["people"],
                                        "value_format": "avro"},
            "table": {"base_path": "warehouse/people"}}
    path = tmp_path / "sink.yaml"
    path.write_text(yaml.safe_dump({**base, "avro": {"schema_file": avsc, "schema_id": 7}}))
    assert load_config(path, environ={}).avro.schema_id == 7
    assert main(["config", "check", "--config", str(path)]) == 0
    assert "schema_id: 7  # file" in capsys.readouterr().out
    for avro in ({"schema_file": avsc}, {"schema_file": avsc, "registry_url": "http://registry:8081"}):
        path.write_text(yaml.safe_dump({**base, "avro": avro}))
        with pytest.raises(ConfigError, match="required with avro.schema_file") as refused:
            load_config(path, environ={})
        assert refused.value.key == "avro.schema_id"
        assert "bytes 1-4" in str(refused.value) and "registry" in str(refused.value)
        assert main(["config", "check", "--config", str(path)]) == 2
        assert "avro.schema_id" in capsys.readouterr().err
