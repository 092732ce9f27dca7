"""``config check`` shows an ignored properties key and a deprecated key once: in its output,
not also as a log line on stderr (the loader logged them, then the output listed them)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hudi_sink.cli.main import main
from hudi_sink.shared.config.settings import load_config


@pytest.mark.parametrize("as_json", [False, True])
def test_ignored_and_deprecated_keys_are_shown_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
        as_json: bool) -> None:
    path = tmp_path / "sink.properties"
    path.write_text("target.base.path=/tmp/x\ntasks.max=4\ntransaction.flush_bytes=4096\n",
                    encoding="utf-8")
    caplog.set_level(logging.WARNING)
    assert main(["config", "check", "--config", str(path), *(["--json"] if as_json else [])]) == 0
    captured = capsys.readouterr()
    shown = captured.out + captured.err + caplog.text
    # In the output (the table of keys; JSON also keeps its "ignored" list), never logged.
    assert "parallelism is the number of participant processes" in captured.out, shown
    assert "tasks.max" not in captured.err + caplog.text, shown
    if not as_json:
        assert captured.out.count("parallelism is the number of participant processes") == 1
    assert shown.count("transaction.flush_bytes is deprecated") == 1, shown
    assert not [r for r in caplog.records if "tasks.max" in r.getMessage()
                or "flush_bytes" in r.getMessage()]


def test_a_service_still_logs_them(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "sink.properties"
    path.write_text("target.base.path=/tmp/x\ntasks.max=4\ntransaction.flush_bytes=4096\n",
                    encoding="utf-8")
    caplog.set_level(logging.WARNING)
    load_config(path, environ={})
    messages = [r.getMessage() for r in caplog.records]
    assert sum("tasks.max is ignored" in m for m in messages) == 1
    assert sum("flush_bytes" in m for m in messages) == 1
