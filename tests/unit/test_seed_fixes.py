"""A migrating team's file means what it meant under Kafka Connect (the data-loss review of the
config keys): JsonConverter alone is Connect's envelope, ``schemas.enable`` only counts with
JsonConverter, ``errors.log.*`` are honoured, ``errors.tolerance`` agrees with the connector's
``allow.commit.on.errors`` in Connect's words, Hadoop's ``file:/x`` is a local path, a key
generator contradicting the fields is refused, and the dead-letter topic is never one the sink
reads or writes for something else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hudi_sink.shared.config.key_values import local_path
from hudi_sink.shared.config.seed import translate
from hudi_sink.shared.config.settings import config_from_mapping, load_config
from hudi_sink.shared.errors import ConfigError

SCHEMA_ENV = {"HUDI_SINK__TABLE__SCHEMA": "id STRING, country STRING, amount DOUBLE"}
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
DLQ_KEY = "errors.deadletterqueue.topic.name"
IN_ERRORS = "deadletterqueue.topic.name"  # the dotted name inside the errors section


def _load(tmp_path: Path, keys: dict[str, Any]) -> Any:
    path = tmp_path / "sink.json"
    path.write_text(json.dumps(keys), encoding="utf-8")
    return load_config(path, environ=SCHEMA_ENV)


@pytest.mark.parametrize(("keys", "value_format"), [
    ({"value.converter": JSON_CONVERTER}, "connect_json"),  # Connect's schemas.enable=true
    ({"value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "true"},
     "connect_json"),
    ({"value.converter.schemas.enable": "false", "value.converter": JSON_CONVERTER}, "json"),
    ({"value.converter": STRING_CONVERTER}, "json"),
    ({"value.converter": STRING_CONVERTER, "value.converter.schemas.enable": "true"}, "json"),
    ({"value.converter.schemas.enable": "true", "value.converter": STRING_CONVERTER}, "json"),
    ({"value.converter.schemas.enable": "true"}, "connect_json"),  # the worker's converter
])
def test_json_converter_means_the_envelope_unless_schemas_are_off(
        tmp_path: Path, keys: dict[str, str], value_format: str) -> None:
    assert _load(tmp_path, keys).kafka.value_format == value_format


def test_schemas_enable_beside_string_converter_is_ignored_with_the_reason() -> None:
    seeded = translate({"value.converter": STRING_CONVERTER,
                        "value.converter.schemas.enable": "true"})
    fate = next(f for f in seeded.fates if f.key == "value.converter.schemas.enable")
    assert fate.status == "ignored" and "only to" in fate.detail and STRING_CONVERTER in fate.detail
    assert any(w.startswith("value.converter.schemas.enable is ignored") for w in seeded.warnings)


def test_errors_log_keys_are_honoured_from_properties(tmp_path: Path) -> None:
    path = tmp_path / "sink.properties"
    path.write_text("errors.log.enable=true\nerrors.log.include.messages=true\n", encoding="utf-8")
    config = load_config(path, environ=SCHEMA_ENV)
    assert config.errors.letter_logging == "records"
    assert not translate({"errors.log.enable": "true"}).warnings


@pytest.mark.parametrize(("tolerance", "allow", "behaviour"), [
    ("all", True, "dlq"), ("none", False, "fail"), ("ALL", "true", "dlq")])
def test_connect_tolerance_agrees_with_allow_commit_on_errors(
        tmp_path: Path, tolerance: str, allow: Any, behaviour: str) -> None:
    for keys in ({"errors.tolerance": tolerance, "hoodie.kafka.allow.commit.on.errors": allow},
                 {"hoodie.kafka.allow.commit.on.errors": allow, "errors.tolerance": tolerance}):
        assert _load(tmp_path, keys).errors.tolerance == behaviour
    with pytest.raises(ConfigError, match="keep one"):
        _load(tmp_path, {"errors.tolerance": tolerance,
                         "hoodie.kafka.allow.commit.on.errors": behaviour != "dlq"})


@pytest.mark.parametrize(("value", "path"), [
    ("file:///tmp/t", "/tmp/t"), ("file:/tmp/t", "/tmp/t"), ("/tmp/t", "/tmp/t"),
    ("s3://bucket/t", "s3://bucket/t")])
def test_file_uris_become_local_paths(value: str, path: str) -> None:
    assert local_path(value) == path


@pytest.mark.parametrize("value", ["file://host/tmp/t", "file:tmp/t", "file:", "file://"])
def test_other_file_forms_are_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="file: URI names an absolute path") as caught:
        _load(tmp_path, {"hoodie.base.path": value})
    assert caught.value.key == "hoodie.base.path"


KEYGEN = "hoodie.datasource.write.keygenerator.class"


@pytest.mark.parametrize(("key", "generator", "fields", "reason"), [
    (KEYGEN, "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
     {"hoodie.datasource.write.partitionpath.field": "country"}, "non-partitioned"),
    ("hoodie.datasource.write.keygenerator.type", "NON_PARTITION",
     {"partition.field.name": "country"}, "non-partitioned"),
    (KEYGEN, "org.apache.hudi.keygen.ComplexKeyGenerator",
     {"hoodie.datasource.write.recordkey.field": "id"}, "id:1"),
    (KEYGEN, "org.apache.hudi.keygen.ComplexAvroKeyGenerator", {}, "id:1"),  # default key: id
    (KEYGEN, "org.apache.hudi.keygen.SimpleKeyGenerator",
     {"hoodie.datasource.write.recordkey.field": "id,country"}, "one key field"),
])
def test_a_key_generator_contradicting_the_fields_is_refused(
        tmp_path: Path, key: str, generator: str, fields: dict[str, str], reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as caught:
        _load(tmp_path, {key: generator, **fields})
    assert caught.value.key == key
    assert caught.value.problems == [(key, caught.value.problems[0][1])]


@pytest.mark.parametrize(("generator", "fields"), [
    ("org.apache.hudi.keygen.ComplexKeyGenerator",
     {"hoodie.datasource.write.recordkey.field": "id,country"}),
    ("org.apache.hudi.keygen.SimpleKeyGenerator",
     {"hoodie.datasource.write.partitionpath.field": "country"}),
    ("org.apache.hudi.keygen.NonpartitionedKeyGenerator", {}),
])
def test_a_key_generator_matching_the_fields_is_honoured(
        tmp_path: Path, generator: str, fields: dict[str, str]) -> None:
    _load(tmp_path, {KEYGEN: generator, **fields})


@pytest.mark.parametrize(("data", "role"), [
    ({"kafka": {"topics": ["orders", "returns"]}, "errors": {IN_ERRORS: "returns"}}, "data topic"),
    ({"kafka": {"topics": ["orders-dlq"]}}, "data topic"),  # the default <name>-dlq
    ({"kafka": {"control_topic": "shared-dlq"}, "errors": {IN_ERRORS: "shared-dlq"}},
     "control topic"),
    ({"errors": {IN_ERRORS: "orders-deletion"}}, "deletion topic"),
    ({"errors": {IN_ERRORS: "orders-deletion-retry"}}, "deletion topic"),
    ({"errors": {IN_ERRORS: "orders-deletion-dlq"}}, "deletion topic"),
])
def test_the_dlq_topic_is_no_other_topic_of_the_sink(data: dict[str, Any], role: str) -> None:
    with pytest.raises(ConfigError, match=f"is also the sink's {role}") as caught:
        config_from_mapping(data, environ=SCHEMA_ENV)
    assert caught.value.key == DLQ_KEY


def test_a_dlq_topic_of_its_own_is_accepted() -> None:
    config = config_from_mapping({"errors": {IN_ERRORS: "orders-bad"}}, environ=SCHEMA_ENV)
    assert config.dlq_topic == "orders-bad"
