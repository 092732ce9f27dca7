"""The configuration of keyed writes: ``table.write_mode``, ``table.small_file_bytes``,
``kafka.envelope`` and the ``upsert`` section — defaults, environment overrides, every
refusal naming its key beside the config's other problems — and what ``hoodie.properties``
records for a composite key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from hudi_sink.cli.main import main
from hudi_sink.shared.config.settings import config_from_mapping, load_config
from hudi_sink.shared.errors import ConfigError

DDL = "id STRING, seq BIGINT, day STRING, amount DOUBLE, deleted BOOLEAN"
UPSERT = {"table": {"write_mode": "upsert", "record_key_field": "id", "schema": DDL}}


def _problems(data: dict[str, Any], environ: dict[str, str] | None = None) -> dict[str, str]:
    with pytest.raises(ConfigError) as error:
        config_from_mapping(data, environ=environ or {})
    return {str(key): message for key, message in error.value.problems}


def test_defaults_leave_a_sink_as_it_was() -> None:
    config = config_from_mapping({}, environ={})
    assert config.table.write_mode == "insert"
    assert config.table.small_file_bytes == 104857600  # Hudi's hoodie.parquet.small.file.limit
    assert config.kafka.envelope == "none"
    assert (config.upsert.kafka_key_format, config.upsert.key_partitioner) == ("string", "murmur2")
    assert (config.upsert.delete_field, config.upsert.delete_marker) == (None, "true")
    assert config.table.record_key_fields == ("id",)


def test_every_new_key_is_set_by_the_environment() -> None:
    config = config_from_mapping({"table": {"schema": DDL}}, environ={
        "HUDI_SINK__TABLE__WRITE_MODE": "upsert",
        "HUDI_SINK__TABLE__RECORD_KEY_FIELD": "id, seq",
        "HUDI_SINK__TABLE__SMALL_FILE_BYTES": "0",
        "HUDI_SINK__KAFKA__ENVELOPE": "debezium",
        "HUDI_SINK__UPSERT__KAFKA_KEY_FORMAT": "json",
        "HUDI_SINK__UPSERT__KEY_PARTITIONER": "crc32",
        "HUDI_SINK__UPSERT__DELETE_FIELD": "deleted",
        "HUDI_SINK__UPSERT__DELETE_MARKER": "yes",
    })
    assert config.table.write_mode == "upsert" and config.table.record_key_fields == ("id", "seq")
    assert config.table.small_file_bytes == 0 and config.kafka.envelope == "debezium"
    assert config.upsert.model_dump() == {"kafka_key_format": "json", "key_partitioner": "crc32",
                                          "delete_field": "deleted", "delete_marker": "yes"}


def test_a_bad_value_names_its_key_and_its_variable() -> None:
    problems = _problems({}, {"HUDI_SINK__UPSERT__KEY_PARTITIONER": "fnv",
                              "HUDI_SINK__TABLE__WRITE_MODE": "merge"})
    assert "HUDI_SINK__UPSERT__KEY_PARTITIONER" in problems["upsert.key_partitioner"]
    assert "HUDI_SINK__TABLE__WRITE_MODE" in problems["table.write_mode"]
    assert "table.small_file_bytes" in _problems({"table": {"small_file_bytes": -1}})
    assert "kafka.envelope" in _problems({"kafka": {"envelope": "maxwell"}})
    assert "upsert.kafka_key_format" in _problems({"upsert": {"kafka_key_format": "protobuf"}})


def test_upsert_needs_a_record_key_given_explicitly() -> None:
    problems = _problems({"table": {"write_mode": "upsert", "schema": DDL}})
    assert list(problems) == ["table.record_key_field"]
    assert "explicitly" in problems["table.record_key_field"]
    # Given as the default's own value is given: accepted, from the file or the environment.
    assert config_from_mapping(UPSERT, environ={}).table.write_mode == "upsert"
    config = config_from_mapping({"table": {"write_mode": "upsert", "schema": DDL}},
                                 environ={"HUDI_SINK__TABLE__RECORD_KEY_FIELD": "id"})
    assert config.table.record_key_field == "id"


def test_upsert_reads_one_topic_and_says_so_beside_the_other_problems() -> None:
    problems = _problems({"kafka": {"topics": ["a", "b"]},
                          "table": {"write_mode": "upsert", "small_file_bytes": -5}})
    assert set(problems) == {"kafka.topics", "table.record_key_field", "table.small_file_bytes"}
    assert "one topic" in problems["kafka.topics"]
    # Insert mode still reads several topics.
    assert config_from_mapping({"kafka": {"topics": ["a", "b"]}}, environ={}).kafka.topics == ["a", "b"]


def test_empty_key_field_names_are_refused_naming_the_key() -> None:
    for text in ("id,,seq", "id,", " "):
        assert "empty field name" in _problems({"table": {"record_key_field": text}})[
            "table.record_key_field"]


@pytest.mark.parametrize(("key", "field", "table"), [
    ("upsert.delete_field", "gone", {"schema": DDL}),
    ("table.precombine_field", "gone", {"schema": DDL}),
    ("table.record_key_field", "gone", {"schema": DDL}),
])
def test_fields_a_key_names_must_be_columns(key: str, field: str, table: dict[str, Any]) -> None:
    section, name = key.split(".")
    data: dict[str, Any] = {"table": dict(table)}
    data.setdefault(section, {})[name] = field if name != "record_key_field" else f"id,{field}"
    problems = _problems(data)
    assert list(problems) == [key] and repr(field) in problems[key]


def test_upsert_keys_come_from_a_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "sink.properties"
    path.write_text("table.write_mode=upsert\ntable.record_key_field=id,seq\n"
                    f"table.schema={DDL}\nupsert.key_partitioner=none\n", encoding="utf-8")
    config = load_config(path, environ={})
    assert config.table.record_key_fields == ("id", "seq")
    assert config.upsert.key_partitioner == "none"


def test_config_check_shows_where_each_new_key_came_from(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sink.yaml"
    path.write_text(yaml.safe_dump({"table": {"base_path": "t", "schema": DDL,
                                              "record_key_field": "id , seq"},
                                    "upsert": {"delete_field": "deleted"}}), encoding="utf-8")
    monkeypatch.setenv("HUDI_SINK__UPSERT__KEY_PARTITIONER", "crc32")
    assert main(["config", "check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert 'write_mode: "insert"  # default' in out
    assert 'record_key_field: "id,seq"  # file' in out
    assert "small_file_bytes: 104857600  # default" in out
    assert 'envelope: "none"  # default' in out
    assert 'key_partitioner: "crc32"  # env' in out
    assert 'delete_field: "deleted"  # file' in out
    assert f"# table: {tmp_path / 't'} does not exist yet" in out


def test_avro_message_keys_need_avro_values() -> None:
    from hudi_sink.shared.config.keyed import mode_problems

    base = {"table": {"write_mode": "upsert", "record_key_field": "id"},
            "upsert": {"kafka_key_format": "avro"}}
    assert ("upsert.kafka_key_format" in
            {key for key, _ in mode_problems({**base, "kafka": {"value_format": "json"}})})
    assert mode_problems({**base, "kafka": {"value_format": "avro"}}) == []
