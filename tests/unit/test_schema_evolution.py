"""Schema evolution's rules (shared.schema.evolution), the writer-schema mappings, the
participant's verdicts per writer schema and the coordinator's merge of proposals."""

from __future__ import annotations

import orjson
import pytest
from registry_app import LocalRegistry

from hudi_sink.services.coordinator.table_schemas import TableSchemas
from hudi_sink.services.participant.connect_schema import connect_columns
from hudi_sink.services.participant.decoded import Deferred, Rejected
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.services.participant.writer_schemas import SchemaCheck, UnknownFieldLog, envelope_check
from hudi_sink.shared.config.settings import TableConfig, load_config
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.kafka.protocol import WriteStatus
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.runtime.states import PartitionPhase
from hudi_sink.shared.schema.avro_ddl import avro_columns
from hudi_sink.shared.schema.evolution import (
    CHANGES_KEY,
    DDL_KEY,
    IncompatibleChange,
    columns_ddl,
    evolve,
)
from hudi_sink.shared.schema.table_schema import TableSchema, parse_ddl

TABLE = "id STRING NOT NULL, qty INT, country STRING, price DECIMAL(10, 2), addr STRUCT<city: STRING>"


def _evolve(table: str, writer: str) -> tuple[str, tuple[str, ...]]:
    result = evolve(parse_ddl(table), parse_ddl(writer))
    return columns_ddl(result.columns), result.changes


def test_allowed_changes_evolve_the_columns_and_name_each_change() -> None:
    ddl, changes = _evolve(TABLE, "id STRING, qty BIGINT, coupon STRING NOT NULL, "
                                  "price DECIMAL(12, 2), addr STRUCT<city: STRING, zip: INT>")
    assert ddl == ("id STRING, qty BIGINT, country STRING, price DECIMAL(12, 2), "
                   "addr STRUCT<city: STRING, zip: INT>, coupon STRING")  # new: nullable, last
    assert changes == ("made id optional", "widened qty INT -> BIGINT",
                       "widened price DECIMAL(10, 2) -> DECIMAL(12, 2)", "added addr.zip INT",
                       "added coupon STRING")


def test_narrower_writer_types_and_dropped_nullable_fields_change_nothing() -> None:
    assert _evolve("id STRING NOT NULL, n BIGINT, d DOUBLE, p DECIMAL(10, 2), gone STRING",
                   "id STRING NOT NULL, n INT, d FLOAT, p DECIMAL(5, 2)") == (
        "id STRING NOT NULL, n BIGINT, d DOUBLE, p DECIMAL(10, 2), gone STRING", ())


@pytest.mark.parametrize(("writer", "field", "ours", "theirs"), [
    ("id STRING NOT NULL, country INT", "country", "STRING", "INT"),
    ("id STRING NOT NULL, qty DOUBLE", "qty", "INT", "DOUBLE"),
    ("id STRING NOT NULL, price DECIMAL(12, 3)", "price", "DECIMAL(10, 2)", "DECIMAL(12, 3)"),
    ("id STRING NOT NULL, addr STRUCT<city: INT>", "addr.city", "STRING", "INT"),
    ("ident STRING NOT NULL", "id", "STRING NOT NULL", "missing"),  # a renamed required field
])
def test_refused_changes_name_the_field_and_both_types(writer: str, field: str, ours: str,
                                                       theirs: str) -> None:
    with pytest.raises(IncompatibleChange) as refused:
        evolve(parse_ddl(TABLE), parse_ddl(writer))
    assert (refused.value.field, refused.value.table_type, refused.value.writer_type) == (
        field, ours, theirs)
    assert repr(field) in str(refused.value) and theirs in str(refused.value)


def test_columns_ddl_parses_back_to_the_same_columns() -> None:
    ddl = ("id STRING NOT NULL, tags ARRAY<STRING>, m MAP<STRING, DECIMAL(5, 1)>, "
           "s STRUCT<a: INT, b: STRUCT<c: TIMESTAMP>>, d DATE")
    assert tuple(parse_ddl(columns_ddl(parse_ddl(ddl)))) == tuple(parse_ddl(ddl))


