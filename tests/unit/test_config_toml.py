"""A ``.toml`` config is read as TOML, with the YAML file's structure (it was read as YAML);
an extension the loader does not know is refused rather than guessed."""

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


@pytest.mark.parametrize("name", ["sink.conf", "sink.ini", "sink"])
def test_an_unknown_extension_is_refused_naming_the_known_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    path = tmp_path / name
    path.write_text("name: shop\n", encoding="utf-8")
    assert main(["config", "check", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "unknown extension" in err and ".yaml" in err and ".toml" in err, err


@pytest.mark.parametrize("name", ["sink.yml", "sink.YAML", "sink.json"])
def test_yaml_spellings_and_json_are_read_as_yaml(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text('{"name": "shop"}\n', encoding="utf-8")
    assert load_config(path, environ={}).name == "shop"
