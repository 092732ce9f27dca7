"""Where ``s3://`` credentials come from (``shared.storage.credentials``): options, then the
environment, then an AWS profile in ``~/.aws`` — and the one line that names what is missing."""

from __future__ import annotations

from pathlib import Path

import pytest
from obstore.exceptions import GenericError

from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.storage.credentials import (
    credential_source,
    half_pair,
    is_credentials_lookup_failure,
    needs_metadata_service,
    no_credentials,
    probe_metadata_service,
    resolve_options,
)
from hudi_sink.shared.storage.object_store import MissingCredentialsError, StorageError, storage_error
from hudi_sink.shared.storage.store_uri import reader_storage_options

CREDENTIALS = """\
[default]
aws_access_key_id = default-id
aws_secret_access_key = default-secret

[prod]
aws_access_key_id = prod-id
aws_secret_access_key = prod-secret
aws_session_token = prod-token

[sso]
sso_session = corp
"""

CONFIG = """\
[default]
region = eu-west-1

[profile prod]
region = us-west-2
endpoint_url = http://minio:9000

[profile assumed]
role_arn = arn:aws:iam::123456789012:role/x
source_profile = default
"""

METADATA_FAILURE = (
    "Generic S3 error: Error performing PUT http://169.254.169.254/latest/api/token in 3ms - "
    "Server returned non-2xx status code: 403 Forbidden\n\nDebug source:\nGeneric {\n"
    '    store: "S3",\n    source: RetryError(\n    ),\n}')


@pytest.fixture
def aws_home(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "credentials").write_text(CREDENTIALS, encoding="utf-8")
    (tmp_path / "config").write_text(CONFIG, encoding="utf-8")
    return {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
            "AWS_CONFIG_FILE": str(tmp_path / "config")}


def test_the_default_profile_fills_in_keys_and_region(aws_home: dict[str, str]) -> None:
    assert resolve_options("s3", {"aws_allow_http": "true"}, aws_home) == {
        "aws_allow_http": "true", "aws_access_key_id": "default-id",
        "aws_secret_access_key": "default-secret", "aws_region": "eu-west-1"}


def test_aws_profile_picks_a_profile_from_both_files(aws_home: dict[str, str]) -> None:
    resolved = resolve_options("s3", {}, {**aws_home, "AWS_PROFILE": "prod"})
    assert resolved == {"aws_access_key_id": "prod-id", "aws_secret_access_key": "prod-secret",
                        "aws_session_token": "prod-token", "aws_region": "us-west-2",
                        "aws_endpoint_url": "http://minio:9000"}
    # The option names a profile too, and is consumed (object_store does not know the key).
    assert resolve_options("s3", {"AWS_PROFILE": "prod"}, aws_home)["aws_access_key_id"] == "prod-id"
    assert "aws_profile" not in resolve_options("s3", {"aws_profile": "prod"}, aws_home)


def test_given_keys_win_and_settings_from_the_environment_stay(aws_home: dict[str, str]) -> None:
    explicit = {"aws_access_key_id": "mine", "aws_secret_access_key": "mine-too"}
    assert resolve_options("s3", explicit, aws_home) == explicit
    env = {**aws_home, "AWS_ACCESS_KEY_ID": "env-id", "AWS_SECRET_ACCESS_KEY": "env-secret"}
    assert resolve_options("s3", {}, env) == {}  # object_store reads the environment itself
    # Keys from the profile, but the region the environment names is not overridden.
    assert "aws_region" not in resolve_options("s3", {}, {**aws_home, "AWS_REGION": "ap-south-1"})


def test_web_identity_comes_before_the_implicit_default_profile(aws_home: dict[str, str]) -> None:
    irsa = {**aws_home, "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token", "AWS_ROLE_ARN": "arn:x"}
    assert resolve_options("s3", {}, irsa) == {}
    assert resolve_options("s3", {}, {**irsa, "AWS_PROFILE": "prod"})["aws_access_key_id"] == "prod-id"


