"""``log.format: json``: a service's log lines are JSON objects, one per line (time, level,
logger, message, exception); ``text`` (the default) stays as it was."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hudi_sink.shared.config.settings import SinkConfig, load_config
from hudi_sink.shared.runtime.logs import JsonFormatter

ROOT = Path(__file__).resolve().parents[2]


def test_default_is_text_and_json_is_accepted(tmp_path: Path) -> None:
    assert SinkConfig().log.format == "text"
    path = tmp_path / "sink.yaml"
    path.write_text("log:\n  format: json\n", encoding="utf-8")
    assert load_config(path, environ={}).log.format == "json"
    assert load_config(None, environ={"HUDI_SINK__LOG__FORMAT": "json"}).log.format == "json"


def test_json_lines_carry_message_and_exception() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("hudi_sink.coordinator.test_log_format")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("instant %s\nrolled back", "20260101")
        try:
            raise RuntimeError("disk full")
        except RuntimeError:
            logger.exception("flush failed")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["message"] == "instant 20260101\nrolled back"
    assert first["level"] == "WARNING" and first["logger"] == logger.name
    assert first["time"].endswith("+00:00") and "exception" not in first
    assert second["message"] == "flush failed"
    assert "RuntimeError: disk full" in second["exception"]


@pytest.mark.parametrize("where", ["env", "file"])
def test_a_service_logs_one_json_object_per_line(tmp_path: Path, where: str) -> None:
    """A coordinator as deployed, whose broker is unreachable (it exits 2 within a second):
    every stderr line is a JSON object, the loader's warning about an ignored properties key
    (logged before the format is known) and the failure's lines too."""
    path = tmp_path / "sink.properties"
    text = (f"target.base.path={tmp_path / 'table'}\ntasks.max=4\n"
            "kafka.bootstrap_servers=127.0.0.1:1\nkafka.startup_timeout_s=0\n"
            "admin.host=127.0.0.1\nadmin.port=0\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUDI_SINK__")}
    env["PYTHONPATH"] = str(ROOT)
    if where == "env":
        env["HUDI_SINK__LOG__FORMAT"] = "json"
    else:
        text += "log.format=json\n"
    path.write_text(text, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "hudi_sink.cli.main", "coordinator",
                           "--config", str(path)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    entries = [json.loads(line) for line in lines]
    assert all(isinstance(entry, dict) for entry in entries)
    assert all(set(entry) >= {"time", "level", "logger", "message"} for entry in entries)
    messages = [entry["message"] for entry in entries]
    assert any("tasks.max is ignored" in message for message in messages), messages
    assert any("not reachable" in message for message in messages), messages
