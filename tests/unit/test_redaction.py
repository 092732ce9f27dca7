"""``shared.redaction``: every secret kind the security review listed is hidden — by key
(Azure account/master keys, SSE-C keys, SAS tokens, session tokens, passwords, secrets,
tokens, private keys), inside URLs (``user:pass@``, ``;token=``, ``sig=``) and in free text —
in ``config check`` (YAML and JSON), in both log formats and in the CLI's error line; while
what only says *where* (endpoints, key providers, file paths, algorithms) stays readable."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from hudi_sink.cli.main import main
from hudi_sink.shared.redaction import MASK, REDACTED, is_secret_key, redact_text, redact_url, redact_value
from hudi_sink.shared.runtime.logs import JsonFormatter, TextFormatter

SECRET_KEYS = [
    "azure_storage_master_key", "azure_storage_account_key", "account_key",
    "fs.s3a.encryption.key", "fs.s3a.server-side-encryption.key",
    "spark.hadoop.fs.s3a.server-side-encryption.key", "spark.hadoop.fs.s3a.encryption.key",
    "fs.azure.account.key.acct.dfs.core.windows.net", "sas_token", "azure_storage_sas_key",
    "aws_session_token", "spark.hadoop.fs.s3a.session.token", "password", "registry_password",
    "spark.ssl.keyStorePassword", "aws_secret_access_key", "azure_client_secret",
    "spark.authenticate.secret", "token", "spark.connect.authenticate.token", "private_key",
    "google_service_account_key", "aws_access_key_id", "sasl.jaas.config",
    "value.converter.basic.auth.user.info", "control_signing_key", "api_key", "sig",
]
PLAIN_KEYS = [
    "aws_endpoint_url", "aws_region", "aws_allow_http", "spark.driver.memory",
    "fs.s3a.server-side-encryption-algorithm", "spark.hadoop.fs.s3a.aws.credentials.provider",
    "ssl_keyfile", "ssl_cafile", "record_key_field", "kafka_key_format", "key_partitioner",
    "sasl_mechanism", "sasl_plain_username", "registry_username", "aws_skip_signature",
    "value.converter.basic.auth.credentials.source",
    "bypass_merge", "spark.sql.session.timeZone", "master", "bootstrap_servers",
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_credential_keys_are_secret(key: str) -> None:
    assert is_secret_key(key)
    assert redact_value(key, "value-1") == REDACTED
    assert redact_value(key, None) is None  # unset stays visible as unset


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_keys_that_say_where_are_not(key: str) -> None:
    assert not is_secret_key(key)
    assert redact_value(key, "value-1") == "value-1"


@pytest.mark.parametrize(("url", "shown"), [
    ("https://user:pass@registry", f"https://user:{MASK}@registry"),
    ("https://user:p%40ss@registry:8081/subjects?x=1", f"https://user:{MASK}@registry:8081/subjects?x=1"),
    ("sc://host:15002/;token=abc", f"sc://host:15002/;token={MASK}"),
    ("sc://host:15002/;user_id=me;token=abc;use_ssl=true",
     f"sc://host:15002/;user_id=me;token={MASK};use_ssl=true"),
    ("https://acct.blob.core.windows.net/c/f?sv=2022-11-02&ss=b&sig=Ab%2Fc%3D&se=2030-01-01",
     f"https://acct.blob.core.windows.net/c/f?sv=2022-11-02&ss=b&sig={MASK}&se=2030-01-01"),
    ("https://s3.example/b/k?X-Amz-Credential=AKIA&X-Amz-Security-Token=tok&X-Amz-Signature=f00",
     f"https://s3.example/b/k?X-Amz-Credential={MASK}&X-Amz-Security-Token={MASK}"
     f"&X-Amz-Signature={MASK}"),
    ("http://proxy.local:3128", "http://proxy.local:3128"),
    ("http://user@host:8080/x", "http://user@host:8080/x"),  # a user alone is no secret
    ("local[2]", "local[2]"),
])
def test_urls_keep_where_and_lose_credentials(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_text(f"at {url} now") == f"at {shown} now"


@pytest.mark.parametrize(("text", "secret"), [
    ("starting SparkSession (master=sc://spark:15002/;token=tok-12345)", "tok-12345"),
    ("registry unreachable at https://sink:hunter2@registry:8081/schemas/ids/7: URLError", "hunter2"),
    ('PlainLoginModule required username="sink" password="pw-9876";', "pw-9876"),
    ("sas_token=sv=2022&sig=sigvalue42 rejected", "sigvalue42"),
    ("headers {'Authorization': 'Bearer bearer-value-1'}", "bearer-value-1"),
    ("fs.s3a.encryption.key=c3NlLWMta2V5LXZhbHVl", "c3NlLWMta2V5LXZhbHVl"),
])
def test_free_text_loses_credentials(text: str, secret: str) -> None:
    shown = redact_text(text)
    assert secret not in shown and MASK in shown


def test_ordinary_lines_are_untouched() -> None:
    for line in ("missing bearer token", "committed 20260101 (4 files, 100 rows)",
                 "participant p-1 started (topics ['orders'])", "offsets orders:0=17,orders:1=4",
                 "kafka at 127.0.0.1:9092 unreachable"):
        assert redact_text(line) == line


def test_long_lines_stay_linear() -> None:
    """A huge word (base64 in a message) is not scanned once per start position."""
    assert redact_text("x" * 200_000 + " a=b") == "x" * 200_000 + " a=b"
    assert redact_text("a" * 200_000 + "://") == "a" * 200_000 + "://"


@pytest.fixture
def logger() -> Iterator[tuple[logging.Logger, io.StringIO, logging.StreamHandler[io.StringIO]]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    log = logging.getLogger("hudi_sink.test_redaction")
    log.addHandler(handler)
    log.propagate = False
    log.setLevel(logging.INFO)
    try:
        yield log, stream, handler
    finally:
        log.removeHandler(handler)
        log.propagate = True
        log.setLevel(logging.NOTSET)


@pytest.mark.parametrize("formatter", [TextFormatter(), JsonFormatter()], ids=["text", "json"])
def test_log_lines_in_both_formats_are_redacted(
        logger: tuple[logging.Logger, io.StringIO, logging.StreamHandler[io.StringIO]],
        formatter: logging.Formatter) -> None:
    log, stream, handler = logger
    handler.setFormatter(formatter)
    log.info("starting SparkSession (master=%s)", "sc://spark:15002/;token=tok-in-master")
    try:
        raise RuntimeError("GET https://u:pw-in-trace@registry/x failed")
    except RuntimeError:
        log.exception("registry call failed")
    out = stream.getvalue()
    assert "tok-in-master" not in out and "pw-in-trace" not in out
    assert "sc://spark:15002/;token=***" in out and "https://u:***@registry/x" in out
    if isinstance(formatter, JsonFormatter):
        assert all(json.loads(line) for line in out.splitlines() if line.startswith("{"))


ALL_KINDS = {
    "azure_storage_master_key": "azure-master-secret",
    "azure_storage_account_key": "azure-account-secret",
    "account_key": "plain-account-secret",
    "azure_storage_sas_key": "sas-key-secret",
    "sas_token": "sv=2022&sig=sas-token-secret",
    "aws_session_token": "session-token-secret",
    "aws_secret_access_key": "aws-secret-secret",
    "azure_storage_client_secret": "client-secret-secret",
    "google_service_account_key": "gcp-key-secret",
    "aws_endpoint_url": "https://minio-user:minio-pass-secret@minio:9000",
}
SPARK_KINDS = {
    "spark.hadoop.fs.s3a.encryption.key": "sse-c-key-secret",
    "spark.hadoop.fs.s3a.server-side-encryption.key": "sse-c-old-key-secret",
    "spark.hadoop.fs.s3a.encryption.algorithm": "SSE-C",
    "spark.ssl.keyPassword": "ssl-password-secret",
    "spark.authenticate.secret": "auth-secret-secret",
    "spark.hadoop.fs.gs.auth.service.account.private.key": "private-key-secret",
    "spark.driver.extraJavaOptions": "-Djavax.net.ssl.trustStorePassword=jvm-pass-secret -Xss4m",
}


@pytest.mark.parametrize("as_json", [False, True], ids=["yaml", "json"])
def test_config_check_redacts_every_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch, as_json: bool) -> None:
    config = tmp_path / "sink.yaml"
    config.write_text(yaml.safe_dump({
        "name": "orders",
        "table": {"base_path": "s3://bucket/orders", "storage_options": ALL_KINDS},
        "avro": {"registry_url": "https://reg-user:registry-url-secret@registry:8081",
                 "registry_username": "reg-user", "registry_password": "registry-pw-secret"},
        "spark": {"master": "sc://spark-connect:15002/;token=connect-token-secret",
                  "conf": SPARK_KINDS},
        "kafka": {"bootstrap_servers": "kafka:9093", "sasl_plain_password": "sasl-pw-secret"},
    }))
    monkeypatch.setenv("HUDI_SINK__ADMIN__TOKEN", "admin-token-secret")
    assert main(["config", "check", "--config", str(config), *(["--json"] if as_json else [])]) == 0
    out = capsys.readouterr().out
    assert "secret" not in out.replace("client_secret", "").replace("authenticate.secret", "") \
        .replace("aws_secret_access_key", ""), out
    data = json.loads(out)["config"] if as_json else yaml.safe_load(out)
    assert data["spark"]["master"] == "sc://spark-connect:15002/;token=***"
    assert data["avro"]["registry_url"] == "https://reg-user:***@registry:8081"
    assert data["avro"]["registry_username"] == "reg-user"
    assert data["table"]["storage_options"]["aws_endpoint_url"] == "https://minio-user:***@minio:9000"
    assert data["table"]["storage_options"]["azure_storage_master_key"] == REDACTED
    assert data["spark"]["conf"]["spark.hadoop.fs.s3a.encryption.key"] == REDACTED
    assert data["spark"]["conf"]["spark.hadoop.fs.s3a.encryption.algorithm"] == "SSE-C"
    assert data["spark"]["conf"]["spark.driver.extraJavaOptions"] == \
        "-Djavax.net.ssl.trustStorePassword=*** -Xss4m"
    assert data["admin"]["token"] == REDACTED and data["kafka"]["sasl_plain_password"] == REDACTED


def test_a_configuration_error_does_not_print_the_value_it_names(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "sink.yaml"
    config.write_text(yaml.safe_dump({"spark": {"master": "mesos://m:5050/;token=err-token-secret"}}))
    assert main(["config", "check", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "spark.master" in err and "err-token-secret" not in err and "token=***" in err