def test_avro_and_connect_writer_schemas_map_onto_columns() -> None:
    avro = {"type": "record", "name": "o", "fields": [
        {"name": "id", "type": "string"}, {"name": "qty", "type": "long"},
        {"name": "coupon", "type": ["null", "string"]}, {"name": "blob", "type": "bytes"}]}
    columns, unmapped = avro_columns(avro)
    assert columns_ddl(columns) == "id STRING NOT NULL, qty BIGINT NOT NULL, coupon STRING"
    assert unmapped == ["blob"]
    connect = {"type": "struct", "fields": [
        {"field": "id", "type": "string", "optional": False},
        {"field": "addr", "type": "struct", "optional": True, "fields": [
            {"field": "city", "type": "string", "optional": True},
            {"field": "zip", "type": "int32", "optional": True}]},
        {"field": "at", "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp"},
        {"field": "raw", "type": "bytes"}]}
    columns, unmapped = connect_columns(connect)
    assert columns_ddl(columns) == ("id STRING NOT NULL, addr STRUCT<city: STRING, zip: INT>, "
                                    "at TIMESTAMP NOT NULL")
    assert unmapped == ["raw"]


def _schema(ddl: str) -> TableSchema:
    return TableSchema.parse(ddl, table_name="t", record_key_field="id")


def test_a_participant_defers_an_evolving_writer_schema_and_refuses_an_incompatible_one() -> None:
    check = SchemaCheck(_schema(TABLE), follow=True, unknown_log=UnknownFieldLog())
    fits = check.verdict("id 1", 1, lambda: (parse_ddl("id STRING NOT NULL, qty INT"), []))
    evolves = check.verdict("id 2", 2, lambda: (parse_ddl("id STRING NOT NULL, coupon STRING"), []))
    refused = check.verdict("id 3", 3, lambda: (parse_ddl("id STRING NOT NULL, country INT"), []))
    assert fits is None
    assert isinstance(evolves, Deferred) and evolves.schema is not None
    assert evolves.schema.endswith("coupon STRING") and "added coupon STRING" in evolves.reason
    assert isinstance(refused, Rejected) and refused.error_class == "SchemaIncompatible"
    assert "'country'" in refused.message and "INT" in refused.message and "STRING" in refused.message
    # Judged once per writer schema: the mapping is not asked again.
    assert check.verdict("id 2", 2, lambda: pytest.fail("judged twice")) is evolves


def test_a_fixed_ddl_ignores_unknown_fields_and_logs_them_once_per_writer_schema(
        caplog: pytest.LogCaptureFixture) -> None:
    unknown_log = UnknownFieldLog()
    for _ in range(2):  # two decoders (partitions) of one process
        check = SchemaCheck(_schema(TABLE), follow=False, unknown_log=unknown_log)
        assert check.verdict("id 7", 7, lambda: (parse_ddl("id STRING, coupon STRING"), ["blob"])) is None
    logged = [r.getMessage() for r in caplog.records if "coupon" in r.getMessage()]
    assert len(logged) == 1 and "id 7" in logged[0] and "coupon, blob" in logged[0]


def _status(partition: int, schema: str | None) -> WriteStatus:
    return WriteStatus(topic="orders", partition=partition, start_offset=0, next_offset=0,
                       table_schema=schema)


def test_the_coordinator_merges_proposals_into_the_commit_and_leaves_out_a_conflicting_one() -> None:
    config = load_config(None, environ={}, overrides={"table": {"schema": "id STRING NOT NULL, qty INT"}})
    schemas = TableSchemas(config, config.table.table_schema(), Metrics("unit"))
    evolution = schemas.plan([_status(0, "id STRING NOT NULL, qty BIGINT, coupon STRING"),
                              _status(1, None),
                              _status(2, "id STRING NOT NULL, qty INT, coupon INT"),  # conflicts
                              _status(3, "id STRING NOT NULL, qty INT, note STRING")])
    assert columns_ddl(evolution.columns) == "id STRING NOT NULL, qty BIGINT, coupon STRING, note STRING"
    assert evolution.changes == ("widened qty INT -> BIGINT", "added coupon STRING", "added note STRING")
    metadata = schemas.metadata(evolution)
    assert metadata[DDL_KEY] == columns_ddl(evolution.columns)
    assert metadata[CHANGES_KEY] == "; ".join(evolution.changes)
    assert '"coupon"' in metadata["schema"]
    assert schemas.ddl == "id STRING NOT NULL, qty INT"  # only a durable commit moves it
    schemas.committed(evolution, "20261127000000000")
    assert schemas.ddl == metadata[DDL_KEY]


