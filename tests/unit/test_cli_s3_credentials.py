"""``hudi-sink table show|read`` on ``s3://`` through the contract (the command in a
subprocess, moto's S3 server): with no credentials anywhere it exits 2 with one line naming
what is missing (it printed a 24-line Rust debug dump and exited 1); with keys only in
``~/.aws/credentials`` it reads the table (it went to the instance metadata service)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from s3_server import ACCESS_KEY, REGION, SECRET_KEY, MotoS3

from hudi_sink.cli import table_cmd
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.storage.object_store import MissingCredentialsError, ObjectStoreFileSystem

ROOT = Path(__file__).resolve().parents[2]
HUDI_SINK = str(Path(sys.executable).with_name("hudi-sink"))


class _Forbidden(BaseHTTPRequestHandler):
    """An instance metadata service that refuses everyone (as off EC2 behind a firewall):
    object_store's lookup fails at once, wherever the test runs."""

    def _deny(self) -> None:
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_PUT = _deny

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
        return


@pytest.fixture(scope="module")
def metadata_endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Forbidden)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A metadata address that takes connections and never answers (as 169.254.169.254 off
    EC2 often behaves): object_store would wait and retry for minutes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.fixture
def s3_table(moto_s3: MotoS3, s3_bucket: str) -> str:
    base = f"s3://{s3_bucket}/warehouse/orders"
    config = TableConfig(base_path=base, name="orders", schema="id STRING, amount DOUBLE")
    HudiTable(ObjectStoreFileSystem(base, moto_s3.storage_options()), base).initialize(
        config, config.table_schema())
    return base


def _hudi_sink(home: Path, moto: MotoS3, metadata: str, *args: str,
               **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HUDI_SINK__"))}
    env.update(PYTHONPATH=str(ROOT), HOME=str(home), AWS_ENDPOINT_URL=moto.endpoint,
               AWS_ALLOW_HTTP="true", AWS_METADATA_ENDPOINT=metadata, **extra)
    return subprocess.run([HUDI_SINK, *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("action", ["show", "read"])
def test_no_credentials_is_one_line_and_exit_2(
        tmp_path: Path, moto_s3: MotoS3, s3_table: str, metadata_endpoint: str,
        action: str) -> None:
    """``show`` fails in the sink's own store client, ``read`` in hudi-rs'."""
    done = _hudi_sink(tmp_path, moto_s3, metadata_endpoint, "table", action, "--path", s3_table)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("hudi-sink: error: no credentials for s3://"), lines[0]
    for named in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", str(tmp_path / ".aws" / "credentials")):
        assert named in lines[0], (named, lines[0])


def test_the_default_profile_of_aws_credentials_is_used(
        tmp_path: Path, moto_s3: MotoS3, s3_table: str, metadata_endpoint: str) -> None:
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text(
        f"[default]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n",
        encoding="utf-8")
    (tmp_path / ".aws" / "config").write_text(f"[default]\nregion = {REGION}\n", encoding="utf-8")
    shown = _hudi_sink(tmp_path, moto_s3, metadata_endpoint, "table", "show", "--path", s3_table)
    assert shown.returncode == 0, shown.stderr
    assert "table orders (COPY_ON_WRITE" in shown.stdout and "0 commits" in shown.stdout
    read = _hudi_sink(tmp_path, moto_s3, metadata_endpoint, "table", "read", "--path", s3_table)
    assert read.returncode == 0, read.stderr
    assert read.stdout.startswith("0 rows"), read.stdout
    # A named profile that does not exist: exit 2 naming AWS_PROFILE.
    named = _hudi_sink(tmp_path, moto_s3, metadata_endpoint, "table", "show", "--path", s3_table,
                       AWS_PROFILE="prod")
    assert named.returncode == 2
    assert named.stderr.strip() == (
        f"hudi-sink: configuration error: AWS_PROFILE: AWS profile 'prod' is in neither "
        f"{tmp_path / '.aws' / 'credentials'} nor {tmp_path / '.aws' / 'config'}")


def test_a_silent_metadata_service_is_asked_once_briefly(
        tmp_path: Path, moto_s3: MotoS3, s3_table: str, silent_endpoint: str) -> None:
    started = time.monotonic()
    done = _hudi_sink(tmp_path, moto_s3, silent_endpoint, "table", "show", "--path", s3_table)
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "did not answer within 1 s" in done.stderr, done.stderr
    assert elapsed < 40, elapsed  # the command's start-up (~5 s under load) and one 1 s probe


def test_hudi_rs_failing_to_find_credentials_is_the_same_line(
        tmp_path: Path, moto_s3: MotoS3, s3_table: str, metadata_endpoint: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The metadata service answered the probe, then gave hudi-rs nothing (or went away):
    hudi-rs' own error becomes the one line too."""
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_s3.endpoint)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", metadata_endpoint)
    monkeypatch.setattr(table_cmd, "probe_metadata_service", lambda: None)
    with pytest.raises(MissingCredentialsError) as caught:
        table_cmd._read(s3_table, None, None)  # straight to hudi-rs, as `table read` goes
    assert str(caught.value).startswith("no credentials for s3://"), caught.value
    assert "\n" not in str(caught.value) and "403" in str(caught.value)
    assert "HudiCoreError" in repr(caught.value.__cause__), caught.value.__cause__
