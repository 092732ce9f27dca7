"""A table's write mode is fixed when it is created: ``.hoodie/.sink/table.json`` records it (and
the key fields), and a config that disagrees is refused naming the key — by every service that
opens the table (``HudiTable.initialize``) and by ``config check`` (exit 2), which reads the
table without writing to it. The CLI runs in subprocesses, as an operator runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from hudi_sink.shared.config.settings import SinkConfig, config_from_mapping
from hudi_sink.shared.errors import ConfigError, TableFormatError
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.table_record import TableRecord, read_record
from hudi_sink.shared.storage.fs import LocalFileSystem

HUDI_SINK = str(Path(sys.executable).with_name("hudi-sink"))
DDL = "id STRING, seq BIGINT, day STRING, ts BIGINT"


def _config(base: Path, **table: Any) -> SinkConfig:
    return config_from_mapping({"table": {"base_path": str(base), "schema": DDL, **table}},
                               environ={})


def _create(base: Path, **table: Any) -> HudiTable:
    """Create the table as a service does at start."""
    config = _config(base, **table)
    hudi = HudiTable(LocalFileSystem(), str(base))
    hudi.initialize(config.table, config.table.table_schema())
    return hudi


def _refusal(base: Path, **table: Any) -> ConfigError:
    config = _config(base, **table)
    with pytest.raises(ConfigError) as error:
        HudiTable(LocalFileSystem(), str(base)).initialize(config.table, config.table.table_schema())
    return error.value


def _check(tmp_path: Path, table: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "check.yaml"
    path.write_text(yaml.safe_dump({"table": {"schema": DDL, **table}}), encoding="utf-8")
    return subprocess.run([HUDI_SINK, "config", "check", "--config", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_creation_records_the_mode_and_the_key_once(tmp_path: Path) -> None:
    base = tmp_path / "t"
    _create(base, write_mode="upsert", record_key_field="id, seq", precombine_field="ts")
    data = orjson.loads((base / layout.SINK_TABLE_FILE).read_bytes())
    assert data == {"write_mode": "upsert", "record_key_fields": ["id", "seq"],
                    "precombine_field": "ts", "kafka_partitions": None}
    props = (base / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.recordkey.fields=id,seq" in props
    _create(base, write_mode="upsert", record_key_field="id,seq", precombine_field="ts")  # again: same
    assert orjson.loads((base / layout.SINK_TABLE_FILE).read_bytes()) == data


def test_an_insert_table_cannot_switch_to_upsert(tmp_path: Path) -> None:
    base = tmp_path / "t"
    _create(base)
    error = _refusal(base, write_mode="upsert", record_key_field="id")
    assert error.key == "table.write_mode"
    assert str(error) == (f"table.write_mode: the table at {base} was created as insert; "
                          "table.write_mode: upsert cannot switch it")


def test_an_upsert_table_cannot_switch_to_insert_nor_change_its_key_or_ordering(tmp_path: Path) -> None:
    base = tmp_path / "t"
    _create(base, write_mode="upsert", record_key_field="id", precombine_field="ts")
    assert _refusal(base, record_key_field="id", precombine_field="ts").key == "table.write_mode"
    error = _refusal(base, write_mode="upsert", record_key_field="id,seq", precombine_field="seq")
    keys = [key for key, _ in error.problems]
    assert keys == ["table.record_key_field", "table.precombine_field"]
    assert "created with record key id;" in error.problems[0][1]
    assert "id,seq" in error.problems[0][1]


def test_a_table_created_before_records_is_an_insert_table(tmp_path: Path) -> None:
    base = tmp_path / "t"
    _create(base)
    (base / layout.SINK_TABLE_FILE).unlink()  # as every table created before this release
    _create(base)  # insert: accepted, nothing written
    assert read_record(LocalFileSystem(), str(base)) is None
    assert _refusal(base, write_mode="upsert", record_key_field="id").key == "table.write_mode"


def test_a_record_left_by_a_crash_before_the_properties_is_checked(tmp_path: Path) -> None:
    base = tmp_path / "t"
    (base / layout.SINK_DIR).mkdir(parents=True)
    (base / layout.SINK_TABLE_FILE).write_bytes(TableRecord("upsert", ("id",), None).to_json())
    assert _refusal(base).key == "table.write_mode"
    _create(base, write_mode="upsert", record_key_field="id")
    assert (base / ".hoodie" / "hoodie.properties").is_file()


def test_a_damaged_record_is_a_table_format_error(tmp_path: Path) -> None:
    base = tmp_path / "t"
    _create(base)
    (base / layout.SINK_TABLE_FILE).write_text('{"write_mode": "merge"}')
    with pytest.raises(TableFormatError, match="table.json"):
        _create(base)


def test_config_check_refuses_switching_an_existing_insert_table(tmp_path: Path) -> None:
    base = tmp_path / "t"
    _create(base)
    before = sorted(p.relative_to(base) for p in base.rglob("*"))
    result = _check(tmp_path, {"base_path": str(base), "write_mode": "upsert",
                               "record_key_field": "id"})
    assert result.returncode == 2, result.stdout + result.stderr
    assert (f"table.write_mode: the table at {base} was created as insert; table.write_mode: "
            "upsert cannot switch it") in result.stderr
    assert sorted(p.relative_to(base) for p in base.rglob("*")) == before  # read-only
    fine = _check(tmp_path, {"base_path": str(base)})
    assert fine.returncode == 0, fine.stderr
    assert f"# table: {base} exists, created as insert (record key id)" in fine.stdout


def test_config_check_refuses_a_changed_key_of_an_upsert_table(tmp_path: Path) -> None:
    base = tmp_path / "t"
    _create(base, write_mode="upsert", record_key_field="id")
    result = _check(tmp_path, {"base_path": str(base), "write_mode": "upsert",
                               "record_key_field": "id,seq"})
    assert result.returncode == 2
    assert "table.record_key_field: existing table has record key 'id'" in result.stderr


def test_config_check_refuses_upsert_without_an_explicit_key(tmp_path: Path) -> None:
    result = _check(tmp_path, {"base_path": str(tmp_path / "t"), "write_mode": "upsert"})
    assert result.returncode == 2
    assert "table.record_key_field: required with table.write_mode: upsert" in result.stderr
    assert not (tmp_path / "t").exists()
