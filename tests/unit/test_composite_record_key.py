"""Composite record keys (``table.record_key_field: a,b``): parsed and checked against the
schema naming the key, spelt exactly as Hudi's ComplexKeyGenerator spells them (``a:1,b:2``,
``__null__``, ``__empty__``), built by the decoder and written to ``_hoodie_record_key``."""

from __future__ import annotations

import json

import pytest

from hudi_sink.services.participant.decoded import Rejected, Row
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.flush_plan import FlushInput, plan_flush
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.errors import SchemaError
from hudi_sink.shared.hudi.record_key import record_key_string, split_key_fields
from hudi_sink.shared.schema.table_schema import TableSchema

DDL = "tenant STRING, n BIGINT, flag BOOLEAN, label STRING, day STRING"


def _schema(key: str, partition: str | None = None) -> TableSchema:
    return TableConfig(schema=DDL, record_key_field=key, partition_field=partition).table_schema()


def test_fields_split_on_commas_with_blanks_dropped_and_empty_names_refused() -> None:
    assert split_key_fields(" tenant , n ") == ("tenant", "n")
    assert split_key_fields("id") == ("id",)
    for bad in ("a,,b", "a,", "", " , "):
        with pytest.raises(ValueError, match="empty field name"):
            split_key_fields(bad)
    with pytest.raises(ValueError, match="a more than once"):
        split_key_fields("a,b,a")


def test_the_config_keeps_one_spelling_and_a_tuple() -> None:
    table = TableConfig(schema=DDL, record_key_field=" tenant ,n")
    assert table.record_key_field == "tenant,n"
    assert table.record_key_fields == ("tenant", "n")
    assert TableConfig(schema=DDL, record_key_field="tenant").record_key_fields == ("tenant",)
    schema = table.table_schema()
    assert schema.record_key_field == "tenant,n" and schema.record_key_fields == ("tenant", "n")


def test_every_key_field_must_be_a_column_and_the_error_names_the_key_and_the_field() -> None:
    with pytest.raises(SchemaError) as error:
        TableConfig(schema=DDL, record_key_field="tenant,nope").table_schema()
    assert error.value.key == "table.record_key_field"
    assert "'nope'" in str(error.value)


@pytest.mark.parametrize(("values", "expected"), [
    ({"tenant": "t1", "n": 1}, "tenant:t1,n:1"),
    ({"tenant": None, "n": 2}, "tenant:__null__,n:2"),
    ({"tenant": "", "n": 2}, "tenant:__empty__,n:2"),
    ({"n": 2}, "tenant:__null__,n:2"),  # absent counts as null
    ({"tenant": "x", "n": None}, "tenant:x,n:__null__"),
    ({"tenant": "__null__", "n": None}, "tenant:__null__,n:__null__"),  # a value, not a null
    ({"tenant": "a:b,c", "n": 0}, "tenant:a:b,c,n:0"),  # Hudi does not escape either
])
def test_a_composite_key_is_hudis_complex_key_form(values: dict[str, object], expected: str) -> None:
    assert record_key_string(values, ("tenant", "n")) == expected


def test_a_key_of_only_nulls_and_empties_is_no_key() -> None:
    assert record_key_string({"tenant": None, "n": None}, ("tenant", "n")) is None
    assert record_key_string({"tenant": "", "n": None}, ("tenant", "n")) is None
    assert record_key_string({"tenant": ""}, ("tenant",)) is None
    assert record_key_string({"flag": False}, ("flag",)) == "false"  # Java's text, not Python's


def test_the_decoder_builds_the_composite_key() -> None:
    decoder = RecordDecoder(_schema("tenant, n, flag"), 1 << 20)
    row = decoder.decode(json.dumps({"tenant": "t1", "n": 7, "flag": True, "x": 1}).encode())
    assert isinstance(row, Row)
    assert row.record_key == "tenant:t1,n:7,flag:true"
    row = decoder.decode(json.dumps({"tenant": "", "n": 7}).encode())
    assert isinstance(row, Row) and row.record_key == "tenant:__empty__,n:7,flag:__null__"


def test_a_composite_key_without_any_value_is_a_missing_record_key_naming_the_fields() -> None:
    decoder = RecordDecoder(_schema("tenant,n"), 1 << 20)
    result = decoder.decode(json.dumps({"tenant": "", "label": "x"}).encode())
    assert isinstance(result, Rejected) and result.error_class == "MissingRecordKey"
    assert "'tenant'" in result.message and "'n'" in result.message


def test_a_single_key_keeps_its_text() -> None:
    decoder = RecordDecoder(_schema("n"), 1 << 20)
    row = decoder.decode(b'{"n": 42}')
    assert isinstance(row, Row) and row.record_key == "42"
    result = decoder.decode(b'{"tenant": "t"}')
    assert isinstance(result, Rejected) and result.error_class == "MissingRecordKey"
    assert "'n'" in result.message


def test_the_flush_writes_the_composite_key_to_the_meta_column() -> None:
    schema = _schema("tenant,label", partition="day")
    decoder = RecordDecoder(schema, 1 << 20)
    decoded = [decoder.decode(json.dumps(v).encode()) for v in (
        {"tenant": "t1", "label": "a", "day": "d1"},
        {"tenant": "t2", "label": None, "day": "d1"},
        {"tenant": "t1", "label": "", "day": "d2"},
    )]
    rows = [r for r in decoded if isinstance(r, Row)]
    assert len(rows) == 3
    spec = FlushInput(topic="t", partition=0, source_index=0, instant="20250101000000001",
                      flush_no=0, writer_nonce=1, staging_dir="/t/.hoodie/.temp/20250101000000001",
                      hive_style=False)
    table, _ = plan_flush(rows, [0, 1, 2], schema, spec)
    assert table.column("_hoodie_record_key").to_pylist() == [
        "tenant:t1,label:a", "tenant:t2,label:__null__", "tenant:t1,label:__empty__"]
