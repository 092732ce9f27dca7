"""Config loading: defaults, YAML, env and CLI overrides, precedence, and errors naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hudi_sink.shared.config.problems import ENV_PREFIX
from hudi_sink.shared.config.settings import (
    SinkConfig,
    config_from_mapping,
    load_config,
)
from hudi_sink.shared.errors import ConfigError, SchemaError

NO_ENV: dict[str, str] = {}


def _write(tmp_path: Path, data: Any, name: str = "sink.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _error(data: dict[str, Any], environ: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        config_from_mapping(data, environ=NO_ENV if environ is None else environ, base_dir=Path("/"))
    return info.value


# --- defaults -------------------------------------------------------------------------------


def test_defaults(tmp_path: Path) -> None:
    config = config_from_mapping({}, environ=NO_ENV, base_dir=tmp_path)
    assert config.name == "orders"
    assert config.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert config.kafka.topics == ["orders"]
    assert config.kafka.session_timeout_ms == 10000
    assert config.kafka.startup_timeout_s == 60
    assert config.kafka.security_protocol == "PLAINTEXT"
    assert config.kafka.sasl_mechanism is None
    assert config.table.name == "orders"
    assert config.table.database == "default"
    assert config.table.record_key_field == "id"
    assert config.table.partition_field is None
    assert config.table.schema_ddl == "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE, payload STRING"
    assert config.table.hive_style_partitioning is False
    assert config.table.base_path == str((tmp_path / "warehouse" / "orders").resolve())
    assert config.transaction.interval_ms == 60000
    assert config.transaction.write_status_timeout_ms == 300000
    assert config.transaction.flush_records == 100000
    assert config.errors.tolerance == "dlq"
    assert config.errors.max_record_bytes == 10485760
    assert (
        config.deletion.partitions,
        config.deletion.send_delay_s,
        config.deletion.reconsume_later_s,
        config.deletion.max_redeliveries,
        config.deletion.cache_expiry_s,
        config.deletion.orphan_min_age_s,
    ) == (4, 60, 600, 10, 600, 3600)
    assert (config.admin.host, config.admin.port, config.admin.token) == ("0.0.0.0", 8080, None)
    assert config.spark.master == "local[2]"
    assert config.spark.conf == {}


def test_load_without_file_uses_defaults_and_env() -> None:
    config = load_config(None, environ={"HUDI_SINK__NAME": "payments"})
    assert config.name == "payments"
    assert Path(config.table.base_path).is_absolute()


# --- YAML -----------------------------------------------------------------------------------


def test_yaml_file_is_loaded(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "name": "payments",
            "kafka": {"bootstrap_servers": "k1:9092,k2:9092", "topics": ["p1", "p2"]},
            "table": {
                "base_path": "/data/payments",
                "name": "payments_tbl",
                "record_key_field": "pid",
                "partition_field": "region",
                "schema": "pid BIGINT NOT NULL, region STRING, total DOUBLE",
            },
            "transaction": {"interval_ms": 1500, "flush_records": 10},
            "errors": {"tolerance": "fail"},
            "admin": {"port": 9000, "token": "s3cret"},
            "spark": {"master": "sc://spark:15002", "conf": {"spark.driver.memory": "1g", "n": 4}},
        },
    )
    config = load_config(path, environ=NO_ENV)
    assert config.name == "payments"
    assert config.kafka.topics == ["p1", "p2"]
    assert config.kafka.bootstrap_servers == "k1:9092,k2:9092"
    assert config.table.base_path == "/data/payments"
    assert config.table.name == "payments_tbl"
    assert config.table.partition_field == "region"
    assert config.table.schema_ddl.startswith("pid BIGINT")
    assert config.transaction.interval_ms == 1500
    assert config.transaction.flush_records == 10
    assert config.transaction.write_status_timeout_ms == 300000  # untouched default
    assert config.errors.tolerance == "fail"
    assert config.admin.port == 9000
    assert config.admin.token == "s3cret"
    assert config.spark.master == "sc://spark:15002"
    assert config.spark.conf == {"spark.driver.memory": "1g", "n": "4"}


def test_empty_yaml_file_gives_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("", encoding="utf-8")
    assert load_config(path, environ=NO_ENV).name == "orders"


def test_missing_file_is_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml", environ=NO_ENV)


def test_invalid_yaml_is_config_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path, environ=NO_ENV)


def test_non_mapping_yaml_is_config_error(tmp_path: Path) -> None:
    path = _write(tmp_path, ["a", "b"])
    with pytest.raises(ConfigError, match="mapping"):
        load_config(path, environ=NO_ENV)


# --- environment ----------------------------------------------------------------------------


def test_env_overrides(tmp_path: Path) -> None:
    environ = {
        "HUDI_SINK__NAME": "from-env",
        "HUDI_SINK__KAFKA__TOPICS": '["a","b"]',
        "HUDI_SINK__TRANSACTION__INTERVAL_MS": "500",
        "HUDI_SINK__ERRORS__TOLERANCE": "fail",
        "HUDI_SINK__TABLE__HIVE_STYLE_PARTITIONING": "true",
        "UNRELATED": "1",
        "HUDI_SINKNAME": "ignored",
    }
    config = config_from_mapping({}, environ=environ, base_dir=tmp_path)
    assert config.name == "from-env"
    assert config.kafka.topics == ["a", "b"]
    assert config.transaction.interval_ms == 500
    assert config.errors.tolerance == "fail"
    assert config.table.hive_style_partitioning is True


def test_env_keys_are_case_insensitive_after_prefix(tmp_path: Path) -> None:
    config = config_from_mapping({}, environ={"HUDI_SINK__kafka__Session_Timeout_MS": "20000"},
                                 base_dir=tmp_path)
    assert config.kafka.session_timeout_ms == 20000


def test_env_spark_conf_json_object(tmp_path: Path) -> None:
    environ = {"HUDI_SINK__SPARK__CONF": '{"spark.driver.memory": "2g"}'}
    config = config_from_mapping({}, environ=environ, base_dir=tmp_path)
    assert config.spark.conf == {"spark.driver.memory": "2g"}


def test_env_numeric_looking_value_for_string_key_stays_string(tmp_path: Path) -> None:
    # A token, password or sink name made of digits is an ordinary string: env values have
    # no quotes, so a string key must accept what the user typed.
    environ = {
        "HUDI_SINK__NAME": "2024",
        "HUDI_SINK__ADMIN__TOKEN": "123456",
    }
    config = config_from_mapping({}, environ=environ, base_dir=tmp_path)
    assert config.name == "2024"
    assert config.admin.token == "123456"


def test_env_invalid_json_names_key() -> None:
    error = _error({}, {"HUDI_SINK__KAFKA__TOPICS": '["a", '})
    assert error.key == "kafka.topics"
    assert "HUDI_SINK__KAFKA__TOPICS" in str(error)


def test_env_null_clears_optional_key(tmp_path: Path) -> None:
    config = config_from_mapping(
        {"table": {"partition_field": "country"}},
        environ={"HUDI_SINK__TABLE__PARTITION_FIELD": "null"},
        base_dir=tmp_path,
    )
    assert config.table.partition_field is None


def test_env_never_reads_process_environment_when_given(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.setenv("HUDI_SINK__NAME", "from-process")
    assert config_from_mapping({}, environ=NO_ENV, base_dir=tmp_path).name == "orders"


def test_env_with_bad_value_names_key(tmp_path: Path) -> None:
    error = _error({}, {"HUDI_SINK__TRANSACTION__INTERVAL_MS": "soon"})
    assert error.key == "transaction.interval_ms"


def test_env_unknown_key_names_key() -> None:
    error = _error({}, {"HUDI_SINK__KAFKA__BOGUS": "1"})
    assert error.key == "kafka.bogus"
    assert "unknown key" in str(error)


# --- precedence -----------------------------------------------------------------------------


def test_precedence_cli_over_env_over_file_over_default(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "name": "file-name",
            "admin": {"port": 1111, "host": "127.0.0.1"},
            "transaction": {"interval_ms": 1000, "flush_records": 7},
        },
    )
    environ = {
        "HUDI_SINK__NAME": "env-name",
        "HUDI_SINK__ADMIN__PORT": "2222",
        "HUDI_SINK__TRANSACTION__INTERVAL_MS": "2000",
    }
    config = load_config(path, environ=environ, overrides={"admin": {"port": 3333}})
    assert config.admin.port == 3333  # CLI > env > file
    assert config.name == "env-name"  # env > file
    assert config.transaction.interval_ms == 2000  # env > file
    assert config.admin.host == "127.0.0.1"  # file; sibling keys survive the deep merge
    assert config.transaction.flush_records == 7  # file > default
    assert config.transaction.write_status_timeout_ms == 300000  # default


def test_env_override_merges_into_file_section(tmp_path: Path) -> None:
    path = _write(tmp_path, {"kafka": {"topics": ["x"], "bootstrap_servers": "file:9092"}})
    config = load_config(path, environ={"HUDI_SINK__KAFKA__TOPICS": '["y", "z"]'})
    assert config.kafka.topics == ["y", "z"]
    assert config.kafka.bootstrap_servers == "file:9092"


# --- base_path ------------------------------------------------------------------------------


def test_relative_base_path_is_relative_to_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf_dir = tmp_path / "conf" / "nested"
    conf_dir.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    path = _write(conf_dir, {"table": {"base_path": "../warehouse/orders"}})
    config = load_config(path, environ=NO_ENV)
    assert config.table.base_path == str((tmp_path / "conf" / "warehouse" / "orders").resolve())


def test_absolute_and_uri_base_paths_are_kept(tmp_path: Path) -> None:
    absolute = config_from_mapping({"table": {"base_path": "/abs/t"}}, environ=NO_ENV, base_dir=tmp_path)
    assert absolute.table.base_path == "/abs/t"
    uri = config_from_mapping(
        {"table": {"base_path": "file:///abs/t"}}, environ=NO_ENV, base_dir=tmp_path
    )
    assert uri.table.base_path == "file:///abs/t"


# --- errors name the key --------------------------------------------------------------------


def test_unknown_key_named() -> None:
    error = _error({"kafka": {"bogus": 1}})
    assert error.key == "kafka.bogus"
    assert "kafka.bogus" in str(error)
    assert "unknown key" in str(error)


def test_unknown_top_level_key_named() -> None:
    error = _error({"kafak": {}})
    assert error.key == "kafak"
    assert "unknown key" in str(error)


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"transaction": {"interval_ms": "soon"}}, "transaction.interval_ms"),
        ({"transaction": {"interval_ms": 5}}, "transaction.interval_ms"),
        ({"admin": {"port": 70000}}, "admin.port"),
        ({"errors": {"tolerance": "ignore"}}, "errors.tolerance"),
        ({"kafka": {"topics": "orders"}}, "kafka.topics"),
        ({"kafka": {"topics": []}}, "kafka.topics"),
        ({"kafka": {"topics": ["a", "a"]}}, "kafka.topics"),
        ({"kafka": {"topics": ["a:b"]}}, "kafka.topics"),
        ({"kafka": {"security_protocol": "TLS"}}, "kafka.security_protocol"),
        ({"spark": {"master": "mesos://x"}}, "spark.master"),
        ({"name": "has space"}, "name"),
        ({"table": 5}, "table"),
    ],
)
def test_wrong_type_or_value_names_key(data: dict[str, Any], key: str) -> None:
    error = _error(data)
    assert error.key == key
    assert str(error).startswith(f"{key}: ")


def test_record_key_field_not_in_schema() -> None:
    error = _error({"table": {"schema": "a STRING, b DOUBLE", "record_key_field": "id"}})
    assert isinstance(error, SchemaError)
    assert error.key == "table.record_key_field"
    assert "'id'" in str(error)


def test_partition_field_not_in_schema() -> None:
    error = _error({"table": {"schema": "id STRING", "partition_field": "country"}})
    assert error.key == "table.partition_field"


@pytest.mark.parametrize(
    "ddl",
    ["id BLOB", "id", "id STRING,", "id STRING, id STRING", "_hoodie_x STRING, id STRING", "id STRING NULLX"],
)
def test_bad_schema_ddl_names_table_schema(ddl: str) -> None:
    error = _error({"table": {"schema": ddl}})
    assert error.key == "table.schema"
    assert str(error).startswith("table.schema: ")


def test_empty_schema_names_table_schema() -> None:
    assert _error({"table": {"schema": ""}}).key == "table.schema"


def test_missing_ssl_file_named(tmp_path: Path) -> None:
    missing = tmp_path / "ca.pem"
    error = _error({"kafka": {"security_protocol": "SSL", "ssl_cafile": str(missing)}})
    assert "ssl_cafile" in str(error)
    assert str(missing) in str(error)
    assert error.key is not None and error.key.startswith("kafka")


def test_existing_ssl_files_accepted(tmp_path: Path) -> None:
    for name in ("ca.pem", "cert.pem", "key.pem"):
        (tmp_path / name).write_text("x", encoding="utf-8")
    config = config_from_mapping(
        {
            "kafka": {
                "security_protocol": "SSL",
                "ssl_cafile": str(tmp_path / "ca.pem"),
                "ssl_certfile": str(tmp_path / "cert.pem"),
                "ssl_keyfile": str(tmp_path / "key.pem"),
            }
        },
        environ=NO_ENV,
        base_dir=tmp_path,
    )
    assert config.kafka.ssl_cafile == str(tmp_path / "ca.pem")


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_sasl_without_mechanism(protocol: str) -> None:
    error = _error({"kafka": {"security_protocol": protocol, "sasl_plain_username": "u"}})
    assert "sasl_mechanism" in str(error)
    assert error.key is not None and error.key.startswith("kafka")


def test_sasl_with_mechanism_accepted(tmp_path: Path) -> None:
    config = config_from_mapping(
        {"kafka": {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
                   "sasl_plain_username": "u", "sasl_plain_password": "pw-xyzzy"}},
        environ=NO_ENV,
        base_dir=tmp_path,
    )
    assert config.kafka.sasl_mechanism == "SCRAM-SHA-512"
    assert config.kafka.sasl_plain_password == "pw-xyzzy"
    assert "pw-xyzzy" not in repr(config)


def test_config_error_does_not_leak_password() -> None:
    # sasl_plain_password is repr=False so it never reaches logs; an error about a sibling
    # key of the kafka section must not print it either (errors go to stderr and logs).
    error = _error(
        {
            "kafka": {
                "security_protocol": "SASL_SSL",
                "sasl_plain_username": "svc",
                "sasl_plain_password": "hunter2-very-secret",
            }
        }
    )
    assert "sasl_mechanism" in str(error)
    assert "hunter2-very-secret" not in str(error)


def test_config_error_does_not_echo_admin_token() -> None:
    error = _error({"admin": {"token": 987654321}})
    assert error.key == "admin.token"
    assert "987654321" not in str(error)


def test_several_problems_are_counted() -> None:
    error = _error({"kafka": {"bogus": 1, "other": 2}})
    assert "1 more problem" in str(error)


def test_config_is_frozen(tmp_path: Path) -> None:
    config = config_from_mapping({}, environ=NO_ENV, base_dir=tmp_path)
    with pytest.raises(ValueError):
        config.name = "x"  # type: ignore[misc]


# --- derived names --------------------------------------------------------------------------

_NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
                 min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(name=_NAMES)
def test_derived_names_follow_the_sink_name(name: str) -> None:
    config = SinkConfig(name=name)
    topics = {
        config.control_topic: "control",
        config.dlq_topic: "dlq",
        config.deletion_topic: "deletion",
        config.deletion_retry_topic: "deletion-retry",
        config.deletion_dlq_topic: "deletion-dlq",
    }
    groups = {
        config.participants_group: "participants",
        config.coordinator_group: "coordinator",
        config.deleter_group: "deleter",
    }
    assert len(topics) == 5  # all distinct
    assert len(groups) == 3
    for full, suffix in {**topics, **groups}.items():
        assert full == f"{name}-{suffix}"


def test_derived_names_for_orders() -> None:
    config = SinkConfig()
    assert config.control_topic == "orders-control"
    assert config.dlq_topic == "orders-dlq"
    assert config.deletion_topic == "orders-deletion"
    assert config.deletion_retry_topic == "orders-deletion-retry"
    assert config.deletion_dlq_topic == "orders-deletion-dlq"
    assert config.participants_group == "orders-participants"
    assert config.coordinator_group == "orders-coordinator"
    assert config.deleter_group == "orders-deleter"


def test_derived_names_track_env_name(tmp_path: Path) -> None:
    config = config_from_mapping({"name": "file"}, environ={f"{ENV_PREFIX}NAME": "env"}, base_dir=tmp_path)
    assert config.control_topic == "env-control"
    assert config.deleter_group == "env-deleter"


def test_column_names_of_the_sinks_own_prefix_are_refused() -> None:
    error = _error({"table": {"schema": "id STRING, __hs_source STRING", "record_key_field": "id"}})
    assert isinstance(error, SchemaError)
    assert error.key == "table.schema"
    assert "'__hs_source'" in str(error) and "'__hs_'" in str(error)
