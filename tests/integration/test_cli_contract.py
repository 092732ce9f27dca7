"""The CLI's exit codes and messages: bad config fails fast naming the key (exit 2), an
unreachable broker is retried for ``kafka.startup_timeout_s`` while ``/ready`` says why,
then exit 2 naming the servers; the broker command prints its ready line."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml
from eventually import eventually
from pipeline import HUDI_SINK

from hudi_sink.cli.broker import free_port

pytestmark = pytest.mark.timeout(120)


def _run(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HUDI_SINK, *args], capture_output=True, text=True, timeout=timeout)


def _config(tmp_path: Path, **sections: object) -> Path:
    data: dict[str, object] = {"name": "cli", "table": {"base_path": str(tmp_path / "t")}}
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}  # type: ignore[dict-item]
        else:
            data[key] = value
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("sections", "key"),
    [
        ({"kafka": {"bogus": 1}}, "kafka.bogus"),
        ({"transaction": {"interval_ms": "soon"}}, "transaction.interval_ms"),
        ({"table": {"record_key_field": "nope"}}, "table.record_key_field"),
        ({"table": {"schema": "id STRING, amount MONEY"}}, "table.schema"),
        ({"errors": {"tolerance": "ignore"}}, "errors.tolerance"),
        ({"kafka": {"security_protocol": "SSL", "ssl_cafile": "/nonexistent/ca.pem"}}, "ssl_cafile"),
    ],
)
@pytest.mark.parametrize("role", ["coordinator", "participant", "deleter"])
def test_bad_config_exits_2_naming_the_key(
    tmp_path: Path, role: str, sections: dict[str, object], key: str
) -> None:
    result = _run([role, "--config", str(_config(tmp_path, **sections))])
    assert result.returncode == 2, result.stderr
    assert key in result.stderr


def test_missing_config_file_and_usage_errors_exit_2(tmp_path: Path) -> None:
    result = _run(["coordinator", "--config", str(tmp_path / "missing.yaml")])
    assert result.returncode == 2 and "not found" in result.stderr
    assert _run(["coordinator"]).returncode == 2
    assert _run(["no-such-command"]).returncode == 2


def test_unreachable_kafka_is_retried_then_exit_2(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    config = _config(tmp_path, kafka={"bootstrap_servers": dead, "startup_timeout_s": 6})
    port = free_port()
    started = time.monotonic()
    process = subprocess.Popen(
        [HUDI_SINK, "coordinator", "--config", str(config), "--admin-port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        def not_ready() -> dict[str, object] | None:
            response = httpx.get(f"http://127.0.0.1:{port}/ready", timeout=2)
            body = response.json()
            mentions = any(dead in reason for reason in body["reasons"])
            return body if response.status_code == 503 and mentions else None

        body = eventually(not_ready, 20, "/ready 503 while Kafka is unreachable", every_s=0.2)
        assert body["ready"] is False  # type: ignore[index]
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 2, output
    assert dead in output
    assert time.monotonic() - started >= 5


def test_broker_command_prints_ready_and_stops_on_sigterm() -> None:
    port = free_port()
    process = subprocess.Popen([HUDI_SINK, "broker", "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line == f"ready bootstrap=127.0.0.1:{port}"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("role", ["coordinator", "participant", "deleter"])
def test_sigterm_during_startup_stops_promptly(tmp_path: Path, role: str) -> None:
    """A pod stopped while it still waits for Kafka must exit within a grace period."""
    dead = f"127.0.0.1:{free_port()}"
    config = _config(tmp_path, kafka={"bootstrap_servers": dead, "startup_timeout_s": 120})
    port = free_port()
    process = subprocess.Popen(
        [HUDI_SINK, role, "--config", str(config), "--admin-port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        eventually(lambda: httpx.get(f"http://127.0.0.1:{port}/ready", timeout=2).status_code == 503,
                   20, "/ready 503", every_s=0.2)
        stopped_at = time.monotonic()
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    assert time.monotonic() - stopped_at < 15
