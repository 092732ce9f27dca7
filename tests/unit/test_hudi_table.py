"""HudiTable end to end: tables we write are read back by the independent hudi-rs reader."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiReadOptions, HudiTableBuilder
from recording_fs import RecordingFileSystem

from hudi_sink.shared.config.java_properties import format_properties, parse_properties
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.errors import ConfigError, TableFormatError
from hudi_sink.shared.hudi.layout import InstantState
from hudi_sink.shared.hudi.naming import base_file_name, new_file_id, partition_path, write_token
from hudi_sink.shared.hudi.offsets import KAFKA_COMMIT_OFFSETS_KEY, format_offsets, parse_offsets
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.write_stats import WriteStat, build_commit_metadata
from hudi_sink.shared.schema.table_schema import TableSchema
from hudi_sink.shared.storage.fs import LocalFileSystem

DDL = "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE"
T1, T2, T3 = "20250101000000001", "20250101000000002", "20250101000000003"
Row = tuple[str, object]  # (id, country)


def _config(base: Path, **overrides: Any) -> TableConfig:
    settings: dict[str, Any] = {
        "base_path": str(base),
        "name": "orders",
        "partition_field": "country",
        "schema": DDL,
    }
    settings.update(overrides)
    return TableConfig(**settings)


def _new_table(base: Path, **overrides: Any) -> tuple[HudiTable, TableConfig, TableSchema]:
    config = _config(base, **overrides)
    schema = config.table_schema()
    table = HudiTable(LocalFileSystem(), str(base))
    table.initialize(config, schema)
    return table, config, schema


def _stage(
    table: HudiTable, config: TableConfig, schema: TableSchema, instant: str, rows: list[Row],
    flush_no: int = 0,
) -> list[tuple[str, WriteStat]]:
    """Write one parquet file per table partition into the staging dir; return (path, stat)."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        path = partition_path(row[1], config.partition_field, config.hive_style_partitioning)
        groups.setdefault(path, []).append(row)
    staged: list[tuple[str, WriteStat]] = []
    for part, members in groups.items():
        fid = new_file_id()
        name = base_file_name(fid, write_token(0, flush_no, 1), instant)
        target = table.staging_path(instant, part, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        count = len(members)
        data = pa.Table.from_arrays(
            [
                pa.array([instant] * count, pa.string()),
                pa.array([f"{instant}_0_{i}" for i in range(count)], pa.string()),
                pa.array([m[0] for m in members], pa.string()),
                pa.array([part] * count, pa.string()),
                pa.array([name] * count, pa.string()),
                pa.array([m[0] for m in members], pa.string()),
                pa.array([datetime(2025, 1, 1, 12, tzinfo=UTC)] * count, pa.timestamp("us", "UTC")),
                pa.array([m[1] for m in members], pa.string()),
                pa.array([float(i) for i in range(count)], pa.float64()),
            ],
            schema=schema.file_arrow_schema,
        )
        pq.write_table(data, target)
        size = os.path.getsize(target)
        rel = f"{part}/{name}" if part else name
        staged.append((target, WriteStat(fid, rel, part, count, count, size, size)))
    return staged


def _commit(
    table: HudiTable, config: TableConfig, schema: TableSchema, instant: str, rows: list[Row],
    offsets: dict[tuple[str, int], int] | None = None,
) -> list[WriteStat]:
    table.start_instant(instant)
    staged = _stage(table, config, schema, instant, rows)
    for path, stat in staged:
        table.place_file(path, stat)
    extra = {"schema": schema.avro_schema_json()}
    if offsets is not None:
        extra[KAFKA_COMMIT_OFFSETS_KEY] = format_offsets(offsets, ["orders"])
    stats = [stat for _, stat in staged]
    table.complete_instant(instant, build_commit_metadata(stats, extra))
    return stats


def _read(base: Path, options: HudiReadOptions | None = None) -> dict[str, object]:
    reader = HudiTableBuilder.from_base_uri(str(base)).build()
    batches = reader.read(options or HudiReadOptions())
    if not batches:
        return {}
    data = pa.Table.from_batches(batches)
    return dict(zip(data.column("id").to_pylist(), data.column("country").to_pylist(), strict=True))


def test_round_trip_with_hudi_rs(tmp_path: Path) -> None:
    base = tmp_path / "warehouse" / "orders"
    table, config, schema = _new_table(base)
    first_rows: list[Row] = [("1", "sf"), ("2", "sf"), ("3", "../../etc"), ("4", None)]
    _commit(table, config, schema, T1, first_rows, offsets={("orders", 0): 4})
    second_rows: list[Row] = [("5", "sf"), ("6", ".hoodie"), ("7", "metadata"), ("8", "a/b")]
    _commit(table, config, schema, T2, second_rows, offsets={("orders", 0): 8})

    # T3: started, one file still staged, one already placed in a partition dir; never completed.
    table.start_instant(T3)
    (staged_path, _), = _stage(table, config, schema, T3, [("9", "la")])
    (placed_path, placed_stat), = _stage(table, config, schema, T3, [("10", "sf")], flush_no=1)
    table.place_file(placed_path, placed_stat)
    assert (base / "sf" / os.path.basename(placed_stat.path)).exists()

    expected = dict(first_rows + second_rows)
    assert _read(base) == expected
    assert _read(base, HudiReadOptions().with_as_of_timestamp(T1)) == dict(first_rows)

    # Hostile partition values stay inside the table, encoded, and read back unchanged.
    top_level = sorted(p.name for p in base.iterdir())
    assert top_level == sorted(
        [".hoodie", "%2E.%2F..%2Fetc", "%2Ehoodie", "%6Detadata", "__HIVE_DEFAULT_PARTITION__",
         "a%2Fb", "sf"]
    )
    assert not (tmp_path / "etc").exists()
    assert sorted(os.listdir(base / ".hoodie")) == sorted(
        [f"{T}.{s}" for T in (T1, T2) for s in ("commit", "commit.requested", "inflight")]
        + [f"{T3}.commit.requested", f"{T3}.inflight", "hoodie.properties", ".temp",
           ".sink"]  # .sink/table.json: the table's creation record
    )
    assert (base / "%2E.%2F..%2Fetc" / ".hoodie_partition_metadata").read_text() == (
        f"#partition metadata\ncommitTime={T1}\npartitionDepth=1\n"
    )
    filtered = HudiReadOptions().with_filters([("country", "=", "../../etc")])
    assert _read(base, filtered) == {"3": "../../etc"}

    reader = HudiTableBuilder.from_base_uri(str(base)).build()
    timeline = reader.get_timeline()
    assert [i.timestamp for i in timeline.get_completed_commits()] == [T1, T2]
    assert [i.action for i in timeline.get_completed_commits()] == ["commit", "commit"]
    assert timeline.get_latest_commit_timestamp() == T2
    assert [f.name for f in reader.get_schema()] == ["id", "ts", "country", "amount"]
    assert reader.get_schema().field("ts").type == pa.timestamp("us", tz="UTC")

    # Our own view of the timeline.
    assert table.completed_commits() == [T1, T2]
    assert table.pending_instants() == [T3]
    assert table.latest_instant_time() == T3
    states = [(i.time, i.state) for i in table.list_instants()]
    assert (T3, InstantState.INFLIGHT) in states and (T3, InstantState.REQUESTED) in states
    latest = table.latest_commit_metadata()
    assert latest is not None
    assert parse_offsets(latest["extraMetadata"][KAFKA_COMMIT_OFFSETS_KEY], ["orders"]) == {
        ("orders", 0): 8
    }
    first = table.read_commit_metadata(T1)
    assert sorted(first["partitionToWriteStats"]) == sorted(
        ["sf", "%2E.%2F..%2Fetc", "__HIVE_DEFAULT_PARTITION__"]
    )

    # Roll back T3: its placed file, staged file and timeline files disappear.
    leftovers = table.list_data_files(T3)
    assert leftovers == [placed_stat.path]
    table.rollback_instant(T3, leftovers)
    assert table.pending_instants() == []
    assert table.latest_instant_time() == T2
    assert not os.path.exists(staged_path)
    assert not (base / placed_stat.path).exists()
    assert not os.path.exists(table.staging_dir(T3))
    assert _read(base) == expected


def test_hive_style_and_non_partitioned(tmp_path: Path) -> None:
    hive = tmp_path / "hive"
    table, config, schema = _new_table(hive, hive_style_partitioning=True)
    _commit(table, config, schema, T1, [("1", "sf"), ("2", ".."), ("3", None)])
    assert sorted(p.name for p in hive.iterdir()) == [
        ".hoodie", "country=%2E.", "country=__HIVE_DEFAULT_PARTITION__", "country=sf"
    ]
    assert _read(hive) == {"1": "sf", "2": "..", "3": None}

    flat = tmp_path / "flat"
    table, config, schema = _new_table(flat, partition_field=None)
    stats = _commit(table, config, schema, T1, [("1", "sf"), ("2", "la")])
    _commit(table, config, schema, T2, [("3", "sf")])
    assert stats[0].path == os.path.basename(stats[0].path) and stats[0].partition_path == ""
    assert not (flat / ".hoodie_partition_metadata").exists()
    assert _read(flat) == {"1": "sf", "2": "la", "3": "sf"}
    assert list(table.read_commit_metadata(T1)["partitionToWriteStats"]) == [""]
    props = table.read_properties()
    assert "hoodie.table.partition.fields" not in props
    assert props["hoodie.table.keygenerator.class"].endswith("NonpartitionedKeyGenerator")


def test_properties_content_and_idempotent_initialize(tmp_path: Path) -> None:
    table, config, schema = _new_table(tmp_path, precombine_field="ts", database="sales")
    raw = (tmp_path / ".hoodie" / "hoodie.properties").read_text(encoding="ascii")
    assert '{"type"\\:"record"' in raw  # ':' escaped Java-style in the file
    props = table.read_properties()
    assert props["hoodie.table.create.schema"] == schema.avro_schema_json()
    assert orjson.loads(props["hoodie.table.create.schema"])["fields"][0]["name"] == "id"
    assert props["hoodie.table.name"] == "orders"
    assert props["hoodie.table.type"] == "COPY_ON_WRITE"
    assert props["hoodie.table.version"] == "6"
    assert props["hoodie.timeline.layout.version"] == "1"
    assert props["hoodie.database.name"] == "sales"
    assert props["hoodie.table.recordkey.fields"] == "id"
    assert props["hoodie.table.partition.fields"] == "country"
    assert props["hoodie.table.keygenerator.class"] == "org.apache.hudi.keygen.SimpleKeyGenerator"
    assert props["hoodie.table.precombine.field"] == "ts"
    assert props["hoodie.table.timeline.timezone"] == "UTC"
    assert props["hoodie.datasource.write.partitionpath.urlencode"] == "true"
    assert props["hoodie.datasource.write.hive_style_partitioning"] == "false"
    assert props["hoodie.datasource.write.drop.partition.columns"] == "false"
    assert props["hoodie.populate.meta.fields"] == "true"
    assert props["hoodie.table.checksum"] == "2378462329"  # crc32("sales.orders")
    before = raw
    table.initialize(config, schema)
    HudiTable(LocalFileSystem(), str(tmp_path) + "/").initialize(config, schema)
    assert (tmp_path / ".hoodie" / "hoodie.properties").read_text(encoding="ascii") == before
    assert HudiTableBuilder.from_base_uri(str(tmp_path)).build().table_name == "orders"


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"name": "other"}, "table.name"),
        ({"record_key_field": "country"}, "table.record_key_field"),
        ({"partition_field": None}, "table.partition_field"),
        ({"partition_field": "id"}, "table.partition_field"),
        ({"hive_style_partitioning": True}, "table.hive_style_partitioning"),
    ],
)
def test_initialize_rejects_a_different_table(
    tmp_path: Path, override: dict[str, Any], key: str
) -> None:
    _new_table(tmp_path)
    config = _config(tmp_path, **override)
    with pytest.raises(ConfigError) as info:
        HudiTable(LocalFileSystem(), str(tmp_path)).initialize(
            config, config.table_schema()
        )
    assert info.value.key == key


