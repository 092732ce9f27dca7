"""What upsert mode asks of the table's services and of its data topic: the cleaner stays on
(superseded slices), clustering stays off (it would race the groups' owners) — refused by
``config check`` beside the config's other problems, each naming its key, and by
``POST /maintenance/clustering`` — and the data topic's partition count is kept in the
table's record (``kafka_partitions``): recorded once, then compared (a changed count re-maps
keys). The CLI runs in subprocesses, as an operator runs it; the record is a real file."""

from __future__ import annotations

import os
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
from hudi_sink.shared.hudi.table_record import keep_kafka_partitions, read_record
from hudi_sink.shared.storage.fs import LocalFileSystem

HUDI_SINK = str(Path(sys.executable).with_name("hudi-sink"))
DDL = "id STRING, seq BIGINT, ts BIGINT"
UPSERT = {"write_mode": "upsert", "record_key_field": "id", "schema": DDL}


def _check(tmp_path: Path, data: dict[str, Any],
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "check.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return subprocess.run([HUDI_SINK, "config", "check", "--config", str(path)],
                          capture_output=True, text=True, timeout=120, env=env)


def _lines(stderr: str) -> dict[str, str]:
    """``config check``'s problems by key (one line each, indented under the count)."""
    found = {}
    for line in stderr.splitlines():
        key, sep, message = line.strip().removeprefix("hudi-sink: configuration error: ") \
            .partition(": ")
        if sep and "." in key and " " not in key:
            found[key] = message
    return found


def test_config_check_refuses_upsert_without_the_cleaner_and_with_clustering(
        tmp_path: Path) -> None:
    result = _check(tmp_path, {
        "table": {**UPSERT, "base_path": str(tmp_path / "t"), "small_file_bytes": -1},
        "maintenance": {"cleaner": {"enabled": False}, "clustering": {"enabled": True}}})
    assert result.returncode == 2, result.stdout + result.stderr
    problems = _lines(result.stderr)
    assert {"maintenance.cleaner.enabled", "maintenance.clustering.enabled",
            "table.small_file_bytes"} <= set(problems), result.stderr  # all of them, at once
    assert "pile up forever" in problems["maintenance.cleaner.enabled"]
    assert "table.write_mode: upsert" in problems["maintenance.cleaner.enabled"]
    clustering = problems["maintenance.clustering.enabled"]
    assert "race the owners' new slices" in clustering and "table.small_file_bytes" in clustering
    assert not (tmp_path / "t").exists()


def test_config_check_refuses_the_cleaner_switched_off_by_the_environment(tmp_path: Path) -> None:
    env = {**os.environ, "HUDI_SINK__MAINTENANCE__CLEANER__ENABLED": "false"}
    result = _check(tmp_path, {"table": {**UPSERT, "base_path": str(tmp_path / "t")}}, env)
    assert result.returncode == 2
    assert "maintenance.cleaner.enabled: false is refused with table.write_mode: upsert" \
        in result.stderr
    assert "maintenance.clustering.enabled" not in result.stderr


def test_insert_mode_keeps_both_choices(tmp_path: Path) -> None:
    result = _check(tmp_path, {"table": {"base_path": str(tmp_path / "t"), "schema": DDL},
                               "maintenance": {"cleaner": {"enabled": False}}})
    assert result.returncode == 0, result.stderr
    config = config_from_mapping({"table": {"schema": DDL},
                                  "maintenance": {"clustering": {"enabled": True}}}, environ={})
    assert config.maintenance.clustering.enabled


def test_config_check_of_an_upsert_table_not_created_yet_says_so(tmp_path: Path) -> None:
    """No table yet is no insert table: nothing at ``base_path`` was created as anything."""
    result = _check(tmp_path, {"table": {**UPSERT, "base_path": str(tmp_path / "t")}})
    assert "was created as" not in result.stderr
    assert result.returncode == 0, result.stderr
    assert (f"# table: {tmp_path / 't'} does not exist yet: the first service to start "
            "creates it (upsert, record key id)") in result.stdout


