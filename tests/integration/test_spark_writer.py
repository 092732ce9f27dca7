"""The participant's Spark writer through a real SparkSession (one for the whole module):

- ``table.parquet_codec`` (seed ``parquet.codec``): every value writes base files with that
  Parquet codec, checked in each file's metadata with pyarrow and read back;
- one Parquet file per planned file whatever the number of files (beyond Spark's concurrent
  writers it sorts the rest, and still never writes two files in one directory), every row
  in the file its ``__hs_part`` names;
- dictionary encoding kept only where it pays."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_sink.services.participant.spark_writer import PART_COLUMN, PlannedFile, SparkWriter
from hudi_sink.shared.config.settings import SparkConfig
from hudi_sink.shared.storage.fs import LocalFileSystem

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

EXPECTED = {"snappy": "SNAPPY", "zstd": "ZSTD", "gzip": "GZIP", "lz4": "LZ4",
            "none": "UNCOMPRESSED"}
"""pyarrow names Parquet's LZ4_RAW (what ``lz4`` writes) ``LZ4``."""

SPARK = SparkConfig(master="local[1]", conf={"spark.driver.memory": "1g",
                                             "spark.sql.maxConcurrentOutputFileWriters": "2"})
"""Two concurrent writers only, so five files make Spark fall back to sorting."""
FILES = 5
ROWS = 600


@pytest.fixture(scope="module")
def writers() -> Iterator[dict[str, SparkWriter]]:
    """One writer per codec; they share the process's SparkSession."""
    fs = LocalFileSystem()
    writers = {codec: SparkWriter(SPARK, fs, codec=codec) for codec in EXPECTED}
    try:
        yield writers
    finally:
        writers["snappy"].stop()


def test_every_parquet_codec_writes_files_with_that_codec(
    writers: dict[str, SparkWriter], tmp_path: Path
) -> None:
    table = pa.table({"id": [f"id-{i}" for i in range(200)],
                      "amount": [float(i) for i in range(200)],
                      PART_COLUMN: [i % 2 for i in range(200)]})
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


def _planned(staging: Path, count: int) -> list[PlannedFile]:
    return [PlannedFile(index=i, file_id=f"f{i}", partition_path=f"p{i}", file_name=f"f{i}.parquet",
                        staged_path=posixpath.join(str(staging), f"p{i}", f"f{i}.parquet"))
            for i in range(count)]


def test_more_files_than_concurrent_writers_give_one_file_each_with_its_rows(
    writers: dict[str, SparkWriter], tmp_path: Path
) -> None:
    writer = writers["snappy"]
    index = [(i * 7) % FILES for i in range(ROWS)]  # interleaved, as a flush's rows are
    table = pa.table({"id": [f"id-{i}" for i in range(ROWS)],
                      "country": [f"c{i % FILES}" for i in index],
                      PART_COLUMN: pa.array(index, pa.int32())})
    written = writer.write(table, _planned(tmp_path, FILES), str(tmp_path))
    assert [w.planned.index for w in written] == list(range(FILES))
    for file in written:
        ids = pq.read_table(file.planned.staged_path).column("id").to_pylist()
        expected = [f"id-{i}" for i in range(ROWS) if index[i] == file.planned.index]
        assert sorted(ids) == sorted(expected)
        assert file.num_records == len(expected)
    staged = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.parquet"))
    assert staged == [f"p{i}/f{i}.parquet" for i in range(FILES)]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".spark-")]


