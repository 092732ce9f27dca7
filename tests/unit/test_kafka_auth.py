"""Kafka authentication in the config and the clients: PLAIN/SCRAM need a username and a
password (named when missing), OAUTHBEARER a token source (a file re-read at every login, or
the Amazon MSK IAM signer), GSSAPI its package; ``config check --offline`` skips the files
only the sink's machine has, and says so."""

from __future__ import annotations

import base64
import importlib.util
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from hudi_sink.cli.main import main
from hudi_sink.shared.config.settings import KafkaConfig, config_from_mapping, load_config
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.kafka.connection import client_options
from hudi_sink.shared.kafka.sasl import (
    FileTokenProvider,
    MskIamTokenProvider,
    OAuthTokenUnavailable,
)


def _problems(kafka: dict[str, Any], offline: bool = False) -> list[tuple[str | None, str]]:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"kafka": kafka}, environ={}, offline=offline)
    return caught.value.problems


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_user_mechanisms_need_username_and_password(protocol: str, mechanism: str) -> None:
    problems = _problems({"security_protocol": protocol, "sasl_mechanism": mechanism})
    assert [key for key, _ in problems] == ["kafka.sasl_plain_username", "kafka.sasl_plain_password"]
    only_user = _problems({"security_protocol": protocol, "sasl_mechanism": mechanism,
                           "sasl_plain_username": "sink"})
    assert [key for key, _ in only_user] == ["kafka.sasl_plain_password"]
    config = config_from_mapping({"kafka": {"security_protocol": protocol, "sasl_mechanism": mechanism,
                                            "sasl_plain_username": "u"}},
                                 environ={"HUDI_SINK__KAFKA__SASL_PLAIN_PASSWORD": "p"})
    options = client_options(config.kafka)
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("u", "p")


def test_sasl_without_mechanism_is_named() -> None:
    assert [k for k, _ in _problems({"security_protocol": "SASL_SSL"})] == ["kafka.sasl_mechanism"]