def test_an_edited_table_schema_evolves_an_existing_table_or_exits_naming_the_column() -> None:
    committed = {DDL_KEY: "id STRING NOT NULL, amount DOUBLE"}
    config = load_config(None, environ={}, overrides={"table": {
        "schema": "id STRING NOT NULL, amount DOUBLE, coupon STRING"}})
    schemas = TableSchemas(config, config.table.table_schema(), Metrics("unit"))
    schemas.adopt(committed)
    assert schemas.pending == ("added coupon STRING",)
    # The table's columns the config no longer lists stay.
    config = load_config(None, environ={}, overrides={"table": {"schema": "id STRING NOT NULL"}})
    schemas = TableSchemas(config, config.table.table_schema(), Metrics("unit"))
    schemas.adopt(committed)
    assert (schemas.ddl, schemas.pending) == ("id STRING NOT NULL, amount DOUBLE", ())
    config = load_config(None, environ={}, overrides={"table": {
        "schema": "id STRING NOT NULL, amount STRING"}})
    schemas = TableSchemas(config, config.table.table_schema(), Metrics("unit"))
    with pytest.raises(ConfigError) as refused:
        schemas.adopt(committed)
    assert refused.value.key == "table.schema" and "'amount'" in str(refused.value)
    assert "DOUBLE" in str(refused.value) and "STRING" in str(refused.value)


def _envelope(offset: int, fields: dict[str, str], payload: dict[str, object]) -> object:
    schema = {"type": "struct", "fields": [{"field": name, "type": kind, "optional": name != "id"}
                                           for name, kind in fields.items()]}

    class Rec:
        value = orjson.dumps({"schema": schema, "payload": payload})
        key = None
        timestamp = 0

    Rec.offset = offset  # type: ignore[attr-defined]
    return Rec


def test_a_partition_stops_before_an_evolving_record_and_writes_it_with_the_next_instant() -> None:
    config = TableConfig(schema="id STRING NOT NULL, country STRING", record_key_field="id")
    unknown_log = UnknownFieldLog()

    def decoder_for(ddl: str | None, follow: bool | None) -> RecordDecoder:
        schema = config.table_schema(ddl)
        check = SchemaCheck(schema, follow=follow is not False, unknown_log=unknown_log)
        return RecordDecoder(schema, 1 << 20, connect_envelope=True,
                             envelope_check=envelope_check(check))

    state = TransactionParticipant(topic="orders", partition=0, decoder=decoder_for(None, None),
                                   decoder_for=decoder_for, flush_records=100, fail_on_error=False)
    state.begin("20261127000000001", 1, 0)
    v1 = {"id": "string", "country": "string"}
    v2 = {**v1, "coupon": "string"}
    state.accept([_envelope(0, v1, {"id": "a", "country": "de"}),
                  _envelope(1, v2, {"id": "b", "country": "fr", "coupon": "X"}),
                  _envelope(2, v1, {"id": "c", "country": "de"})])
    assert state.next_offset == 1
    assert state.proposed_schema == "id STRING NOT NULL, country STRING, coupon STRING"
    assert state.deferred is not None and "added coupon STRING" in state.deferred
    status = state.build_status()
    assert (status.next_offset, status.table_schema) == (1, state.proposed_schema)
    first = state.take_buffer()
    assert first is not None and first.schema is not None and len(first.schema.columns) == 2

    state.drain(0.0)
    state.end()
    state.reported(status)
    state.acked(1)
    assert state.phase is PartitionPhase.WAITING
    state.begin("20261127000000002", 1, 1, status.table_schema)
    state.accept([_envelope(1, v2, {"id": "b", "country": "fr", "coupon": "X"}),
                  _envelope(2, v1, {"id": "c", "country": "de"}),
                  _envelope(3, {"id": "string", "country": "int32"}, {"id": "d", "country": 4})])
    assert state.next_offset == 4 and state.proposed_schema is None
    buffer = state.take_buffer()
    assert buffer is not None and buffer.schema is not None
    assert [c.name for c in buffer.schema.columns] == ["id", "country", "coupon"]
    assert [r.values for r in buffer.rows] == [{"id": "b", "country": "fr", "coupon": "X"},
                                               {"id": "c", "country": "de", "coupon": None}]
    [letter] = state.take_dead_letters()
    assert letter.error_class == "SchemaIncompatible" and "'country'" in letter.message


