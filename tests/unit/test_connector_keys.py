"""The one table of Kafka Connect / Hudi keys (``shared.config.connector_keys``): every rule is
well formed and points at real keys, Hudi's connector configuration (its demo file, a Connect
JSON body, a bare JSON object, ``.properties``) maps as the table says, MERGE_ON_READ and the
other refusals name the key with the reason, every problem of a file is reported at once,
``config check`` shows each key's fate, and the README's table agrees with the module."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from hudi_sink.cli.main import main
from hudi_sink.shared.config.connector_keys import KEYS, PREFIXES
from hudi_sink.shared.config.settings import SinkConfig, load_config
from hudi_sink.shared.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "fixtures" / "hudi-connect-config-sink.json"
SCHEMA_ENV = {"HUDI_SINK__TABLE__SCHEMA": "id STRING, volume BIGINT NOT NULL, date STRING, ts STRING"}
MOR_REASON = "MERGE_ON_READ tables are not written yet"


def _json(tmp_path: Path, body: Any, name: str = "sink.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def _demo(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(DEMO.read_text(encoding="utf-8"))
    body["config"]["hoodie.base.path"] = f"file://{tmp_path}/hoodie/hudi-test-topic"
    body["config"].update(changes)
    return body


def _has_path(path: tuple[str, ...]) -> bool:
    model: type[BaseModel] = SinkConfig
    for index, part in enumerate(path):
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        if part not in fields:
            return False
        annotation = fields[part].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        elif index != len(path) - 1:
            return False
    return True


def test_every_rule_is_well_formed_and_targets_real_keys() -> None:
    for key, rule in {**KEYS, **PREFIXES}.items():
        assert rule.status in ("mapped", "honoured", "ignored", "refused"), key
        assert rule.reason or rule.status == "mapped", f"{key}: an unexplained {rule.status}"
        assert bool(rule.paths) == (rule.status == "mapped"), key
        for path in (*rule.paths, *rule.also):
            assert _has_path(path), f"{key} → {'.'.join(path)} is no hudi-sink key"


def test_the_demo_file_with_copy_on_write_maps_every_key(tmp_path: Path) -> None:
    path = _json(tmp_path, _demo(tmp_path, **{"hoodie.table.type": "COPY_ON_WRITE"}))
    config = load_config(path, environ=SCHEMA_ENV)
    assert config.name == "hudi-sink"
    assert (config.kafka.bootstrap_servers, config.kafka.topics) == ("localhost:9092",
                                                                     ["hudi-test-topic"])
    assert config.kafka.value_format == "json"  # StringConverter, schemas.enable=false
    assert config.table.name == "hudi-test-topic"
    assert config.table.base_path == f"{tmp_path}/hoodie/hudi-test-topic"  # file:// dropped
    assert (config.table.record_key_field, config.table.partition_field) == ("volume", "date")
    assert (config.maintenance.archival.min_instants,
            config.maintenance.archival.max_instants) == (8, 10)  # JSON numbers, not strings
    assert config.maintenance.cleaner.commits_retained == 6


def test_the_newer_demo_spelling_maps_too(tmp_path: Path) -> None:
    """Hudi's later demo: ``hoodie.streamer.…registry.url`` and a commit interval as a number."""
    body = _demo(tmp_path, **{"hoodie.table.type": "COPY_ON_WRITE",
                              "hoodie.kafka.commit.interval.secs": 60})
    url = body["config"].pop("hoodie.deltastreamer.schemaprovider.registry.url")
    body["config"]["hoodie.streamer.schemaprovider.registry.url"] = url
    config = load_config(_json(tmp_path, body), environ=SCHEMA_ENV)
    assert config.transaction.interval_ms == 60_000


