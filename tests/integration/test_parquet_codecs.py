"""``table.parquet_codec`` (seed ``parquet.codec``): every value writes base files with that
Parquet codec, through the participant's own writer and a real SparkSession (one for all
codecs), checked in each file's metadata with pyarrow and read back."""

from __future__ import annotations

import posixpath
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shared.config import SparkConfig
from shared.fs import LocalFileSystem
from shared.spark_writer import PART_COLUMN, PlannedFile, SparkWriter

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

EXPECTED = {"snappy": "SNAPPY", "zstd": "ZSTD", "gzip": "GZIP", "lz4": "LZ4",
            "none": "UNCOMPRESSED"}
"""pyarrow names Parquet's LZ4_RAW (what ``lz4`` writes) ``LZ4``."""


def test_every_parquet_codec_writes_files_with_that_codec(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    spark = SparkConfig(master="local[1]", conf={"spark.driver.memory": "1g"})
    table = pa.table({"id": [f"id-{i}" for i in range(200)],
                      "amount": [float(i) for i in range(200)],
                      PART_COLUMN: [i % 2 for i in range(200)]})
    writers = {codec: SparkWriter(spark, fs, codec=codec) for codec in EXPECTED}
    try:
        for codec, writer in writers.items():
            staging = tmp_path / codec
            staging.mkdir()
            planned = [PlannedFile(index=i, file_id=f"f{i}", partition_path="",
                                   file_name=f"f{i}.parquet",
                                   staged_path=posixpath.join(str(staging), f"f{i}.parquet"))
                       for i in range(2)]
            written = writer.write(table, planned, str(staging))
            assert [w.num_records for w in written] == [100, 100]
            for file in written:
                meta = pq.ParquetFile(file.planned.staged_path).metadata
                codecs = {meta.row_group(g).column(c).compression
                          for g in range(meta.num_row_groups) for c in range(meta.num_columns)}
                assert codecs == {EXPECTED[codec]}, (codec, codecs)
                assert pq.read_table(file.planned.staged_path).num_rows == 100
    finally:
        writers["snappy"].stop()