def test_config_check_lists_the_missing_sasl_keys(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sink.yaml"
    path.write_text(yaml.safe_dump({"kafka": {"security_protocol": "SASL_SSL",
                                              "sasl_mechanism": "SCRAM-SHA-512"}}))
    assert main(["config", "check", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "kafka.sasl_plain_username" in err and "kafka.sasl_plain_password" in err


def test_oauthbearer_needs_exactly_one_token_source(tmp_path: Path) -> None:
    base = {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"}
    assert [k for k, _ in _problems(base)] == ["kafka.sasl_oauth_token_file"]
    token = tmp_path / "token"
    token.write_text("t")
    both = {**base, "sasl_oauth_token_file": str(token), "sasl_oauth_msk_region": "eu-west-1"}
    [(key, message)] = _problems(both)
    assert key == "kafka.sasl_oauth_token_file" and "both" in message
    unused = _problems({"sasl_oauth_token_file": str(token)})
    assert [k for k, _ in unused] == ["kafka.sasl_oauth_token_file"]
    missing = _problems({**base, "sasl_oauth_token_file": str(tmp_path / "absent")})
    assert missing == [("kafka.sasl_oauth_token_file", f"file not found: {tmp_path / 'absent'}")]


async def test_the_token_file_is_read_again_at_every_login(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first-token\n")
    config = config_from_mapping({"kafka": {"security_protocol": "SASL_SSL",
                                            "sasl_mechanism": "OAUTHBEARER",
                                            "sasl_oauth_token_file": str(token)}}, environ={})
    provider = client_options(config.kafka)["sasl_oauth_token_provider"]
    assert isinstance(provider, FileTokenProvider)
    assert await provider.token() == "first-token"
    token.write_text("rotated-token")  # a sidecar or the Strimzi operator rotates it
    assert await provider.token() == "rotated-token"
    token.write_text("  \n")
    with pytest.raises(OAuthTokenUnavailable, match="sasl_oauth_token_file: .* is empty"):
        await provider.token()  # a KafkaError: aiokafka retries the connection, not crashes
    token.unlink()
    with pytest.raises(OAuthTokenUnavailable, match="cannot read"):
        await provider.token()


@pytest.mark.skipif(importlib.util.find_spec("aws_msk_iam_sasl_signer") is None,
                    reason="aws-msk-iam-sasl-signer-python not installed (extra hudi-sink[msk])")
async def test_msk_iam_tokens_are_signed_for_the_region_and_reused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Signing is local (SigV4 presigning of the kafka-cluster:Connect action): no network."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-example")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    config = config_from_mapping({"kafka": {"security_protocol": "SASL_SSL",
                                            "sasl_mechanism": "OAUTHBEARER",
                                            "sasl_oauth_msk_region": "eu-west-1"}}, environ={})
    provider = client_options(config.kafka)["sasl_oauth_token_provider"]
    assert isinstance(provider, MskIamTokenProvider)
    token = await provider.token()
    url = urlparse(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode())
    assert url.netloc == "kafka.eu-west-1.amazonaws.com"
    query = parse_qs(url.query)
    assert query["Action"] == ["kafka-cluster:Connect"]
    assert query["X-Amz-Credential"][0].startswith("AKIDEXAMPLE/")
    assert await provider.token() == token  # reused until a minute before it expires


def test_gssapi_passes_kerberos_names_or_names_the_missing_package() -> None:
    kafka = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI",
             "sasl_kerberos_service_name": "kafka-prod"}
    if importlib.util.find_spec("gssapi") is None:
        [(key, message)] = _problems(kafka)
        assert key == "kafka.sasl_mechanism" and "gssapi" in message
        kafka_config = config_from_mapping({"kafka": kafka}, environ={}, offline=True).kafka
    else:
        kafka_config = config_from_mapping({"kafka": kafka}, environ={}).kafka
    options = client_options(kafka_config)
    assert (options["sasl_mechanism"], options["sasl_kerberos_service_name"]) == (
        "GSSAPI", "kafka-prod")
    assert "sasl_plain_username" not in options


def test_plaintext_sends_no_sasl_options() -> None:
    options = client_options(KafkaConfig())
    assert not [key for key in options if key.startswith("sasl")]


def test_config_check_offline_skips_mounted_files_with_a_note(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sink.yaml"
    path.write_text(yaml.safe_dump({"kafka": {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_file": "/var/run/secrets/kafka/token",
        "ssl_cafile": "/etc/hudi-sink/kafka-ca/ca.crt",
        "ssl_certfile": "/etc/hudi-sink/kafka-user/user.crt",
        "ssl_keyfile": "/etc/hudi-sink/kafka-user/user.key"}}))
    assert main(["config", "check", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "sasl_oauth_token_file"):
        assert f"kafka.{key}: file not found" in err
    assert main(["config", "check", "--config", str(path), "--offline"]) == 0
    out = capsys.readouterr().out
    for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "sasl_oauth_token_file"):
        assert f"# offline: kafka.{key}: " in out
    # --offline skips files, not rules: the token source is still required.
    path.write_text(yaml.safe_dump({"kafka": {"security_protocol": "SASL_SSL",
                                              "sasl_mechanism": "OAUTHBEARER",
                                              "ssl_cafile": "/absent/ca.crt"}}))
    assert main(["config", "check", "--config", str(path), "--offline"]) == 2
    assert "kafka.sasl_oauth_token_file" in capsys.readouterr().err


def test_services_still_check_the_files(tmp_path: Path) -> None:
    path = tmp_path / "sink.yaml"
    path.write_text(yaml.safe_dump({"kafka": {"security_protocol": "SSL",
                                              "ssl_cafile": str(tmp_path / "ca.pem")}}))
    with pytest.raises(ConfigError, match="kafka.ssl_cafile: file not found"):
        load_config(path, environ={})


def test_offline_skips_the_registry_ca_file_too(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sink.yaml"
    path.write_text(yaml.safe_dump({"avro": {"registry_url": "https://registry:8081",
                                             "registry_ca_file": "/etc/hudi-sink/registry/ca.crt"}}))
    assert main(["config", "check", "--config", str(path)]) == 2
    assert "registry_ca_file" in capsys.readouterr().err
    assert main(["config", "check", "--config", str(path), "--offline", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["offline"] == ["avro.registry_ca_file: /etc/hudi-sink/registry/ca.crt not checked "
                                 "(--offline: the file is read where the sink runs)"]