def test_initialize_rejects_other_versions(tmp_path: Path) -> None:
    table, config, schema = _new_table(tmp_path)
    path = tmp_path / ".hoodie" / "hoodie.properties"
    path.write_text(path.read_text().replace("hoodie.table.version=6", "hoodie.table.version=8"))
    with pytest.raises(TableFormatError):
        table.initialize(config, schema)


def test_timeline_ignores_unknown_files(tmp_path: Path) -> None:
    table, config, schema = _new_table(tmp_path)
    _commit(table, config, schema, T1, [("1", "sf")])
    meta = tmp_path / ".hoodie"
    (meta / "archived").mkdir()
    (meta / "archived" / f"{T3}.commit").write_text("{}")
    (meta / "20240101000000000.commit.bak").write_text("x")
    (meta / f".{T2}.commit.abc.tmp").write_text("x")
    (meta / "notes.txt").write_text("x")
    assert table.completed_commits() == [T1]
    assert table.pending_instants() == []
    assert table.latest_instant_time() == T1
    (meta / f"{T2}.replacecommit.requested").write_text("")
    assert table.latest_instant_time() == T2  # any action counts for monotonicity
    assert table.completed_commits() == [T1]


def test_commit_protocol_guards(tmp_path: Path) -> None:
    table, config, schema = _new_table(tmp_path)
    stats = _commit(table, config, schema, T1, [("1", "sf")])
    metadata = table.read_commit_metadata(T1)
    with pytest.raises(TableFormatError):
        table.complete_instant(T1, metadata)  # never overwrite a completed instant
    with pytest.raises(TableFormatError):
        table.rollback_instant(T1, [stats[0].path])  # never roll back committed data
    with pytest.raises(TableFormatError):
        table.start_instant(T1)
    with pytest.raises(TableFormatError):
        table.start_instant("20240101000000000")  # older than the latest completed commit
    with pytest.raises(TableFormatError):
        table.complete_instant(T2, metadata)  # never started
    with pytest.raises(TableFormatError):
        table.read_commit_metadata(T2)
    with pytest.raises(TableFormatError):
        table.start_instant("../../x")

    table.start_instant(T2)
    table.start_instant(T2)  # repeating a start is harmless
    staged = _stage(table, config, schema, T2, [("2", "la")])
    extra = {"schema": schema.avro_schema_json()}
    with pytest.raises(TableFormatError):  # listed file not in place yet
        table.complete_instant(T2, build_commit_metadata([s for _, s in staged], extra))
    with pytest.raises(TableFormatError):  # a T1 file cannot be committed as part of T2
        table.complete_instant(T2, build_commit_metadata(stats, extra))
    with pytest.raises(TableFormatError):  # another instant's file cannot be rolled back
        table.rollback_instant(T2, [stats[0].path])
    with pytest.raises(TableFormatError):
        table.rollback_instant(T2, [".hoodie/hoodie.properties"])
    table.rollback_instant(T2, [staged[0][1].path])  # not placed yet: deleting is a no-op
    with pytest.raises(TableFormatError):  # rolled back: a late completion must fail
        table.complete_instant(T2, build_commit_metadata([s for _, s in staged], extra))
    assert table.completed_commits() == [T1]
    assert _read(tmp_path) == {"1": "sf"}


