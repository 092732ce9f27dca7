"""``--config sink.properties``: the Hudi Kafka Connect sink's keys (RFC-32) mapped onto the
config, Java properties syntax, ignored keys with reasons, unknown keys named (exit 2), env on
top, and ``config check`` naming each value's source and properties key."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from hudi_sink.cli.main import main
from hudi_sink.shared.config.connector_keys import KEYS
from hudi_sink.shared.config.settings import load_config
from hudi_sink.shared.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
RFC_KEYS = ROOT / "tests" / "fixtures" / "rfc32-configuration-keys.txt"
"""The keys RFC-32's "Configurations" section lists (extracted once from the RFC's text)."""

SEED_KEYS = {key for key, rule in KEYS.items() if rule.origin == "RFC-32"}
IGNORED_KEYS = {key for key in SEED_KEYS if KEYS[key].status == "ignored"}

SCHEMA_ENV = {"HUDI_SINK__TABLE__SCHEMA": "id STRING, country STRING, amount DOUBLE"}


def _write(tmp_path: Path, text: str, name: str = "sink.properties") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


FULL = r"""
# The Hudi Kafka Connect sink's own file, as a Connect deployment has it.
connector.class=org.apache.hudi.connect.HudiSinkConnector
tasks.max=4
target.base.path=warehouse/orders
target.table.name=orders_hudi
target.database.name=sales
partition.field.name=country
write.ignore.failed=false
hoodie.table.base.file.format=PARQUET
hoodie.allow.empty.commit=false
hoodie.writestatus.class=org.apache.hudi.client.WriteStatus
kafka.topic.names=orders, returns
kafka.bootstrap.servers=kafka-1:9092,\
                        kafka-2:9092
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=false
format.class=org.apache.hudi.connect.writers.ParquetWriter
flush.size=5000
transaction.interval.ms=30000
enhanced.avro.schema.support=true
connect.meta.data=true
retry.backoff.ms=250
shutdown.timeout.ms=15000
avro.codec=deflate
parquet.codec=zstd
control.topic.name: hudi-control-topic
coordinator.writestatus.timeout 120
write.retry.timeout=90s
"""


def test_every_seed_key_is_mapped_or_ignored_and_the_table_covers_the_seed() -> None:
    """The table's RFC-32 keys are exactly those the RFC's "Configurations" section lists."""
    listed = {line.strip() for line in RFC_KEYS.read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    assert listed == SEED_KEYS


def test_readme_documents_every_seed_key() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### From Hudi's Kafka Connect sink", 1)[1].split("\n## ", 1)[0]
    for key in SEED_KEYS:
        assert f"`{key}`" in section, key


def test_full_seed_file_maps_onto_the_config(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = _write(tmp_path, FULL)
    with caplog.at_level(logging.WARNING, "hudi_sink.config"):
        config = load_config(path, environ=SCHEMA_ENV)
    assert config.table.base_path == str(tmp_path / "warehouse" / "orders")
    assert (config.table.name, config.table.database) == ("orders_hudi", "sales")
    assert config.table.partition_field == "country"
    assert config.errors.tolerance == "fail"
    assert config.transaction.allow_empty_commit is False
    assert config.kafka.topics == ["orders", "returns"]
    assert config.kafka.bootstrap_servers == "kafka-1:9092,kafka-2:9092"  # continuation line
    assert config.transaction.flush_records == 5000
    assert config.transaction.interval_ms == 30000
    assert config.table.kafka_metadata is True
    assert config.service.retry_backoff_ms == 250
    assert config.service.shutdown_timeout_ms == 15000
    assert config.table.parquet_codec == "zstd"
    assert config.control_topic == "hudi-control-topic"
    assert config.transaction.write_status_timeout_ms == 120_000  # seconds, as Hudi's own key
    assert config.kafka.value_format == "json"
    assert config.service.retry_timeout_ms == 90_000
    warned = caplog.text
    for key in IGNORED_KEYS:
        assert f"{key} is ignored" in warned
    assert "tasks.max is ignored: parallelism is the number of participant processes" in warned


def test_properties_escapes_unicode_and_comments(tmp_path: Path) -> None:
    path = _write(tmp_path, "! a comment\n"
                            "target.table.name = caf\\u00e9_orders\n"
                            "target.base.path=/data/with\\ space\\:colon\n"
                            "table.record_key_field=id\n"
                            "name=caf\\\n    e\n")
    config = load_config(path, environ={"HUDI_SINK__TABLE__SCHEMA": "id STRING"})
    assert config.table.name == "café_orders"
    assert config.table.base_path == "/data/with space:colon"
    assert config.name == "cafe"


def test_own_dotted_keys_and_json_values(tmp_path: Path) -> None:
    path = _write(tmp_path, 'kafka.topics=["a","b"]\n'
                            "table.schema=id STRING, n INT\n"
                            'spark.conf={"spark.driver.memory": "2g"}\n')
    config = load_config(path, environ={})
    assert config.kafka.topics == ["a", "b"]
    assert config.table.schema_ddl == "id STRING, n INT"
    assert config.spark.conf == {"spark.driver.memory": "2g"}


@pytest.mark.parametrize(("text", "key"), [
    ("target.base.pth=/x\n", "target.base.pth"),
    ("hoodie.datasource.write.operation=delete_partition\n", "hoodie.datasource.write.operation"),
    ("table.no_such_key=1\n", "table.no_such_key"),
    ("parquet.codec=brotli\n", "parquet.codec"),
    ("hoodie.table.base.file.format=ORC\n", "hoodie.table.base.file.format"),
    ("flush.size=many\n", "flush.size"),
    ("connect.meta.data=yes\n", "connect.meta.data"),
    ("value.converter=com.example.ProtobufConverter\n", "value.converter"),
    ("value.converter.basic.auth.user.info=nopassword\n", "value.converter.basic.auth.user.info"),
    ("value.converter.schemas.enable=maybe\n", "value.converter.schemas.enable"),
    ("schemaprovider.class=com.example.MySchemaProvider\n", "schemaprovider.class"),
    ("coordinator.writestatus.timeout=soon\n", "coordinator.writestatus.timeout"),
])
def test_refused_keys_are_named(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, text), environ={})
    assert caught.value.key is not None and caught.value.key.startswith(key)


def test_a_value_the_config_refuses_names_the_properties_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, "transaction.interval.ms=5\n"), environ={})
    assert caught.value.key == "transaction.interval.ms (→ transaction.interval_ms)"


def test_unknown_key_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "target.base.path=/x\nhoodie.bogus.key=1\n")
    assert main(["config", "check", "--config", str(path)]) == 2
    assert "hoodie.bogus.key: unknown key" in capsys.readouterr().err


def test_env_overrides_apply_on_top_of_a_properties_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "target.table.name=from_file\nparquet.codec=gzip\n")
    config = load_config(path, environ={**SCHEMA_ENV, "HUDI_SINK__TABLE__NAME": "from_env",
                                        "HUDI_SINK__NAME": "sink1"})
    assert config.table.name == "from_env"
    assert config.table.parquet_codec == "gzip"
    assert config.name == "sink1"


def test_tls_certificate_turns_on_ssl(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    config = load_config(_write(tmp_path, f"kafka.tls.certificate={ca}\n"), environ={})
    assert (config.kafka.ssl_cafile, config.kafka.security_protocol) == (str(ca), "SSL")


def test_config_check_shows_source_and_properties_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, FULL)
    monkeypatch.setenv("HUDI_SINK__TABLE__SCHEMA", "id STRING, country STRING")
    monkeypatch.setenv("HUDI_SINK__TABLE__NAME", "env_name")
    assert main(["config", "check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert 'parquet_codec: "zstd"  # file (parquet.codec)' in out
    assert 'control_topic: "hudi-control-topic"  # file (control.topic.name)' in out
    assert 'name: "env_name"  # env' in out  # the env override wins over target.table.name
    assert "session_timeout_ms: 10000  # default" in out
    assert re.search(r"#   tasks\.max +ignored +\"4\"  parallelism is the number", out), out
    assert "# topics: hudi-control-topic," in out

    assert main(["config", "check", "--config", str(path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["sources"]["table.parquet_codec"] == "file"
    assert shown["properties_keys"]["table.parquet_codec"] == "parquet.codec"
    assert "table.name" not in shown["properties_keys"]
    assert shown["sources"]["table.name"] == "env"
    assert any(w.startswith("avro.codec is ignored") for w in shown["ignored"])


def test_connect_meta_data_appends_the_kafka_columns_to_the_schema(tmp_path: Path) -> None:
    path = _write(tmp_path, "connect.meta.data=true\n")
    schema = load_config(path, environ=SCHEMA_ENV).table.table_schema()
    assert schema.kafka_metadata
    assert [(c.name, c.kind.value) for c in schema.columns[-5:]] == [
        ("_kafka_topic", "STRING"), ("_kafka_partition", "INT"), ("_kafka_offset", "BIGINT"),
        ("_kafka_timestamp", "TIMESTAMP"), ("_kafka_key", "STRING")]
    with pytest.raises(ConfigError, match="_kafka_offset"):
        load_config(path, environ={"HUDI_SINK__TABLE__SCHEMA": "id STRING, _kafka_offset BIGINT"})
    plain = load_config(_write(tmp_path, "connect.meta.data=false\n", "b.properties"),
                        environ={"HUDI_SINK__TABLE__SCHEMA": "id STRING, _kafka_offset BIGINT"})
    assert not plain.table.table_schema().kafka_metadata


def test_schemas_enable_selects_the_connect_json_envelope(tmp_path: Path) -> None:
    path = _write(tmp_path, "value.converter=org.apache.kafka.connect.json.JsonConverter\n"
                            "value.converter.schemas.enable=true\n")
    assert load_config(path, environ=SCHEMA_ENV).kafka.value_format == "connect_json"


def test_avro_converter_with_registry_and_basic_auth(tmp_path: Path) -> None:
    path = _write(tmp_path, "value.converter.schemas.enable=true\n"
                            "value.converter=io.confluent.connect.avro.AvroConverter\n"
                            "value.converter.schema.registry.url=https://registry:8081\n"
                            "value.converter.basic.auth.user.info=sink:s3cr:et\n")
    config = load_config(path, environ=SCHEMA_ENV)
    assert config.kafka.value_format == "avro"
    assert config.avro.registry_url == "https://registry:8081"
    assert (config.avro.registry_username, config.avro.registry_password) == ("sink", "s3cr:et")


def test_properties_file_equals_the_equivalent_yaml(tmp_path: Path) -> None:
    """Every mapped seed key lands where the equivalent YAML puts it: the same SinkConfig."""
    properties = load_config(_write(tmp_path, FULL), environ=SCHEMA_ENV)
    yaml_file = tmp_path / "sink.yaml"
    yaml_file.write_text(json.dumps({
        "kafka": {"topics": ["orders", "returns"], "bootstrap_servers": "kafka-1:9092,kafka-2:9092",
                  "control_topic": "hudi-control-topic", "value_format": "json"},
        "table": {"base_path": "warehouse/orders", "name": "orders_hudi", "database": "sales",
                  "partition_field": "country", "kafka_metadata": True, "parquet_codec": "zstd"},
        "errors": {"tolerance": "fail"},
        "transaction": {"allow_empty_commit": False, "flush_records": 5000, "interval_ms": 30000,
                        "write_status_timeout_ms": 120000},
        "service": {"retry_backoff_ms": 250, "shutdown_timeout_ms": 15000, "retry_timeout_ms": 90000},
    }))  # JSON is YAML
    assert load_config(yaml_file, environ=SCHEMA_ENV) == properties