@pytest.mark.parametrize(("overrides", "key"), [
    ({"table": {"schema_source": "registry"}}, "table.schema_source"),  # plain JSON
    ({"table": {"schema_source": "registry"}, "kafka": {"value_format": "connect_json",
                                                        "envelope": "debezium"}},
     "table.schema_source"),
    ({"table": {"schema_source": "registry"}, "kafka": {"value_format": "avro"},
      "avro": {"schema_file": __file__, "schema_id": 1}}, "avro.registry_url"),
])
def test_a_registry_source_without_writer_schemas_to_follow_is_refused(
        overrides: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(None, environ={}, overrides=overrides)
    assert refused.value.key == key


def test_a_registry_sourced_table_is_created_from_its_subjects_latest_version() -> None:
    order = {"type": "record", "name": "o", "fields": [
        {"name": "id", "type": "string"}, {"name": "qty", "type": ["null", "long"]}]}
    other = {"type": "record", "name": "p", "fields": [{"name": "id", "type": "string"}]}
    with LocalRegistry({1: order, 2: other}, subjects={"orders-value": 1, "mine": 2}) as registry:
        def table(**avro: str) -> str:
            return load_config(None, environ={}, overrides={
                "kafka": {"value_format": "avro", "topics": ["orders"]},
                "table": {"schema_source": "registry"},
                "avro": {"registry_url": registry.url, **avro}}).table.schema_ddl

        assert table() == "id STRING NOT NULL, qty BIGINT"  # TopicNameStrategy: <topic>-value
        assert table(subject="mine") == "id STRING NOT NULL"
        with pytest.raises(ConfigError) as missing:
            table(subject="nobody")
        assert missing.value.key == "table.schema_source" and "'nobody'" in str(missing.value)


def test_a_writer_schema_whose_evolution_would_break_the_table_is_refused_not_deferred() -> None:
    """Deferred, it would be proposed and left out of every commit: stuck for ever."""
    table = TableSchema.parse("id STRING NOT NULL", table_name="t", record_key_field="id",
                              kafka_metadata=True)
    check = SchemaCheck(table, follow=True, unknown_log=UnknownFieldLog())
    verdict = check.verdict("id 5", 5, lambda: (parse_ddl("id STRING NOT NULL, _kafka_topic STRING"), []))
    assert isinstance(verdict, Rejected) and verdict.error_class == "SchemaIncompatible"
    assert "_kafka_topic" in verdict.message


def test_a_registry_subject_the_table_cannot_follow_leaves_the_committed_schema(
        caplog: pytest.LogCaptureFixture) -> None:
    """The subject's latest version is the config's schema of a registry-sourced table: a
    refused change there is the data's writer schemas' to refuse, record by record."""
    config = load_config(None, environ={}, overrides={"kafka": {"value_format": "connect_json"},
                                                      "table": {"schema_source": "registry",
                                                                "schema": "id STRING NOT NULL, n STRING"}})
    schemas = TableSchemas(config, config.table.table_schema(), Metrics("unit"))
    schemas.adopt({DDL_KEY: "id STRING NOT NULL, n BIGINT, extra STRING"})
    assert (schemas.ddl, schemas.pending, schemas.follow) == (
        "id STRING NOT NULL, n BIGINT, extra STRING", (), True)
    assert any("'n'" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")