def test_place_file_is_idempotent_and_refuses_mismatches(tmp_path: Path) -> None:
    table, config, schema = _new_table(tmp_path)
    table.start_instant(T1)
    (staged, stat), = _stage(table, config, schema, T1, [("1", "sf")])
    table.place_file(staged, stat)
    table.place_file(staged, stat)  # roll-forward after a crash: already in place
    assert (tmp_path / stat.path).stat().st_size == stat.file_size_bytes

    (staged2, stat2), = _stage(table, config, schema, T1, [("2", "la")], flush_no=1)
    wrong_size = WriteStat(stat2.file_id, stat2.path, stat2.partition_path, 1, 1, 1, 1)
    with pytest.raises(TableFormatError):
        table.place_file(staged2, wrong_size)
    assert not (tmp_path / "la").exists()  # nothing written before validation
    (tmp_path / "la").mkdir()
    (tmp_path / stat2.path).write_bytes(b"someone else's file")
    with pytest.raises(TableFormatError):
        table.place_file(staged2, stat2)
    assert os.path.exists(staged2)

    escaping = WriteStat(stat.file_id, f"../{os.path.basename(stat.path)}", "..", 1, 1, 1, 1)
    with pytest.raises(TableFormatError):
        table.place_file(staged, escaping)
    hidden = WriteStat(stat.file_id, f".hoodie/{os.path.basename(stat.path)}", ".hoodie", 1, 1,
                       1, 1)
    with pytest.raises(TableFormatError):
        table.place_file(staged, hidden)
    with pytest.raises(TableFormatError):
        table.place_file(str(tmp_path.parent / "outside.parquet"), stat)
    missing = WriteStat("abcdef01-x-0-0", f"sf/{base_file_name('abcdef01-x-0-0', '0-0-1', T1)}",
                        "sf", 1, 1, 10, 10)
    with pytest.raises(TableFormatError):
        table.place_file(table.staging_path(T1, "sf", "nothing.parquet"), missing)