def test_the_untouched_demo_is_refused_for_merge_on_read_alone(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(DEMO, environ={})  # refused before its registry is ever asked
    assert caught.value.problems == [("hoodie.table.type", caught.value.problems[0][1])]
    assert MOR_REASON in caught.value.problems[0][1]
    assert "hoodie.table.type=COPY_ON_WRITE" in caught.value.problems[0][1]


@pytest.mark.parametrize("key", ["hoodie.table.type", "hoodie.datasource.write.table.type"])
def test_merge_on_read_is_refused_in_any_spelling(tmp_path: Path, key: str) -> None:
    path = tmp_path / "sink.properties"
    path.write_text(f"{key}=merge_on_read\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=MOR_REASON) as caught:
        load_config(path, environ=SCHEMA_ENV)
    assert caught.value.key == key


def test_connector_keys_and_their_values(tmp_path: Path) -> None:
    path = _json(tmp_path, {
        "hoodie.kafka.commit.interval.secs": "15",
        "hoodie.kafka.coordinator.write.timeout.secs": 120,
        "hoodie.kafka.control.topic": "hudi-control-topic",
        "hoodie.kafka.allow.commit.on.errors": False,
        "hoodie.kafka.compaction.async.enable": True,
        "hoodie.meta.sync.enable": "false",
        "hoodie.datasource.hive_sync.mode": "hms",
        "hoodie.schemaprovider.class": "org.apache.hudi.schema.FilebasedSchemaProvider",
        "hadoop.conf.dir": "/etc/hadoop",
        "hoodie.parquet.compression.codec": "zstd",
        "hoodie.clean.automatic": "true",
        "hoodie.cleaner.policy": "KEEP_LATEST_COMMITS",
        "hoodie.datasource.write.operation": "bulk_insert",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator",
        "table.record_key_field": "volume",  # hudi-sink's own key beside them
    })
    config = load_config(path, environ=SCHEMA_ENV)
    assert config.transaction.interval_ms == 15_000
    assert config.transaction.write_status_timeout_ms == 120_000
    assert config.control_topic == "hudi-control-topic"
    assert config.errors.tolerance == "fail"
    assert config.table.parquet_codec == "zstd"
    assert config.table.write_mode == "insert"
    assert config.table.record_key_field == "volume"


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("hoodie.meta.sync.enable", "true", "syncs no catalog"),
    ("topics.regex", "orders-.*", "list them in topics"),
    ("transforms", "unwrap", "single message transforms are not run"),
    ("transforms.unwrap.type", "io.debezium.transforms.ExtractNewRecordState",
     "single message transforms are not run"),
    ("hoodie.schemaprovider.class", "com.example.MyProvider", "not supported"),
    ("hoodie.cleaner.policy", "KEEP_LATEST_FILE_VERSIONS", "not supported"),
    ("hoodie.datasource.write.keygenerator.class",
     "org.apache.hudi.keygen.CustomKeyGenerator", "not supported"),
    ("hoodie.base.path", "file://relative/path", "absolute path"),
    ("hoodie.kafka.commit.interval.secs", "-1", "seconds >= 0"),
])
def test_refusals_name_the_key_and_the_reason(tmp_path: Path, key: str, value: str,
                                               reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_json(tmp_path, {key: value}), environ=SCHEMA_ENV)
    assert caught.value.key == key and reason in str(caught.value), caught.value


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    path = _json(tmp_path, _demo(tmp_path, **{"hoodie.keep.max.commits": "ten",
                                              "hoodie.cleaner.commit.retained": 6}))
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ=SCHEMA_ENV)
    problems = dict(caught.value.problems)
    assert set(problems) == {"hoodie.table.type", "hoodie.keep.max.commits",
                             "hoodie.cleaner.commit.retained"}
    assert "did you mean 'hoodie.cleaner.commits.retained'?" in problems[
        "hoodie.cleaner.commit.retained"]
    assert "(and 2 more problems)" in str(caught.value)


def test_two_keys_setting_one_value_differently_are_refused(tmp_path: Path) -> None:
    same = _json(tmp_path, {"hoodie.kafka.commit.interval.secs": 30,
                            "transaction.interval.ms": "30000"}, "same.json")
    assert load_config(same, environ=SCHEMA_ENV).transaction.interval_ms == 30_000
    apart = _json(tmp_path, {"hoodie.kafka.commit.interval.secs": 30,
                             "transaction.interval.ms": "5000"}, "apart.json")
    with pytest.raises(ConfigError, match="hoodie.kafka.commit.interval.secs already set"):
        load_config(apart, environ=SCHEMA_ENV)


