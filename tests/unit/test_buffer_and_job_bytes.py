"""``transaction.flush_bytes`` split into its two meanings: ``transaction.buffer_bytes`` (a
partition's buffer flushes at this many value bytes) and ``spark.job_bytes`` (at most this
much Arrow data per shared Spark job). The old key still works exactly as before — it sets
both while ``spark.job_bytes`` is unset — and says it is deprecated, at load and in ``config
check``; old and new together are refused, naming the keys."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from hudi_sink.cli.config_check import check_config, render_json, render_yaml
from hudi_sink.services.participant.service import ParticipantService
from hudi_sink.shared.config.deprecated import deprecations
from hudi_sink.shared.config.settings import SinkConfig, config_from_mapping, load_config
from hudi_sink.shared.errors import ConfigError

MIB = 1 << 20


def _config(tmp_path: Path, environ: dict[str, str] | None = None, **sections: Any) -> SinkConfig:
    return config_from_mapping({"table": {"base_path": str(tmp_path)}, **sections},
                               environ=environ or {})


def _wired(config: SinkConfig) -> tuple[int, int]:
    """What a participant built from ``config`` really uses: a new partition's buffer bound
    and its Spark jobs' bound (nothing is started: no Kafka, no JVM)."""
    service = ParticipantService(config)
    return (service._new_partition("orders", 0).buffer_bytes,
            service._flusher._jobs._max_job_bytes)


def test_defaults_keep_one_bound_of_24_mib_for_both(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert config.transaction.buffer_bytes == 24 * MIB and config.spark.job_bytes is None
    assert config.spark_job_bytes == 24 * MIB and _wired(config) == (24 * MIB, 24 * MIB)
    assert deprecations(config) == []


def test_the_old_key_alone_sets_both_as_before_and_is_reported(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hudi_sink.config"):
        config = _config(tmp_path, transaction={"flush_bytes": 3 * MIB})
    assert config.transaction.buffer_bytes == 3 * MIB and config.spark_job_bytes == 3 * MIB
    assert _wired(config) == (3 * MIB, 3 * MIB)
    [note] = deprecations(config)
    assert "transaction.flush_bytes is deprecated" in note and "transaction.buffer_bytes" in note
    assert "spark.job_bytes" in note
    assert note in caplog.messages


def test_the_old_key_with_spark_job_bytes_bounds_only_the_buffer(tmp_path: Path) -> None:
    config = _config(tmp_path, transaction={"flush_bytes": 2 * MIB}, spark={"job_bytes": 8 * MIB})
    assert _wired(config) == (2 * MIB, 8 * MIB)


def test_the_two_new_keys_are_independent(tmp_path: Path) -> None:
    config = _config(tmp_path, transaction={"buffer_bytes": 2 * MIB}, spark={"job_bytes": 64 * MIB})
    assert _wired(config) == (2 * MIB, 64 * MIB) and deprecations(config) == []
    only_buffer = _config(tmp_path, transaction={"buffer_bytes": 5 * MIB})
    assert _wired(only_buffer) == (5 * MIB, 5 * MIB)  # job_bytes unset follows the buffer


def test_the_old_key_from_the_environment_works_too(tmp_path: Path) -> None:
    config = _config(tmp_path, {"HUDI_SINK__TRANSACTION__FLUSH_BYTES": str(4 * MIB)})
    assert _wired(config) == (4 * MIB, 4 * MIB) and len(deprecations(config)) == 1


@pytest.mark.parametrize("file, environ", [
    ({"transaction": {"flush_bytes": MIB, "buffer_bytes": MIB}}, {}),
    ({"transaction": {"buffer_bytes": 2 * MIB}}, {"HUDI_SINK__TRANSACTION__FLUSH_BYTES": str(MIB)}),
])
def test_old_and_new_key_together_are_refused_naming_both(
        tmp_path: Path, file: dict[str, Any], environ: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(tmp_path, environ, **file)
    assert caught.value.key == "transaction"
    assert "transaction.flush_bytes" in str(caught.value)
    assert "transaction.buffer_bytes" in str(caught.value)


@pytest.mark.parametrize("section, value, key", [
    ("transaction", {"flush_bytes": 512}, "transaction.flush_bytes"),
    ("transaction", {"buffer_bytes": 512}, "transaction.buffer_bytes"),
    ("spark", {"job_bytes": 512}, "spark.job_bytes"),
    ("transaction", {"flush_bytes": "many"}, "transaction.flush_bytes"),
])
def test_a_bad_value_names_the_key_that_was_written(
        tmp_path: Path, section: str, value: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(tmp_path, **{section: value})
    assert caught.value.key == key


def test_config_check_lists_the_old_key_and_shows_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "sink.yaml"
    path.write_text(yaml.safe_dump({"table": {"base_path": str(tmp_path / "t")},
                                    "transaction": {"flush_bytes": 3 * MIB}}))
    checked = check_config(path, environ={})
    assert checked.data["transaction"]["buffer_bytes"] == 3 * MIB
    assert "flush_bytes" not in checked.data["transaction"]
    assert checked.sources[("transaction", "buffer_bytes")] == "file"
    rendered = render_yaml(checked, str(path))
    assert "# deprecated: transaction.flush_bytes is deprecated" in rendered
    assert f"buffer_bytes: {3 * MIB}  # file" in rendered
    assert json.loads(render_json(checked))["deprecated"] == deprecations(checked.config)
    # What check prints is the renamed config: it loads to the same bounds, with no note.
    again = tmp_path / "again.yaml"
    again.write_text("\n".join(line for line in rendered.splitlines()
                               if not line.startswith("#")))
    renamed = load_config(again, environ={})
    assert _wired(renamed) == (3 * MIB, 3 * MIB) and deprecations(renamed) == []


def test_config_check_attributes_the_old_key_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "sink.yaml"
    path.write_text(yaml.safe_dump({"table": {"base_path": str(tmp_path / "t")}}))
    checked = check_config(path, environ={"HUDI_SINK__TRANSACTION__FLUSH_BYTES": str(MIB)})
    assert checked.sources[("transaction", "buffer_bytes")] == "env"
    assert len(checked.deprecated) == 1