def test_upsert_defaults_pass_the_rules() -> None:
    config = config_from_mapping({"table": UPSERT}, environ={
        "HUDI_SINK__MAINTENANCE__CLEANER__ENABLED": "true",
        "HUDI_SINK__MAINTENANCE__CLUSTERING__ENABLED": "false"})
    assert config.maintenance.cleaner.enabled and not config.maintenance.clustering.enabled


# --- the data topic's partition count in the table's record ---------------------------------

def _config(base: Path, **table: Any) -> SinkConfig:
    return config_from_mapping({"table": {**UPSERT, "base_path": str(base), **table}}, environ={})


def _create(base: Path, kafka_partitions: int | None = None, **table: Any) -> None:
    config = _config(base, **table)
    HudiTable(LocalFileSystem(), str(base)).initialize(
        config.table, config.table.table_schema(), kafka_partitions=kafka_partitions)


def _record(base: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((base / layout.SINK_TABLE_FILE).read_bytes())
    return data


def test_a_table_created_knowing_the_count_records_it(tmp_path: Path) -> None:
    base = tmp_path / "t"
    _create(base, kafka_partitions=6, precombine_field="ts")
    assert _record(base) == {"write_mode": "upsert", "record_key_fields": ["id"],
                             "precombine_field": "ts", "kafka_partitions": 6}
    assert keep_kafka_partitions(LocalFileSystem(), str(base), "orders", 6) == 6
    _create(base, kafka_partitions=9, precombine_field="ts")  # exists: creation facts stay
    assert _record(base)["kafka_partitions"] == 6


def test_the_first_start_that_knows_the_count_records_it_keeping_the_other_fields(
        tmp_path: Path) -> None:
    base = tmp_path / "t"
    _create(base, record_key_field="id,seq", precombine_field="ts")  # a participant created it
    assert _record(base)["kafka_partitions"] is None
    assert keep_kafka_partitions(LocalFileSystem(), str(base), "orders", 4) == 4
    assert _record(base) == {"write_mode": "upsert", "record_key_fields": ["id", "seq"],
                             "precombine_field": "ts", "kafka_partitions": 4}
    assert list((base / layout.SINK_DIR).iterdir()) == [base / layout.SINK_TABLE_FILE]  # no temp
    _create(base, record_key_field="id,seq", precombine_field="ts")  # still the table it was
    record = read_record(LocalFileSystem(), str(base))
    assert record is not None and record.kafka_partitions == 4


def test_another_count_is_refused_naming_the_topic_both_counts_and_the_way_out(
        tmp_path: Path) -> None:
    base = tmp_path / "t"
    _create(base, kafka_partitions=4)
    before = (base / layout.SINK_TABLE_FILE).read_bytes()
    with pytest.raises(ConfigError) as error:
        keep_kafka_partitions(LocalFileSystem(), str(base), "orders", 6)
    assert error.value.key == "kafka.topics"
    line = str(error.value)
    assert line.startswith(f"kafka.topics: topic 'orders' has 6 partitions, but the upsert "
                           f"table at {base} recorded 4")
    assert "another table.base_path" in line and "\n" not in line
    assert (base / layout.SINK_TABLE_FILE).read_bytes() == before  # never re-recorded


def test_an_insert_table_keeps_no_count(tmp_path: Path) -> None:
    base = tmp_path / "t"
    config = config_from_mapping({"table": {"base_path": str(base), "schema": DDL}}, environ={})
    HudiTable(LocalFileSystem(), str(base)).initialize(config.table, config.table.table_schema())
    with pytest.raises(TableFormatError, match="no upsert table"):
        keep_kafka_partitions(LocalFileSystem(), str(base), "orders", 3)
    assert _record(base)["kafka_partitions"] is None