def test_json_shapes(tmp_path: Path) -> None:
    """Connect's body (``name`` beside ``config``), a bare object of keys, and a YAML-shaped
    config written as JSON (sections), which stays hudi-sink's own structure."""
    body = _json(tmp_path, {"name": "orders-sink", "config": {"topics": "a,b"}}, "body.json")
    assert load_config(body, environ=SCHEMA_ENV).name == "orders-sink"
    assert load_config(body, environ=SCHEMA_ENV).kafka.topics == ["a", "b"]
    answer = _json(tmp_path, {"name": "n", "config": {"topics": "a"}, "type": "sink",
                              "tasks": [{"connector": "n", "task": 0}]}, "answer.json")
    assert load_config(answer, environ=SCHEMA_ENV).name == "n"  # GET /connectors/<name>
    bare = _json(tmp_path, {"topics": "a", "hoodie.table.name": "t"}, "bare.json")
    assert load_config(bare, environ=SCHEMA_ENV).table.name == "t"
    sections = _json(tmp_path, {"name": "s", "kafka": {"topics": ["x"]}}, "sections.json")
    assert load_config(sections, environ=SCHEMA_ENV).kafka.topics == ["x"]
    broken = tmp_path / "broken.json"
    broken.write_text("{\"topics\": ", encoding="utf-8")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        load_config(broken, environ=SCHEMA_ENV)


def test_properties_take_the_connector_keys_too(tmp_path: Path) -> None:
    path = tmp_path / "sink.properties"
    path.write_text("name=hudi-sink\ntopics=hudi-test-topic\nhoodie.table.type=COPY_ON_WRITE\n"
                    "hoodie.metadata.enable=true\nhoodie.keep.min.commits=8\n", encoding="utf-8")
    config = load_config(path, environ=SCHEMA_ENV)
    assert (config.name, config.maintenance.archival.min_instants) == ("hudi-sink", 8)


def test_config_check_lists_each_keys_fate(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SCHEMA_ENV.items():
        monkeypatch.setenv(name, value)
    body = _demo(tmp_path, **{"hoodie.table.type": "COPY_ON_WRITE",
                              "value.converter.basic.auth.user.info": "sink:s3cret"})
    path = _json(tmp_path, body)
    assert main(["config", "check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "s3cret" not in out
    rows = dict(re.findall(r"^#   (\S+) +(mapped|honoured|ignored) ", out, re.M))
    assert set(rows) == {"name", *body["config"]}
    assert rows["hoodie.metadata.enable"] == "ignored" and rows["hoodie.table.type"] == "honoured"
    assert re.search(r"hoodie\.keep\.min\.commits +mapped +\"8\"  → "
                     r"maintenance\.archival\.min_instants", out)

    assert main(["config", "check", "--config", str(path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    fates = {row["key"]: row for row in shown["keys"]}
    assert fates["hoodie.table.type"]["fate"] == "honoured"
    assert fates["value.converter.basic.auth.user.info"]["value"] == "<redacted>"
    assert fates["hoodie.cleaner.commits.retained"]["detail"].startswith(
        "→ maintenance.cleaner.commits_retained")


def test_readme_table_agrees_with_the_module() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### From Hudi's Kafka Connect sink", 1)[1].split("\n## ", 1)[0]
    rows = {key: status
            for keys, status in re.findall(r"^\| ((?:`[^`]+`(?:, )?)+) \|[^|]*\| "
                                           r"(mapped|honoured|ignored|refused)\b", section, re.M)
            for key in re.findall(r"`([^`]+)`", keys)}
    for key, rule in KEYS.items():
        assert rows.get(key) == rule.status, f"README row of {key}: {rows.get(key)} ≠ {rule.status}"
    for prefix, rule in PREFIXES.items():
        assert rows.get(f"{prefix}*") == rule.status, prefix


@pytest.mark.parametrize(("provider", "wanted"), [
    ("org.apache.hudi.schema.SchemaRegistryProvider", "registry.url"),
    ("org.apache.hudi.utilities.schema.FilebasedSchemaProvider", "source.schema.file")])
def test_a_schema_provider_without_its_source_is_refused(tmp_path: Path, provider: str,
                                                         wanted: str) -> None:
    """Else the table would get hudi-sink's default schema, which nobody chose."""
    path = _json(tmp_path, {"hoodie.schemaprovider.class": provider})
    with pytest.raises(ConfigError, match=f"hoodie.deltastreamer.schemaprovider.{wanted}") as caught:
        load_config(path, environ={})
    assert caught.value.key == "hoodie.schemaprovider.class"
    assert load_config(path, environ=SCHEMA_ENV).table.schema_ddl.startswith("id STRING")