def test_a_named_profile_that_cannot_be_used_is_a_config_error(aws_home: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as missing:
        resolve_options("s3", {}, {**aws_home, "AWS_PROFILE": "nope"})
    assert missing.value.key == "AWS_PROFILE" and "'nope' is in neither" in str(missing.value)
    for profile in ("assumed", "sso"):
        with pytest.raises(ConfigError) as keyless:
            resolve_options("s3", {"aws_profile": profile}, aws_home)
        assert "export-credentials" in str(keyless.value), keyless.value
    # No profile named and no default one: left to object_store (web identity, metadata).
    empty = {"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/c", "AWS_CONFIG_FILE": "/nonexistent/f"}
    assert resolve_options("s3", {"aws_region": "x"}, empty) == {"aws_region": "x"}


def test_other_schemes_are_left_alone(aws_home: dict[str, str]) -> None:
    assert resolve_options("gs", {"google_bucket": "b"}, aws_home) == {"google_bucket": "b"}


def test_hudi_rs_gets_the_same_credentials(aws_home: dict[str, str]) -> None:
    options = reader_storage_options("s3", {"aws_allow_http": "true"},
                                     {**aws_home, "AWS_ENDPOINT_URL": "http://s3:9000"})
    assert options["aws_access_key_id"] == "default-id"
    assert options["aws_endpoint_url"] == "http://s3:9000"  # the environment's, not overridden


def test_half_a_key_pair_is_named() -> None:
    assert half_pair({"aws_access_key_id": "a"}, {}) == (
        "aws_secret_access_key (or AWS_SECRET_ACCESS_KEY) is missing while aws_access_key_id "
        "(or AWS_ACCESS_KEY_ID) is set")
    assert half_pair({}, {"AWS_SECRET_ACCESS_KEY": "s"}) is not None
    assert half_pair({}, {}) is None
    assert half_pair({"aws_access_key_id": "a"}, {"AWS_SECRET_ACCESS_KEY": "s"}) is None


def test_a_failed_metadata_lookup_becomes_one_line_naming_what_is_missing(tmp_path: Path) -> None:
    assert is_credentials_lookup_failure(METADATA_FAILURE)
    assert not is_credentials_lookup_failure("Generic S3 error: 403 Forbidden: AccessDenied")
    line = no_credentials("s3://bucket", {}, {"HOME": str(tmp_path)}, METADATA_FAILURE)
    assert "\n" not in line and "Debug source" not in line
    for named in ("aws_access_key_id", "AWS_ACCESS_KEY_ID", "AWS_PROFILE", "'default'",
                  "metadata service", "403 Forbidden"):
        assert named in line, (named, line)
    error = storage_error(GenericError(METADATA_FAILURE), "s3://bucket", {})
    assert isinstance(error, MissingCredentialsError) and isinstance(error, OSError)


def test_other_store_errors_keep_their_summary_without_the_debug_dump() -> None:
    text = 'Generic S3 error: 500 Internal Server Error\n\nDebug source:\nGeneric {\n}'
    error = storage_error(GenericError(text), "s3://bucket", {})
    assert type(error) is StorageError
    assert str(error) == "GenericError: Generic S3 error: 500 Internal Server Error"


def test_only_a_store_with_no_other_source_needs_the_metadata_service(
        aws_home: dict[str, str]) -> None:
    nothing = {"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/c", "AWS_CONFIG_FILE": "/nonexistent/f"}
    assert needs_metadata_service("s3", {}, nothing)
    assert not needs_metadata_service("s3", {}, aws_home)  # the default profile has keys
    assert not needs_metadata_service("s3", {}, {**nothing, "AWS_ACCESS_KEY_ID": "a"})
    assert not needs_metadata_service("s3", {}, {**nothing, "AWS_WEB_IDENTITY_TOKEN_FILE": "/t"})
    assert not needs_metadata_service("gs", {}, nothing)


def test_the_probe_says_why_the_metadata_service_gave_nothing() -> None:
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, not listening: refused
        why = probe_metadata_service({"AWS_METADATA_ENDPOINT": f"http://127.0.0.1:{port}"})
    assert why is not None and "did not answer within 1 s" in why


@pytest.mark.parametrize(("given", "kept"), [
    ({"access_key_id": "mine", "secret_access_key": "mine-too"}, None),  # no profile keys at all
    ({"endpoint": "http://local:9000"}, "aws_endpoint_url"),
    ({"aws_endpoint": "http://local:9000"}, "aws_endpoint_url"),
    ({"region": "ap-south-1"}, "aws_region"),
    ({"default_region": "ap-south-1"}, "aws_region"),
    ({"token": "t"}, "aws_session_token"),
])
def test_object_store_aliases_count_as_set_so_a_profile_adds_no_duplicate(
        aws_home: dict[str, str], given: dict[str, str], kept: str | None) -> None:
    resolved = resolve_options("s3", given, {**aws_home, "AWS_PROFILE": "prod"})
    if kept is None:
        assert resolved == given  # the pair given under object_store's other names
    else:
        assert kept not in resolved and resolved["aws_access_key_id"] == "prod-id"
        assert {k: resolved[k] for k in given} == given
    assert half_pair({"access_key_id": "a", "secret_access_key": "b"}, {}) is None


def test_the_credential_source_and_endpoint_are_named_never_the_secret(
        aws_home: dict[str, str]) -> None:
    prod = {**aws_home, "AWS_PROFILE": "prod"}
    assert credential_source("s3", {}, prod) == (
        "credentials from AWS profile 'prod'; endpoint http://minio:9000")
    line = credential_source("s3", {"secret_access_key": "s3cret", "access_key_id": "id",
                                    "endpoint": "http://local:9000"}, prod)
    assert line == "credentials from the storage options (aws_access_key_id); endpoint http://local:9000"
    env = {"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "s3cret"}
    assert "s3cret" not in credential_source("s3", {}, env)
    assert credential_source("s3", {}, env).startswith("credentials from the environment")
    irsa = {"AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token"}
    assert "web identity" in credential_source("s3", {}, irsa)
    assert credential_source("s3", {}, {"AWS_CONFIG_FILE": "/nonexistent",
                                        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}) == (
        "credentials from the instance metadata service (nothing else gave any); "
        "endpoint AWS's endpoint of the region")
