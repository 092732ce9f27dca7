"""Object-store tables: which FileSystem a base path gets, storage options, the start-up probe
that refuses a store without conditional writes (services exit 2), secrets kept out of the
config check's output."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from s3_server import IgnoringIfNoneMatch, MotoS3

from hudi_sink.cli.main import main
from hudi_sink.shared.deletion.intent import DeletionReason, PendingDelete, intent_for_staged_file
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.runtime import runner
from hudi_sink.shared.runtime.exit_watchdog import ExitWatchdog
from hudi_sink.shared.storage.backend import check_exclusive_create, filesystem_for
from hudi_sink.shared.storage.fs import LocalFileSystem
from hudi_sink.shared.storage.object_store import ObjectStoreFileSystem
from hudi_sink.shared.storage.store_uri import parse_store_uri, reader_storage_options, split_storage_options


@pytest.fixture
def careless_store(moto_s3: MotoS3) -> Iterator[IgnoringIfNoneMatch]:
    """moto behind a proxy that drops If-None-Match: a store without conditional writes."""
    proxy = IgnoringIfNoneMatch(moto_s3.endpoint).start()
    try:
        yield proxy
    finally:
        proxy.stop()


def test_filesystem_for_picks_by_scheme(moto_s3: MotoS3) -> None:
    assert isinstance(filesystem_for("/tmp/table"), LocalFileSystem)
    assert isinstance(filesystem_for("file:///tmp/table"), LocalFileSystem)
    fs = filesystem_for("s3://warehouse/orders", moto_s3.storage_options())
    assert isinstance(fs, ObjectStoreFileSystem)
    assert "secret" not in repr(fs).lower() and moto_s3.storage_options()["aws_secret_access_key"] \
        not in repr(fs)
    for bad in ("hdfs://nn/table", "s3://", "s3://bucket/../x"):
        with pytest.raises(ConfigError, match="table.base_path"):
            filesystem_for(bad)
    with pytest.raises(ConfigError, match="table.storage_options"):
        filesystem_for("/tmp/table", {"aws_region": "us-east-1"})
    with pytest.raises(ConfigError, match="table.storage_options"):
        filesystem_for("s3://warehouse/orders", {"aws_no_such_option": "x"})


def test_uri_parsing_and_option_split() -> None:
    location = parse_store_uri("s3://warehouse//orders/")
    assert (location.scheme, location.bucket, location.prefix) == ("s3", "warehouse", "orders")
    config, client = split_storage_options("s3", {"AWS_REGION": "eu-west-1", "aws_allow_http": "true",
                                                  "timeout": "30s", "aws_endpoint_url": "http://h"})
    assert config == {"aws_region": "eu-west-1", "aws_endpoint_url": "http://h"}
    assert client == {"allow_http": "true", "timeout": "30s"}
    merged = reader_storage_options("s3", {"aws_region": "eu-west-1"},
                                    {"AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": "http://e",
                                     "HOME": "/root"})
    assert merged == {"aws_region": "eu-west-1", "aws_endpoint_url": "http://e"}


def test_environment_variables_are_honoured(moto_s3: MotoS3, s3_bucket: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in moto_s3.environment().items():
        monkeypatch.setenv(key, value)
    fs = filesystem_for(f"s3://{s3_bucket}/t")
    fs.write_atomic(f"s3://{s3_bucket}/t/x", b"1")
    assert moto_s3.keys(s3_bucket) == ["t/x"]
    with pytest.raises(ConfigError, match="cannot write"):  # options override the environment
        check_exclusive_create(filesystem_for(f"s3://{s3_bucket}/t", {"aws_endpoint_url":
                                              "http://127.0.0.1:9"}), f"s3://{s3_bucket}/t")


def test_probe_passes_on_a_store_with_conditional_writes(moto_s3: MotoS3, s3_bucket: str) -> None:
    base = f"s3://{s3_bucket}/warehouse/orders"
    check_exclusive_create(ObjectStoreFileSystem(base, moto_s3.storage_options()), base)
    assert moto_s3.keys(s3_bucket) == []  # the probe key is gone


def test_probe_refuses_a_store_that_ignores_if_none_match(
        moto_s3: MotoS3, s3_bucket: str, careless_store: IgnoringIfNoneMatch) -> None:
    base = f"s3://{s3_bucket}/warehouse/orders"
    fs = ObjectStoreFileSystem(base, moto_s3.storage_options(careless_store.endpoint))
    with pytest.raises(ConfigError, match="If-None-Match") as caught:
        check_exclusive_create(fs, base)
    assert caught.value.key == "table.base_path"
    assert moto_s3.keys(s3_bucket, f"warehouse/orders/{layout.SINK_PROBE_DIR}") == []


@pytest.mark.parametrize("service", ["coordinator", "deleter", "participant"])
def test_services_exit_2_on_a_store_without_conditional_writes(
        service: str, tmp_path: Path, moto_s3: MotoS3, s3_bucket: str,
        careless_store: IgnoringIfNoneMatch, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before Kafka is even tried (nothing listens on the bootstrap address). The service's
    exit watchdog, armed when it returns, would ``os._exit`` the whole test session
    ``shutdown_timeout_ms`` + 10 s later: here it only records."""
    fired: list[int] = []
    monkeypatch.setattr(runner, "ExitWatchdog",
                        lambda name, deadline_s: ExitWatchdog(name, deadline_s, force_exit=fired.append))
    config = tmp_path / "sink.yaml"
    config.write_text(yaml.safe_dump({
        "name": "probe",
        "kafka": {"bootstrap_servers": "127.0.0.1:9", "topics": ["orders"]},
        "table": {"base_path": f"s3://{s3_bucket}/warehouse/orders",
                  "storage_options": moto_s3.storage_options(careless_store.endpoint)},
        "admin": {"host": "127.0.0.1", "port": 0, "allow_unauthenticated": True},
    }))
    assert main([service, "--config", str(config), "--admin-port", "0"]) == 2
    assert "If-None-Match" in caplog.text and "table.base_path" in caplog.text
    assert moto_s3.storage_options()["aws_secret_access_key"] not in caplog.text


def test_deletion_intents_name_object_store_paths() -> None:
    base = "s3://warehouse/orders"
    staged = f"{base}/.hoodie/.temp/20250101000000001/NL/f-0_0-0-1_20250101000000001.parquet"
    intent = intent_for_staged_file(base, staged, "20250101000000001",
                                    DeletionReason.ABORTED_INSTANT, not_before=0.0)
    assert PendingDelete.decode(intent.encode()).file_path == staged
    with pytest.raises(ValueError, match="absolute"):
        intent_for_staged_file("warehouse", "warehouse/x.parquet", "20250101000000001",
                               DeletionReason.ABORTED_INSTANT, not_before=0.0)