def test_write_stat_json_and_commit_metadata() -> None:
    name = base_file_name("abcdef01-x-0-0", "0-0-1", T1)
    stat = WriteStat("abcdef01-x-0-0", f"sf/{name}", "sf", 3, 3, 1234, 1234)
    data = stat.to_json()
    assert data["prevCommit"] == "null"
    assert data["numWrites"] == 3 and data["numInserts"] == 3 and data["numDeletes"] == 0
    assert data["fileSizeInBytes"] == 1234 and data["totalWriteBytes"] == 1234
    for key in ("numUpdateWrites", "totalWriteErrors", "totalLogRecords", "totalLogBlocks",
                "totalCorruptLogBlock", "totalRollbackBlocks", "totalLogReadTimeMs", "numUpdates",
                "totalLogFilesCompacted", "totalLogSizeCompacted",
                "totalUpdatedRecordsCompacted"):
        assert data[key] == 0, key
    for key in ("minEventTime", "maxEventTime", "tempPath", "cdcStats", "runtimeStats",
                "baseFile", "logFiles", "logVersion", "logOffset", "totalLogFiles"):
        assert key in data and data[key] is None, key
    assert WriteStat.from_json(orjson.loads(orjson.dumps(data))) == stat
    with pytest.raises(TableFormatError):
        WriteStat.from_json({"fileId": 1})

    other = WriteStat("abcdef02-x-0-0", base_file_name("abcdef02-x-0-0", "0-0-1", T1), "", 1, 1,
                      5, 5)
    metadata = build_commit_metadata([stat, other], {"schema": "{}", "k": "v"})
    assert metadata["compacted"] is False
    assert metadata["operationType"] == "INSERT"
    assert metadata["extraMetadata"] == {"schema": "{}", "k": "v"}
    assert sorted(metadata["partitionToWriteStats"]) == ["", "sf"]
    with pytest.raises(ValueError):
        build_commit_metadata([stat], {})
    with pytest.raises(ValueError):
        build_commit_metadata([stat, stat], {"schema": "{}"})
    with pytest.raises(TableFormatError):  # path not in its partition
        build_commit_metadata([WriteStat(stat.file_id, f"la/{name}", "sf", 1, 1, 1, 1)],
                              {"schema": "{}"})


