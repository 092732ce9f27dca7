"""The operator's first commands, through the contract (``hudi-sink`` in a subprocess, as a
shell runs it): ``--version``; a bad ``--log-level``; ``config check`` on a file with three
problems; a config error with ``log.format: json``. (``table show`` on ``s3://`` without
credentials: test_cli_s3_credentials.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HUDI_SINK = str(Path(sys.executable).with_name("hudi-sink"))

THREE_PROBLEMS = """\
kafka:
  bootstrap_server: "kafka:9092"
transaction:
  interval_ms: 5
"""
"""A misspelt key, a value out of range, and (from the environment) a bad admin port."""


def _run(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HUDI_SINK__")}
    environ.update(PYTHONPATH=str(ROOT), **env)
    return subprocess.run([HUDI_SINK, *args], cwd=cwd, env=environ, capture_output=True,
                          text=True, timeout=120, check=False)


def test_version(tmp_path: Path) -> None:
    done = _run("--version", cwd=tmp_path)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert (done.returncode, done.stdout.strip()) == (0, f"hudi-sink {version}"), done.stderr


def test_a_bad_log_level_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _run("--log-level", "verbose", "table", "show", "--path", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "'verbose'" in lines[0]
    assert all(level in lines[0] for level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))


def test_config_check_lists_every_problem(tmp_path: Path) -> None:
    config = tmp_path / "sink.yaml"
    config.write_text(THREE_PROBLEMS, encoding="utf-8")
    done = _run("config", "check", "--config", str(config), cwd=tmp_path,
                HUDI_SINK__ADMIN__PORT="70000")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "hudi-sink: configuration error: 3 problems", done.stderr
    problems = sorted(line.strip() for line in lines[1:])
    assert len(problems) == 3, done.stderr
    assert problems[0].startswith("admin.port: ") and problems[0].endswith(
        "(set by environment variable HUDI_SINK__ADMIN__PORT)"), problems[0]
    assert problems[1] == ("kafka.bootstrap_server: unknown key; did you mean "
                           "'kafka.bootstrap_servers'?")
    assert problems[2].startswith("transaction.interval_ms: ") and "(got 5)" in problems[2]


def test_json_logs_carry_the_config_error_too(tmp_path: Path) -> None:
    """A coordinator whose config is wrong exits 2; with ``log.format: json`` (in the file)
    every stderr line is a JSON object naming the service, one per problem."""
    config = tmp_path / "sink.yaml"
    config.write_text("log:\n  format: json\n" + THREE_PROBLEMS, encoding="utf-8")
    done = _run("coordinator", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    entries = [json.loads(line) for line in done.stderr.splitlines()]
    assert len(entries) == 2, done.stderr
    assert all(e["level"] == "ERROR" and e["service"] == "coordinator" for e in entries)
    assert {"time", "logger", "message"} <= set(entries[0])
    assert any("did you mean 'kafka.bootstrap_servers'?" in e["message"] for e in entries)
