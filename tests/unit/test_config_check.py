"""``hudi-sink config check``: the services' own loader, exit 2 naming the key, secrets never
printed, each value's source (file, env, default), and output a service accepts again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hudi_sink.cli.config_check import secret_paths
from hudi_sink.cli.main import main
from hudi_sink.shared.config.settings import load_config
from hudi_sink.shared.redaction import REDACTED

SECRETS = {"HUDI_SINK__ADMIN__TOKEN": "tok-123456", "HUDI_SINK__KAFKA__SASL_PLAIN_PASSWORD": "pw-987"}


def _write(tmp_path: Path, data: dict[str, object]) -> Path:
    path = tmp_path / "sink.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _sasl_config(tmp_path: Path) -> Path:
    return _write(tmp_path, {
        "name": "orders",
        "kafka": {"bootstrap_servers": "kafka:9093", "topics": ["orders"],
                  "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                  "sasl_plain_username": "sink"},
        "table": {"base_path": "warehouse/orders"},
        "spark": {"conf": {"spark.driver.memory": "2g", "spark.sql.session.timeZone": "UTC",
                           "spark.hadoop.fs.s3a.secret.key": "s3-secret-value",
                           "spark.hadoop.fs.s3a.session.token": "s3-session-value"}},
    })


def test_secret_fields_are_the_ones_declared_repr_false() -> None:
    assert secret_paths() == {("admin", "token"), ("kafka", "sasl_plain_password"),
                              ("kafka", "control_signing_key"),
                              ("table", "storage_options"), ("avro", "registry_password"),
                              ("spark", "connect_token")}


def test_storage_options_show_their_keys_and_hide_credentials(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A map declared secret is judged key by key: the endpoint shows, the keys do not."""
    path = _write(tmp_path, {"table": {"base_path": "s3://warehouse/orders", "storage_options": {
        "aws_access_key_id": "AKIAEXAMPLEKEYID", "aws_secret_access_key": "very-secret-key",
        "aws_session_token": "session-token-value", "aws_endpoint_url": "http://minio:9000",
        "aws_allow_http": True}}})
    assert main(["config", "check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    for secret in ("AKIAEXAMPLEKEYID", "very-secret-key", "session-token-value"):
        assert secret not in out
    assert 'aws_endpoint_url: "http://minio:9000"  # file' in out
    assert 'aws_allow_http: "true"  # file' in out
    assert f'aws_secret_access_key: "{REDACTED}"' in out


def test_valid_config_prints_resolved_values_sources_and_no_secret(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path = _sasl_config(tmp_path)
    for key, value in SECRETS.items():
        monkeypatch.setenv(key, value)
    assert main(["config", "check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    for secret in (*SECRETS.values(), "s3-secret-value", "s3-session-value"):
        assert secret not in out
    assert f'token: "{REDACTED}"  # env' in out
    assert f'sasl_plain_password: "{REDACTED}"  # env' in out
    assert 'bootstrap_servers: "kafka:9093"  # file' in out
    assert "session_timeout_ms: 10000  # default" in out
    assert "allow_unauthenticated: false  # default" in out
    # The relative base_path is resolved as a service resolves it.
    assert f'base_path: "{tmp_path / "warehouse" / "orders"}"  # file' in out
    # The printed YAML is a config the loader accepts again (same values, secrets aside).
    reread = yaml.safe_load(out)
    reread["admin"]["token"] = None
    reread["kafka"]["sasl_plain_password"] = None
    (tmp_path / "again").mkdir()
    again = _write(tmp_path / "again", reread)
    password = {"HUDI_SINK__KAFKA__SASL_PLAIN_PASSWORD": "pw"}  # SCRAM needs one to be valid
    assert load_config(again, environ=password).kafka == load_config(path, environ=password).kafka


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUDI_SINK__ADMIN__TOKEN", "tok-123456")
    monkeypatch.setenv("HUDI_SINK__TRANSACTION__INTERVAL_MS", "5000")
    monkeypatch.setenv("HUDI_SINK__KAFKA__SASL_PLAIN_PASSWORD", "pw-987")
    assert main(["config", "check", "--config", str(_sasl_config(tmp_path)), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is True
    assert report["config"]["admin"]["token"] == REDACTED
    assert report["config"]["kafka"]["sasl_plain_password"] == REDACTED
    assert report["config"]["avro"]["registry_password"] is None  # unset stays visible as unset
    conf = report["config"]["spark"]["conf"]
    assert conf["spark.hadoop.fs.s3a.secret.key"] == conf["spark.hadoop.fs.s3a.session.token"] == REDACTED
    assert conf["spark.sql.session.timeZone"] == "UTC" and conf["spark.driver.memory"] == "2g"
    assert report["config"]["transaction"]["interval_ms"] == 5000
    assert report["sources"]["transaction.interval_ms"] == "env"
    assert report["sources"]["kafka.topics"] == "file"
    assert report["sources"]["deletion.partitions"] == "default"
    assert "orders-control" in report["topics"] and "orders-participants" in report["groups"]


@pytest.mark.parametrize(("data", "env", "key"), [
    ({"kafka": {"bogus": 1}}, {}, "kafka.bogus"),
    ({"admin": {"port": 70000}}, {}, "admin.port"),
    ({"table": {"schema": "id STRING, amount MONEY"}}, {}, "table.schema"),
    ({}, {"HUDI_SINK__ADMIN__TOKEN": ""}, "admin.token"),
    ({"kafka": {"security_protocol": "SASL_SSL"}}, {}, "kafka"),
])
def test_bad_config_exits_2_naming_the_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        data: dict[str, object], env: dict[str, str], key: str) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["config", "check", "--config", str(_write(tmp_path, data))]) == 2
    captured = capsys.readouterr()
    assert f"configuration error: {key}" in captured.err
    assert captured.out == ""


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", "--config", str(tmp_path / "nope.yaml")]) == 2
    assert "not found" in capsys.readouterr().err