def test_properties_round_trip_java_syntax() -> None:
    props = {"a.b": 'x:y=z {"k":1} back\\slash', "lead": " space", "uni": "café 🚀", "e": ""}
    raw = format_properties(props)
    raw.decode("ascii")  # Java reads ISO-8859-1: everything else is \\u-escaped
    assert b"\\u00e9" in raw
    assert parse_properties(raw.decode("latin-1")) == props
    java = "# comment\n! other\nk1 = v1\nk2:v2\nk3 v3\nlong=a\\\n    b\n"
    assert parse_properties(java) == {"k1": "v1", "k2": "v2", "k3": "v3", "long": "ab"}


def test_every_metadata_file_is_written_through_a_durable_primitive(tmp_path: Path) -> None:
    """Properties, timeline and partition markers only ever come from ``write_atomic`` or
    ``create_exclusive`` (temp + fsync + rename/link + directory fsync), so none of them can be
    found truncated after a power loss; data files are moved by rename, synced by the caller."""
    fs = RecordingFileSystem()
    base = tmp_path / "orders"
    config = _config(base)
    schema = config.table_schema()
    table = HudiTable(fs, str(base))
    table.initialize(config, schema)
    _commit(table, config, schema, T1, [("a", "de"), ("b", "fr")])
    table.start_instant(T2)
    table.rollback_instant(T2)
    table.start_instant(T3)

    durable = {op[1] for op in fs.named("write_atomic", "create_exclusive")}
    renamed = {op[2] for op in fs.named("rename")}
    written = {str(p) for p in base.rglob("*") if p.is_file()}
    metadata = {p for p in written if not p.endswith(".parquet")}
    rolled_back = {f"{base}/.hoodie/{T2}.commit.requested", f"{base}/.hoodie/{T2}.inflight"}
    assert metadata == durable - rolled_back
    assert written - metadata == renamed
    assert {os.path.basename(p) for p in metadata} >= {
        "hoodie.properties", f"{T1}.commit", f"{T3}.inflight", ".hoodie_partition_metadata"}
