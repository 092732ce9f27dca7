"""``log.format: json``: a service's log lines are JSON objects, one per line (time, level,
logger, message, exception); ``text`` (the default) stays as it was."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hudi_sink.shared.config.settings import SinkConfig, load_config
from hudi_sink.shared.runtime.logs import JsonFormatter, held_log_lines, log_context, set_log_service

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
    assert sum("tasks.max is ignored" in message for message in messages) == 1, messages
    assert any("not reachable" in message for message in messages), messages
    assert {entry.get("service") for entry in entries} == {"coordinator"}, entries


def _json_lines(logger: logging.Logger, log: Callable[[], object]) -> list[dict[str, str]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        log()
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
        logger.setLevel(logging.NOTSET)
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_service_and_partition_context_are_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    """The service on every line; a partition's topic, partition and instant on the lines
    logged inside its context, also from a task and a worker thread started there; extra=
    on the call wins."""
    import asyncio

    logger = logging.getLogger("hudi_sink.participant.test_log_format")
    monkeypatch.setattr("hudi_sink.shared.runtime.logs._service", "")
    set_log_service("participant")

    async def partition_work() -> None:
        with log_context(topic="orders", partition=3, instant="20260101000000001"):
            logger.info("flush started")
            await asyncio.create_task(asyncio.to_thread(logger.info, "in a worker thread"))
            logger.error("failed", extra={"partition": 4})
        logger.info("outside")

    entries = _json_lines(logger, lambda: asyncio.run(partition_work()))
    assert [e["message"] for e in entries] == ["flush started", "in a worker thread", "failed",
                                               "outside"]
    assert all(e["service"] == "participant" for e in entries)
    context = {"topic": "orders", "partition": "3", "instant": "20260101000000001"}
    assert all(entries[i].items() >= context.items() for i in (0, 1))
    assert entries[2]["partition"] == "4" and entries[2]["topic"] == "orders"
    assert not {"topic", "partition", "instant"} & set(entries[3])
    with pytest.raises(ValueError, match="unknown log context"):
        with log_context(member="m-1"):
            pass


def test_a_held_line_keeps_the_context_it_was_logged_in() -> None:
    from hudi_sink.shared.runtime.logs import configure_logging

    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers.clear()
    stream = io.StringIO()
    try:
        configure_logging("INFO", "json")
        root.handlers[0].setStream(stream)  # type: ignore[attr-defined]
        with held_log_lines():
            with log_context(partition=7):
                logging.getLogger("hudi_sink.test").warning("held")
        assert json.loads(stream.getvalue())["partition"] == "7"
    finally:
        root.handlers.clear()
        root.handlers.extend(saved)
