"""A clustering pass killed mid-rewrite leaves its local scratch directory behind (up to a
target file's size, every kill another); the next rewrite removes it — but never the
directory of a pass still running in another process. Real processes, really SIGKILLed, in a
temporary directory of the test's own (``TMPDIR``)."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_sink.services.coordinator.maintenance.clustering import rewrite_group
from hudi_sink.services.coordinator.maintenance.plan import BaseFile
from hudi_sink.shared.hudi.naming import base_file_name, new_file_id
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.storage.fs import LocalFileSystem

C = "20250101000000100"
HOUR = 3600

# A rewrite whose merge stops half-way (its scratch directory made, its file being written)
# until the parent kills it or closes its stdin.
STUCK = """
import json, sys
from hudi_sink.services.coordinator.maintenance import clustering
from hudi_sink.services.coordinator.maintenance.plan import BaseFile
from hudi_sink.shared.storage.fs import LocalFileSystem
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.hudi.table import HudiTable

def stuck(fs, sources, name, local, codec, budget):
    open(local, "wb").write(b"half a file")
    print("merging", flush=True)
    sys.stdin.read()
    raise SystemExit(0)

clustering._merge = stuck
base, file = json.loads(sys.argv[1])
clustering.rewrite_group(ReplaceTimeline(HudiTable(LocalFileSystem(), base)), "20250101000000100",
                         [BaseFile(**file)], "snappy")
"""


@pytest.fixture
def scratch_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    yield root


def _group(base: Path) -> BaseFile:
    fid = new_file_id()
    name = base_file_name(fid, "0-0-1", "20250101000000001")
    buffer = io.BytesIO()
    pq.write_table(pa.table({"_hoodie_file_name": [name] * 3, "id": ["a", "b", "c"]}), buffer)
    LocalFileSystem().write_atomic(f"{base}/de/{name}", buffer.getvalue())
    return BaseFile(path=f"de/{name}", partition="de", file_id=fid, instant="20250101000000001",
                    size=len(buffer.getvalue()))


def _stuck_rewrite(base: Path, group: BaseFile) -> subprocess.Popen[str]:
    """A rewrite in another process, stopped inside its merge (its scratch directory exists)."""
    process = subprocess.Popen(
        [sys.executable, "-c", STUCK, json.dumps([str(base), dataclasses.asdict(group)])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2])
    assert process.stdout is not None and process.stdout.readline() == "merging\n"
    return process


def _scratch(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.name.startswith("hudi-sink-cluster-"))


def _age(path: Path, seconds: int) -> None:
    stat = path.stat()
    os.utime(path, (stat.st_atime - seconds, stat.st_mtime - seconds))


def test_a_killed_pass_leaves_nothing_after_the_next_rewrite(tmp_path: Path, scratch_root: Path) -> None:
    base = tmp_path / "orders"
    group = _group(base)
    killed = _stuck_rewrite(base, group)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    [left] = _scratch(scratch_root)
    assert any(left.iterdir())  # its half-written file
    _age(left, HOUR)

    stat, _ = rewrite_group(ReplaceTimeline(HudiTable(LocalFileSystem(), str(base))), C, [group],
                            "snappy")
    assert stat.num_writes == 3
    assert _scratch(scratch_root) == []  # the old code: the killed pass's directory, for good


def test_a_running_pass_keeps_its_directory(tmp_path: Path, scratch_root: Path) -> None:
    base = tmp_path / "orders"
    group = _group(base)
    running = _stuck_rewrite(base, group)
    try:
        [busy] = _scratch(scratch_root)
        _age(busy, HOUR)  # however old: it is locked
        rewrite_group(ReplaceTimeline(HudiTable(LocalFileSystem(), str(base))), C, [group], "snappy")
        assert _scratch(scratch_root) == [busy] and any(busy.iterdir())
    finally:
        assert running.stdin is not None
        running.stdin.close()
        running.wait()
    assert _scratch(scratch_root) == []  # it ended and removed its own