def test_dictionary_only_for_columns_that_repeat(
    writers: dict[str, SparkWriter], tmp_path: Path
) -> None:
    writer = writers["snappy"]
    table = pa.table({"id": [f"id-{i}" for i in range(ROWS)],
                      "country": ["us", "de", "fr"] * (ROWS // 3),
                      PART_COLUMN: pa.array([0] * ROWS, pa.int32())})
    (file,) = writer.write(table, _planned(tmp_path, 1), str(tmp_path))
    meta = pq.ParquetFile(file.planned.staged_path).metadata.row_group(0)
    has_dictionary = {meta.column(c).path_in_schema: meta.column(c).has_dictionary_page
                      for c in range(meta.num_columns)}
    assert has_dictionary == {"id": False, "country": True}


def test_the_spark_jvm_runs_with_few_malloc_arenas_and_the_serial_collector(
        writers: dict[str, SparkWriter]) -> None:
    """Peak RSS and CPU: the JVM gets MALLOC_ARENA_MAX=2 unless the operator set a value, and
    the serial garbage collector unless ``spark.driver.extraJavaOptions`` is set."""
    import os

    import psutil

    writers["snappy"].start()
    # Only Spark's JVMs: a session-wide Kafka node or Hudi reader may also run below pytest.
    jvms = [child for child in psutil.Process().children(recursive=True)
            if child.name() == "java" and any("org.apache.spark" in arg for arg in child.cmdline())]
    assert jvms, "no Spark JVM below this process"
    expected = os.environ.get("MALLOC_ARENA_MAX", "2")
    assert {jvm.environ().get("MALLOC_ARENA_MAX") for jvm in jvms} == {expected}
    assert all("-XX:+UseSerialGC" in jvm.cmdline() for jvm in jvms), [j.cmdline() for j in jvms]


def _old_slice(path: Path, name: str, keys: list[str], evolved: bool) -> None:
    """A slice as an earlier commit wrote it; ``evolved``: after ``qty`` widened to BIGINT and
    ``note`` was added (the slices before it have neither)."""
    columns: dict[str, pa.Array] = {
        "_hoodie_commit_time": pa.array(["20260101000000000"] * len(keys)),
        "_hoodie_commit_seqno": pa.array([f"20260101000000000_0_{k}" for k in keys]),
        "_hoodie_record_key": pa.array(keys),
        "_hoodie_file_name": pa.array([name] * len(keys)),
        "id": pa.array(keys),
        "qty": pa.array(range(len(keys)), pa.int64() if evolved else pa.int32()),
    }
    if evolved:
        columns["note"] = pa.array(["old"] * len(keys))
    pq.write_table(pa.table(columns), path / name)


def test_carried_rows_of_many_slices_and_two_schemas_keep_each_file_in_one_task(
    writers: dict[str, SparkWriter], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six old slices (three before a schema change, three after) dealt into the writer's
    tasks (local[1]: two), keys dropped per slice (one stored twice in its slice: both rows
    go), new rows into four of them and into a new group: every new file holds exactly its
    slice's rows less the dropped ones plus its new rows, carried rows keep their meta
    columns and name the new file, the old schema's rows read as the new one's. The job runs
    as two tasks (Spark 4 would otherwise run a union of single-partition buckets as one)."""
    from hudi_sink.services.participant import carried_rows
    from hudi_sink.services.participant.packing import Carry

    monkeypatch.setattr(carried_rows, "ROWS_PER_TASK", 50)  # small slices, several tasks
    writer = writers["snappy"]
    old_dir, staging = tmp_path / "old", tmp_path / "staging"
    old_dir.mkdir()
    staging.mkdir()
    keys = {i: [f"k{i}-{n}" for n in range(40)] for i in range(6)}
    keys[2] = [*keys[2], "k2-7"]  # stored twice
    for i in range(6):
        _old_slice(old_dir, f"g{i}_old.parquet", keys[i], evolved=i >= 3)
    drops = {i: {f"k{i}-{n}" for n in range(i + 1)} | ({"k2-7"} if i == 2 else set())
             for i in range(6)}
    new_for = {0: 3, 2: 5, 3: 1, 5: 4, 6: 7}  # index -> new rows (6: a new group)
    new_ids = [f"new{i}-{n}" for i, count in new_for.items() for n in range(count)]
    table = pa.table({
        "_hoodie_commit_time": ["20260202000000000"] * len(new_ids),
        "_hoodie_commit_seqno": [f"20260202000000000_0_{k}" for k in new_ids],
        "_hoodie_record_key": new_ids,
        "_hoodie_file_name": [f"f{int(k[3])}.parquet" for k in new_ids],
        "id": new_ids,
        "qty": pa.array(range(len(new_ids)), pa.int64()),
        "note": ["new"] * len(new_ids),
        PART_COLUMN: pa.array([int(k[3]) for k in new_ids], pa.int32()),
    })
    planned = []
    for i in range(7):
        carry = None
        if i < 6:
            stored = sum(1 for k in keys[i] if k in drops[i])
            carry = Carry(file_id=f"g{i}", source_path=str(old_dir / f"g{i}_old.parquet"),
                          prev_commit="20260101000000000", rows=len(keys[i]) - stored,
                          drop_keys=frozenset(drops[i]))
        planned.append(PlannedFile(index=i, file_id=f"g{i}", partition_path="",
                                   file_name=f"f{i}.parquet",
                                   staged_path=str(staging / f"f{i}.parquet"), carry=carry))
    context = writer._session_or_start().sparkContext
    context.setJobGroup("carried-rows", "the job under test")
    try:
        written = writer.write(table, planned, str(staging))
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    tracker = context.statusTracker()
    stages = [tracker.getStageInfo(stage) for job in tracker.getJobIdsForGroup("carried-rows")
              for stage in tracker.getJobInfo(job).stageIds]
    assert max(stage.numTasks for stage in stages) == 2  # both tasks, not one after the other
    for file in written:
        i = file.planned.index
        rows = pq.read_table(file.planned.staged_path).to_pylist()
        carried = [r for r in rows if r["note"] != "new"]
        expected_old = sorted(k for k in keys.get(i, []) if k not in drops.get(i, set()))
        assert sorted(r["id"] for r in carried) == expected_old, i
        assert sorted(r["id"] for r in rows if r["note"] == "new") == sorted(
            k for k in new_ids if int(k[3]) == i), i
        assert file.num_records == len(rows)
        assert {r["_hoodie_file_name"] for r in rows} <= {f"f{i}.parquet"}
        assert {r["_hoodie_commit_time"] for r in carried} <= {"20260101000000000"}
        assert all(r["_hoodie_commit_seqno"] == f"20260101000000000_0_{r['id']}" for r in carried)
        assert {r["note"] for r in carried} == (set() if i == 6 else {"old"} if i >= 3 else {None})
        assert pq.read_schema(file.planned.staged_path).field("qty").type == pa.int64()
    assert sorted(p.name for p in staging.iterdir()) == [f"f{i}.parquet" for i in range(7)]


def test_a_column_added_since_the_slice_keeps_the_tables_type_whatever_the_sessions_default(
    writers: dict[str, SparkWriter], tmp_path: Path
) -> None:
    """An operator's ``spark.sql.timestampType=TIMESTAMP_NTZ`` changes what SQL's bare
    ``timestamp`` means; a slice written before a ``ts TIMESTAMP`` column was added, rewritten
    by a deletes-only merge (no new row to union with), still gets a UTC-adjusted ``ts``. The
    new file's name holds a quote: SQL text would need escaping there, so it is looked up
    with Columns (the sink's own names never hold one)."""
    from hudi_sink.services.participant.packing import Carry

    writer = writers["snappy"]
    old_dir, staging = tmp_path / "old", tmp_path / "staging"
    old_dir.mkdir()
    staging.mkdir()
    keys = [f"k{n}" for n in range(10)]
    _old_slice(old_dir, "g0_old.parquet", keys, evolved=False)
    table = pa.table({
        "_hoodie_commit_time": pa.array([], pa.string()),
        "_hoodie_commit_seqno": pa.array([], pa.string()),
        "_hoodie_record_key": pa.array([], pa.string()),
        "_hoodie_file_name": pa.array([], pa.string()),
        "id": pa.array([], pa.string()),
        "qty": pa.array([], pa.int32()),
        "ts": pa.array([], pa.timestamp("us", "UTC")),
        PART_COLUMN: pa.array([], pa.int32()),
    })
    carry = Carry(file_id="g0", source_path=str(old_dir / "g0_old.parquet"),
                  prev_commit="20260101000000000", rows=8, drop_keys=frozenset({"k0", "k1"}))
    planned = [PlannedFile(index=0, file_id="g0", partition_path="", file_name="f'0.parquet",
                           staged_path=str(staging / "f'0.parquet"), carry=carry)]
    session = writer._session_or_start()
    session.conf.set("spark.sql.timestampType", "TIMESTAMP_NTZ")
    try:
        [written] = writer.write(table, planned, str(staging))
    finally:
        session.conf.unset("spark.sql.timestampType")
    read = pq.read_table(written.planned.staged_path)
    assert read.schema.field("ts").type == pa.timestamp("us", "UTC")
    assert sorted(read.column("id").to_pylist()) == keys[2:]
    assert read.column("ts").null_count == 8
    assert set(read.column("_hoodie_file_name").to_pylist()) == {"f'0.parquet"}


def _new_row() -> dict[str, pa.Array | list[object]]:
    """The columns of one new row, ``new``, of the tables ``_over_old_slice`` writes."""
    return {
        "_hoodie_commit_time": ["20260202000000000"],
        "_hoodie_commit_seqno": ["20260202000000000_0_new"],
        "_hoodie_record_key": ["new"],
        "_hoodie_file_name": ["f0.parquet"],
        "id": ["new"],
        "qty": pa.array([1], pa.int32()),
    }


def _over_old_slice(writer: SparkWriter, tmp_path: Path, table: pa.Table,
                    target: Path) -> dict[str, dict[str, object]]:
    """``table`` (file index 0) written as a new slice of group ``g0`` whose old slice holds
    k0, k1 and k2, with k0 dropped: the new file's rows by id."""
    from hudi_sink.services.participant.packing import Carry

    old = tmp_path / "old" / "g0_old.parquet"
    if not old.exists():
        old.parent.mkdir()
        _old_slice(old.parent, old.name, ["k0", "k1", "k2"], evolved=False)
    carry = Carry(file_id="g0", source_path=str(old), prev_commit="20260101000000000", rows=2,
                  drop_keys=frozenset({"k0"}))
    planned = [PlannedFile(index=0, file_id="g0", partition_path="", file_name="f0.parquet",
                           staged_path=str(target / "f0.parquet"), carry=carry)]
    [written] = writer.write(table, planned, str(target))
    return {r["id"]: r for r in pq.read_table(written.planned.staged_path).to_pylist()}


def test_ancient_dates_of_new_rows_are_written_as_given_whatever_the_sessions_rebase_mode(
    writers: dict[str, SparkWriter], tmp_path: Path
) -> None:
    """New rows of a merge reach Spark as a staged Parquet file that names no Spark version:
    an operator's ``datetimeRebaseModeInRead=LEGACY`` must not shift their dates before 1582
    or timestamps before 1900 (``createDataFrame`` never did), nor ``EXCEPTION`` fail them."""
    import datetime as dt

    writer = writers["snappy"]
    day = dt.date(1000, 1, 1)
    moment = dt.datetime(1000, 1, 1, 12, tzinfo=dt.UTC)
    table = pa.table({
        **_new_row(),
        "day": pa.array([day], pa.date32()),
        "ts": pa.array([moment], pa.timestamp("us", "UTC")),
        PART_COLUMN: pa.array([0], pa.int32()),
    })
    session = writer._session_or_start()
    for mode in ("LEGACY", "EXCEPTION"):
        session.conf.set("spark.sql.parquet.datetimeRebaseModeInRead", mode)
        try:
            rows = _over_old_slice(writer, tmp_path, table, tmp_path / "staging" / mode)
        finally:
            session.conf.unset("spark.sql.parquet.datetimeRebaseModeInRead")
        assert sorted(rows) == ["k1", "k2", "new"], mode
        assert (rows["new"]["day"], rows["new"]["ts"]) == (day, moment), mode


def test_new_rows_are_read_by_their_columns_whatever_schema_metadata_they_carry(
    writers: dict[str, SparkWriter], tmp_path: Path
) -> None:
    """Rows whose Arrow schema came from a Spark-written footer carry Spark's row metadata,
    which names the file's columns without ``__hs_part`` (and would win over the Parquet
    schema when Spark reads the staged file): the flush must still write every row into its
    planned file (before, the rows went to a stray ``__hs_part`` directory and the flush
    failed)."""
    import json

    columns = _new_row()
    spark_row = {"type": "struct", "fields": [
        {"name": name, "type": "string", "nullable": True, "metadata": {}} for name in columns]}
    table = pa.table({**columns, PART_COLUMN: pa.array([0], pa.int32())}).replace_schema_metadata(
        {"org.apache.spark.sql.parquet.row.metadata": json.dumps(spark_row)})
    rows = _over_old_slice(writers["snappy"], tmp_path, table, tmp_path / "staging")
    assert sorted(rows) == ["k1", "k2", "new"]
    assert rows["new"]["qty"] == 1
