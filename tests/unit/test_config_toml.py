"""A ``.toml`` config is read as TOML, with the YAML file's structure (it was read as YAML)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hudi_sink.cli.main import main
from hudi_sink.shared.config.settings import load_config

TOML = """\
name = "shop"

[kafka]
bootstrap_servers = "kafka:9092"
topics = ["orders", "refunds"]

[transaction]
interval_ms = 5000

[spark.conf]
"spark.driver.memory" = "2g"
"""


def test_toml_config_is_parsed_as_toml(tmp_path: Path) -> None:
    path = tmp_path / "sink.toml"
    path.write_text(TOML, encoding="utf-8")
    config = load_config(path, environ={})
    assert config.name == "shop"
    assert config.kafka.topics == ["orders", "refunds"]
    assert config.transaction.interval_ms == 5000
    assert config.spark.conf == {"spark.driver.memory": "2g"}
    assert config.table.base_path == str(tmp_path / "warehouse" / "orders")


def test_invalid_toml_exits_2_naming_toml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sink.toml"
    path.write_text("[kafka\n", encoding="utf-8")
    assert main(["config", "check", "--config", str(path)]) == 2
    assert "not valid TOML" in capsys.readouterr().err
