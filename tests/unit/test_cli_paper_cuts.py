"""Paper cuts of the ``hudi-sink`` command on day one: ``--version`` and a bad ``--log-level``."""

from __future__ import annotations

import pytest

from hudi_sink.cli.main import main, package_version


def test_version_prints_name_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == f"hudi-sink {package_version()}"
    assert package_version() not in ("", "unknown")


def test_version_falls_back_to_pyproject(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata as metadata

    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    import tomllib
    from pathlib import Path

    monkeypatch.setattr(metadata, "version", missing)
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    expected = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    assert package_version() == expected


def test_bad_log_level_is_a_usage_error_naming_the_levels(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--log-level", "verbose", "config", "check", "--config", "missing.yaml"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "'verbose'" in err[0]
    for level in ("DEBUG", "INFO", "WARNING", "ERROR"):
        assert level in err[0]
