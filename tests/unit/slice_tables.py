"""Tables whose file groups have several slices, built by hand on real files: each commit
writes a new base file for every file group it touches, with the group's file id and the
commit's instant, holding the group's previous rows (meta columns kept, ``_hoodie_file_name``
rewritten) plus the new ones — what a Copy-on-Write update or small-file packing writes. Read
back with hudi-rs, so "visible" means what an independent reader sees."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hudi import HudiReadOptions, HudiTableBuilder

from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.hudi.naming import base_file_name, partition_path, write_token
from hudi_sink.shared.hudi.offsets import KAFKA_COMMIT_OFFSETS_KEY, format_offsets
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.write_stats import WriteStat, build_commit_metadata
from hudi_sink.shared.storage.fs import LocalFileSystem

FS = LocalFileSystem()
DDL = "id STRING, country STRING, amount DOUBLE"
Row = tuple[str, str, str]
"""(id, _hoodie_commit_time, _hoodie_commit_seqno)."""


@dataclass
class SliceTable:
    base: Path
    config: TableConfig
    rows: dict[tuple[str, str], list[Row]] = field(default_factory=dict)
    """(partition path, file id) → the rows of its latest slice."""
    paths: dict[tuple[str, str, str], str] = field(default_factory=dict)
    """(partition path, file id, instant) → the slice's path relative to the base path."""

    @classmethod
    def create(cls, base: Path) -> SliceTable:
        config = TableConfig(base_path=str(base), name="orders", partition_field="country",
                             schema=DDL)
        HudiTable(FS, str(base)).initialize(config, config.table_schema())
        return cls(base, config)

    def table(self) -> HudiTable:
        return HudiTable(FS, str(self.base))

    def commit(self, instant: str, writes: dict[str, list[str]], country: str = "de") -> None:
        """Complete ``instant``: a new slice of each file group in ``writes`` (file id → new
        ids), carrying its previous slice's rows."""
        table = self.table()
        table.start_instant(instant)
        part = partition_path(country, self.config.partition_field, False)
        stats = []
        for n, (fid, new_ids) in enumerate(sorted(writes.items())):
            rows = self.rows.get((part, fid), []) + [
                (i, instant, f"{instant}_0_{k}") for k, i in enumerate(new_ids)]
            name = base_file_name(fid, write_token(0, n, 1), instant)
            relative = f"{part}/{name}"
            self._write(self.base / relative, rows, part, name, country)
            size = os.path.getsize(self.base / relative)
            stats.append(WriteStat(fid, relative, part, len(rows), len(new_ids), size, size))
            self.rows[(part, fid)] = rows
            self.paths[(part, fid, instant)] = relative
        extra = {"schema": self.config.table_schema().avro_schema_json(),
                 KAFKA_COMMIT_OFFSETS_KEY: format_offsets({("orders", 0): len(self.paths)}, ["orders"])}
        table.complete_instant(instant, build_commit_metadata(stats, extra))

    def _write(self, path: Path, rows: list[Row], part: str, name: str, country: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        n = len(rows)
        data = pa.Table.from_arrays(
            [pa.array([r[1] for r in rows], pa.string()),
             pa.array([r[2] for r in rows], pa.string()),
             pa.array([r[0] for r in rows], pa.string()),
             pa.array([part] * n, pa.string()),
             pa.array([name] * n, pa.string()),
             pa.array([r[0] for r in rows], pa.string()),
             pa.array([country] * n, pa.string()),
             pa.array([float(k) for k in range(n)], pa.float64())],
            schema=self.config.table_schema().file_arrow_schema)
        pq.write_table(data, path)

    def path(self, fid: str, instant: str, part: str = "de") -> str:
        """Absolute path of a slice."""
        return str(self.base / self.paths[(part, fid, instant)])

    def read(self, as_of: str | None = None) -> list[str]:
        """Sorted ids hudi-rs reads (as of ``as_of``)."""
        options = HudiReadOptions()
        if as_of is not None:
            options = options.with_as_of_timestamp(as_of)
        batches = HudiTableBuilder.from_base_uri(str(self.base)).build().read(options)
        return sorted(pa.Table.from_batches(batches).column("id").to_pylist()) if batches else []
