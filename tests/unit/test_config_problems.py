"""A config with several problems: every one is reported (by the loader and by ``config
check``), each naming its key, a misspelt key with the closest valid one, a bad value from the
environment with the variable that set it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hudi_sink.cli.main import main
from hudi_sink.shared.config.settings import load_config
from hudi_sink.shared.errors import ConfigError

BAD = """\
kafka:
  bootstrap_server: "kafka:9092"
  session_timeout_ms: 5
transaction:
  intervl_ms: 10
"""


def _write(tmp_path: Path, text: str, name: str = "sink.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_every_problem_is_listed_with_its_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, BAD), environ={"HUDI_SINK__ADMIN__PORT": "70000"})
    problems = dict(caught.value.problems)
    assert set(problems) == {"kafka.bootstrap_server", "kafka.session_timeout_ms",
                             "transaction.intervl_ms", "admin.port"}
    assert "did you mean 'kafka.bootstrap_servers'?" in problems["kafka.bootstrap_server"]
    assert "did you mean 'transaction.interval_ms'?" in problems["transaction.intervl_ms"]
    assert "environment variable HUDI_SINK__ADMIN__PORT" in problems["admin.port"]
    assert "environment" not in problems["kafka.session_timeout_ms"]


def test_config_check_prints_all_problems_and_exits_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUDI_SINK__KAFKA__TOPICS", '["a", "a"]')
    assert main(["config", "check", "--config", str(_write(tmp_path, BAD))]) == 2
    err = capsys.readouterr().err
    assert "4 problems" in err
    lines = [line.strip() for line in err.splitlines()[1:]]
    assert len(lines) == 4
    assert any(line.startswith("kafka.bootstrap_server: unknown key; did you mean") for line in lines)
    assert any(line.startswith("kafka.topics:") and "HUDI_SINK__KAFKA__TOPICS" in line
               for line in lines)


def test_a_single_problem_keeps_the_one_line_format(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", "--config", str(_write(tmp_path, "nme: x\n"))]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "hudi-sink: configuration error: nme: unknown key; did you mean 'name'?"


def test_properties_problems_each_name_their_properties_key(tmp_path: Path) -> None:
    text = "target.base.path=/tmp/x\ntransaction.interval.ms=5\nretry.backoff.ms=0\n"
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, text, "sink.properties"), environ={})
    keys = [key for key, _ in caught.value.problems]
    assert keys == ["transaction.interval.ms (→ transaction.interval_ms)",
                    "retry.backoff.ms (→ service.retry_backoff_ms)"]
