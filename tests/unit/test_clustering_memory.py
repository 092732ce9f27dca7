"""Clustering rewrites a group of files larger than its memory budget with bounded Arrow
memory, and the rewritten file holds exactly the rows of the group, in order, with
``_hoodie_file_name`` naming the new file (real Parquet files, local and on moto's S3)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from s3_server import MotoS3

from hudi_sink.services.coordinator.maintenance.clustering import BUDGET_BYTES, rewrite_group
from hudi_sink.services.coordinator.maintenance.plan import BaseFile
from hudi_sink.shared.hudi.naming import base_file_name, new_file_id
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.write_stats import WriteStat
from hudi_sink.shared.storage.fs import FileSystem, LocalFileSystem
from hudi_sink.shared.storage.object_store import ObjectStoreFileSystem

C = "20250101000000100"
MiB = 1024 * 1024


def _file(fs: FileSystem, base: str, n: int, rows: int, *, extra: bool) -> BaseFile:
    """A base file of ``rows`` rows of ~1 KiB each (incompressible payload); ``extra``
    adds a column the other files lack (it must come back null for their rows)."""
    instant = f"2025010100000{n:04d}"
    fid = new_file_id()
    name = base_file_name(fid, "0-0-1", instant)
    ids = [f"{n}-{i}" for i in range(rows)]
    columns = {
        "_hoodie_commit_time": pa.array([instant] * rows),
        "_hoodie_file_name": pa.array([name] * rows),
        "id": pa.array(ids),
        "payload": pa.array([(f"{n}:{i}:".encode() + bytes(range(256)) * 4)[:1024]
                             for i in range(rows)], pa.binary()),
    }
    if extra:
        columns["note"] = pa.array([f"note-{i}" for i in range(rows)])
    buffer = io.BytesIO()
    pq.write_table(pa.table(columns), buffer, row_group_size=rows // 2 or 1)
    fs.write_atomic(f"{base}/de/{name}", buffer.getvalue())
    return BaseFile(path=f"de/{name}", partition="de", file_id=fid, instant=instant,
                    size=len(buffer.getvalue()))


@pytest.fixture(params=["local", "s3"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[FileSystem, str]]:
    if request.param == "local":
        yield LocalFileSystem(), str(tmp_path / "orders")
        return
    server: MotoS3 = request.getfixturevalue("moto_s3")
    base = f"s3://{server.new_bucket()}/warehouse/orders"
    yield ObjectStoreFileSystem(base, server.storage_options()), base


def _rows(fs: FileSystem, base: str, files: list[BaseFile]) -> pa.Table:
    tables = [pq.read_table(pa.BufferReader(fs.read_bytes(f"{base}/{f.path}"))) for f in files]
    return pa.concat_tables(tables, promote_options="default")


def test_the_budget_defaults_to_64_mib() -> None:
    assert BUDGET_BYTES == 64 * MiB


def _rewrite_within(fs: FileSystem, base: str, files: list[BaseFile],
                    budget: int) -> tuple[WriteStat, str]:
    """``rewrite_group`` with ``budget``, failing when Arrow memory peaked over twice it."""
    pool = pa.proxy_memory_pool(pa.default_memory_pool())
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    try:
        stat, staged = rewrite_group(ReplaceTimeline(HudiTable(fs, base)), C, files, "snappy",
                                     budget_bytes=budget)
    finally:
        pa.set_memory_pool(previous)
    assert pool.max_memory() <= 2 * budget, f"peak {pool.max_memory() / MiB:.1f} MiB"
    return stat, staged


def test_a_group_larger_than_the_budget_is_rewritten_within_it(
        table: tuple[FileSystem, str]) -> None:
    fs, base = table
    budget = 4 * MiB
    files = [_file(fs, base, n, 6_000, extra=n == 1) for n in range(1, 6)]  # ~30 MiB of rows
    expected = _rows(fs, base, files)
    assert expected.nbytes > 6 * budget

    stat, staged = _rewrite_within(fs, base, files, budget)

    written = pq.read_table(pa.BufferReader(fs.read_bytes(f"{base}/{staged}")))
    assert written.num_rows == stat.num_writes == expected.num_rows
    assert set(written.column("_hoodie_file_name").to_pylist()) == {stat.path.split("/")[-1]}
    keep = [c for c in expected.column_names if c != "_hoodie_file_name"]
    assert written.select(keep).equals(expected.select(keep))
    assert written.column("note").null_count == expected.num_rows - 6_000
    info = fs.file_info(f"{base}/{staged}")
    assert info is not None and info.size == stat.file_size_bytes


def test_dictionary_encoded_columns_stay_within_the_budget(table: tuple[FileSystem, str]) -> None:
    """A low-cardinality column is stored as a dictionary: a few bytes per row on disk, every
    row's whole value once read. Batches sized from the file's (encoded) sizes held 40 MiB
    against a 4 MiB budget; they are sized by the rows' decoded bytes."""
    fs, base = table
    budget = 4 * MiB
    rows = 200_000
    fid = new_file_id()
    name = base_file_name(fid, "0-0-1", "20250101000000001")
    columns = {"_hoodie_commit_time": pa.array(["20250101000000001"] * rows),
               "_hoodie_file_name": pa.array([name] * rows),
               "id": pa.array([str(i) for i in range(rows)]),
               "country": pa.array([("Deutschland " * 20)[:200], ("France " * 40)[:200]] * (rows // 2))}
    buffer = io.BytesIO()
    pq.write_table(pa.table(columns), buffer)  # one row group, dictionary-encoded strings
    fs.write_atomic(f"{base}/de/{name}", buffer.getvalue())
    files = [BaseFile(path=f"de/{name}", partition="de", file_id=fid, instant="20250101000000001",
                      size=len(buffer.getvalue()))]
    expected = _rows(fs, base, files)
    assert expected.nbytes > 10 * budget and len(buffer.getvalue()) < budget / 2

    stat, staged = _rewrite_within(fs, base, files, budget)

    written = pq.read_table(pa.BufferReader(fs.read_bytes(f"{base}/{staged}")))
    keep = [c for c in expected.column_names if c != "_hoodie_file_name"]
    assert stat.num_writes == rows and written.select(keep).equals(expected.select(keep))
