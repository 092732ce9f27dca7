"""A record's meaning for its key in upsert mode: upsert, soft delete, delete by key, or a bad
record — for plain values, tombstones and Debezium envelopes (JSON without schemas, Connect
JSON with schemas through the real envelope parser, Avro through the real Avro reader)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from registry_app import confluent_avro

from hudi_sink.services.participant.avro_format import AvroValues
from hudi_sink.services.participant.decoded import Rejected
from hudi_sink.services.participant.json_format import parse_connect_envelope, parse_object
from hudi_sink.services.participant.keyed.envelope import (
    DEBEZIUM_DELETE,
    TOMBSTONE,
    KeyDelete,
    KeyedSpec,
    RowChange,
    read_change,
)

PLAIN = KeyedSpec(key_fields=("id",))
DEBEZIUM = KeyedSpec(key_fields=("order_id", "line"), envelope="debezium", kafka_key_format="json")

ROW_FIELDS = [
    {"type": "int64", "optional": False, "field": "order_id"},
    {"type": "int32", "optional": False, "field": "line"},
    {"type": "string", "optional": True, "field": "sku"},
    {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "field": "ts"},
]
CONNECT_SCHEMA = {
    "type": "struct", "optional": False, "name": "shop.public.lines.Envelope",
    "fields": [
        {"type": "struct", "optional": True, "field": "before", "name": "shop.public.lines.Value",
         "fields": ROW_FIELDS},
        {"type": "struct", "optional": True, "field": "after", "name": "shop.public.lines.Value",
         "fields": ROW_FIELDS},
        {"type": "struct", "optional": False, "field": "source",
         "name": "io.debezium.connector.postgresql.Source",
         "fields": [{"type": "string", "optional": False, "field": "connector"},
                    {"type": "int64", "optional": True, "field": "lsn"}]},
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
    ],
}
KEY_SCHEMA = {"type": "struct", "optional": False, "name": "shop.public.lines.Key",
              "fields": ROW_FIELDS[:2]}
SOURCE = {"connector": "postgresql", "lsn": 24023128}


def event(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
    return {"before": before, "after": after, "source": SOURCE, "op": op, "ts_ms": 1700000000000}


def with_schema(payload: Any, schema: dict[str, Any]) -> bytes:
    return orjson.dumps({"schema": schema, "payload": payload})


def row(order_id: int, line: int, sku: str = "A") -> dict[str, Any]:
    return {"order_id": order_id, "line": line, "sku": sku, "ts": 1700000000000000}


KEY_1_2 = with_schema({"order_id": 1, "line": 2}, KEY_SCHEMA)


# --- plain values ------------------------------------------------------------------------

def test_plain_value_is_an_upsert() -> None:
    value = {"id": "k", "x": 1}
    assert read_change(value, b"k", PLAIN) == RowChange(value, delete=False)


def test_tombstone_with_string_key_deletes_that_key() -> None:
    change = read_change(None, b"order-7", PLAIN)
    assert change == KeyDelete("order-7", {"id": "order-7"}, TOMBSTONE)


@pytest.mark.parametrize(("key", "expected"), [
    (b'{"id": 7}', "7"),
    (b'{"schema": {"type": "struct"}, "payload": {"id": "x"}}', "x"),
    (b'"x"', "x"),  # a scalar JSON key for a one-field key
    (b"7", "7"),
])
def test_tombstone_with_json_key(key: bytes, expected: str) -> None:
    spec = KeyedSpec(key_fields=("id",), kafka_key_format="json")
    change = read_change(None, key, spec)
    assert isinstance(change, KeyDelete) and change.record_key == expected
    assert change.source == TOMBSTONE


def test_tombstone_with_composite_json_key() -> None:
    change = read_change(None, KEY_1_2, DEBEZIUM)
    assert change == KeyDelete("order_id:1,line:2", {"order_id": 1, "line": 2}, TOMBSTONE)


def test_tombstone_with_composite_string_key_must_be_the_complex_form() -> None:
    spec = KeyedSpec(key_fields=("a", "b"))
    assert read_change(None, b"a:1,b:x,y", spec) == KeyDelete("a:1,b:x,y", None, TOMBSTONE)
    bad = read_change(None, b"1,2", spec)
    assert isinstance(bad, Rejected) and bad.error_class == "MissingRecordKey"
    assert "'1,2'" in bad.message and "a:…,b:…" in bad.message


@pytest.mark.parametrize(("key", "spec", "error_class", "words"), [
    (None, PLAIN, "MissingRecordKey", "no Kafka message key"),
    (b"", PLAIN, "MissingRecordKey", "empty Kafka message key"),
    (b"\xff\xfe", PLAIN, "InvalidUtf8", "not valid UTF-8"),
    (b"{nope", DEBEZIUM, "InvalidJson", "not valid JSON"),
    (b"[1, 2]", DEBEZIUM, "NotAnObject", "must be an object"),
    (b"7", DEBEZIUM, "NotAnObject", "['order_id', 'line']"),
    (b'{"other": 1}', DEBEZIUM, "MissingRecordKey", "['order_id', 'line']"),
    (b'{"schema": {}, "payload": null}', DEBEZIUM, "NotAnObject", "got null"),
])
def test_tombstone_without_a_usable_key_is_a_bad_record(
        key: bytes | None, spec: KeyedSpec, error_class: str, words: str) -> None:
    bad = read_change(None, key, spec)
    assert isinstance(bad, Rejected), bad
    assert bad.error_class == error_class and words in bad.message
    assert "tombstone" in bad.message


# --- soft deletes ------------------------------------------------------------------------

@pytest.mark.parametrize(("field_value", "marker", "deleted"), [
    ("true", "true", True),
    (True, "true", True),      # a boolean compares by its text, as Hudi's toString
    (False, "true", False),
    ("false", "true", False),
    (None, "true", False),
    (1, "1", True),
    ("D", "D", True),
])
def test_soft_delete_by_field_and_marker(field_value: Any, marker: str, deleted: bool) -> None:
    spec = KeyedSpec(key_fields=("id",), delete_field="__deleted", delete_marker=marker)
    value = {"id": "k", "country": "de", "__deleted": field_value}
    assert read_change(value, b"k", spec) == RowChange(value, delete=deleted)


def test_soft_delete_field_absent_is_an_upsert() -> None:
    spec = KeyedSpec(key_fields=("id",), delete_field="_hoodie_is_deleted")
    assert read_change({"id": "k"}, b"k", spec) == RowChange({"id": "k"}, delete=False)


# --- Debezium: JSON without schemas ------------------------------------------------------

@pytest.mark.parametrize("op", ["c", "r", "u"])
def test_debezium_create_read_update_write_after(op: str) -> None:
    value = parse_object(orjson.dumps(event(op, row(1, 2, "old") if op == "u" else None, row(1, 2))))
    assert isinstance(value, dict)
    assert read_change(value, KEY_1_2, DEBEZIUM) == RowChange(row(1, 2), delete=False)


def test_debezium_delete_keys_by_before() -> None:
    value = parse_object(orjson.dumps(event("d", row(1, 2), None)))
    assert isinstance(value, dict)
    # The message key is not needed (nor read) when before holds the key.
    change = read_change(value, None, DEBEZIUM)
    assert change == KeyDelete("order_id:1,line:2", row(1, 2), DEBEZIUM_DELETE)


def test_debezium_delete_with_key_only_before() -> None:
    # REPLICA IDENTITY DEFAULT: before has the key columns, the others null.
    before = {"order_id": 1, "line": 2, "sku": None, "ts": None}
    change = read_change(event("d", before, None), KEY_1_2, DEBEZIUM)
    assert isinstance(change, KeyDelete) and change.record_key == "order_id:1,line:2"


def test_debezium_delete_without_before_falls_back_to_the_message_key() -> None:
    change = read_change(event("d", None, None), KEY_1_2, DEBEZIUM)
    assert change == KeyDelete("order_id:1,line:2", {"order_id": 1, "line": 2}, DEBEZIUM_DELETE)
    # before without the key fields: the message key too
    change = read_change(event("d", {"sku": "A"}, None), KEY_1_2, DEBEZIUM)
    assert isinstance(change, KeyDelete) and change.record_key == "order_id:1,line:2"


def test_debezium_delete_without_any_key_is_a_bad_record() -> None:
    bad = read_change(event("d", None, None), None, DEBEZIUM)
    assert isinstance(bad, Rejected) and bad.error_class == "MissingRecordKey"
    assert "Debezium delete" in bad.message


def test_debezium_tombstone_after_a_delete_is_a_delete_by_the_message_key() -> None:
    change = read_change(None, KEY_1_2, DEBEZIUM)
    assert change == KeyDelete("order_id:1,line:2", {"order_id": 1, "line": 2}, TOMBSTONE)


@pytest.mark.parametrize(("value", "words"), [
    ({"order_id": 1, "line": 2}, "has no 'op'"),
    ({"schema": {}, "payload": {}}, "kafka.value_format: connect_json"),
    (event("c", None, None), "op 'c' needs an 'after' row, got null"),
    (event("u", None, [1]), "op 'u' needs an 'after' row, got an array"),
    (event("d", "x", None), "op 'd' needs a 'before' row or null, got a string"),
    (event("t", None, None), "truncate"),
    (event("x", None, row(1, 2)), "op 'x' is not one of c, r, u, d"),
    ({**event("c", None, row(1, 2)), "op": None}, "op None is not one of"),
])
def test_debezium_bad_envelopes(value: dict[str, Any], words: str) -> None:
    bad = read_change(value, KEY_1_2, DEBEZIUM)
    assert isinstance(bad, Rejected), bad
    assert bad.error_class == "NotAConnectEnvelope" and words in bad.message, bad.message


def test_debezium_soft_delete_in_after() -> None:
    spec = KeyedSpec(key_fields=("order_id", "line"), envelope="debezium",
                     delete_field="_hoodie_is_deleted")
    after = {**row(1, 2), "_hoodie_is_deleted": True}
    assert read_change(event("u", None, after), KEY_1_2, spec) == RowChange(after, delete=True)


# --- Debezium: Connect JSON with schemas -------------------------------------------------

def test_debezium_with_schemas_through_the_connect_parser() -> None:
    update = parse_connect_envelope(with_schema(event("u", row(1, 2, "old"), row(1, 2, "new")),
                                                CONNECT_SCHEMA))
    assert isinstance(update, dict)
    assert read_change(update, KEY_1_2, DEBEZIUM) == RowChange(row(1, 2, "new"))

    delete = parse_connect_envelope(with_schema(event("d", row(1, 2), None), CONNECT_SCHEMA))
    assert isinstance(delete, dict)
    change = read_change(delete, KEY_1_2, DEBEZIUM)
    assert isinstance(change, KeyDelete) and change.record_key == "order_id:1,line:2"
    assert change.source == DEBEZIUM_DELETE

    # Debezium's tombstone is a null value; a Connect envelope with a null payload parses the
    # same way (None), and both delete by the key.
    assert parse_connect_envelope(with_schema(None, CONNECT_SCHEMA)) is None
    assert read_change(None, KEY_1_2, DEBEZIUM) == KeyDelete(
        "order_id:1,line:2", {"order_id": 1, "line": 2}, TOMBSTONE)


# --- Debezium: Avro ----------------------------------------------------------------------

AVRO_ROW = {"type": "record", "name": "Value", "namespace": "shop.public.lines", "fields": [
    {"name": "order_id", "type": "long"},
    {"name": "line", "type": "int"},
    {"name": "sku", "type": ["null", "string"], "default": None},
    {"name": "ts", "type": ["null", "long"], "default": None},
]}
AVRO_ENVELOPE = {"type": "record", "name": "Envelope", "namespace": "shop.public.lines", "fields": [
    {"name": "before", "type": ["null", AVRO_ROW], "default": None},
    {"name": "after", "type": ["null", "Value"], "default": None},
    {"name": "source", "type": {"type": "record", "name": "Source", "namespace": "io.debezium",
                                "fields": [{"name": "connector", "type": "string"},
                                           {"name": "lsn", "type": ["null", "long"]}]}},
    {"name": "op", "type": "string"},
    {"name": "ts_ms", "type": ["null", "long"], "default": None},
]}


class _OneSchema:
    def get(self, schema_id: int) -> dict[str, Any]:
        assert schema_id == 9
        return AVRO_ENVELOPE

    def cached(self, schema_id: int) -> dict[str, Any] | None:
        return self.get(schema_id)


def test_debezium_avro_through_the_avro_reader() -> None:
    reader = AvroValues(_OneSchema())
    created = reader.parse(confluent_avro(9, AVRO_ENVELOPE, event("c", None, row(1, 2))))
    assert isinstance(created, dict)
    assert read_change(created, KEY_1_2, DEBEZIUM) == RowChange(row(1, 2))

    deleted = reader.parse(confluent_avro(9, AVRO_ENVELOPE, event("d", row(1, 2), None)))
    assert isinstance(deleted, dict)
    change = read_change(deleted, None, DEBEZIUM)
    assert isinstance(change, KeyDelete) and change.record_key == "order_id:1,line:2"

    # REPLICA IDENTITY NOTHING-like: no before at all; the (JSON) message key decides.
    bare = reader.parse(confluent_avro(9, AVRO_ENVELOPE, event("d", None, None)))
    assert isinstance(bare, dict)
    change = read_change(bare, KEY_1_2, DEBEZIUM)
    assert isinstance(change, KeyDelete) and change.record_key == "order_id:1,line:2"


# --- the spec ----------------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "words"), [
    ({"key_fields": ()}, "at least one record key field"),
    ({"key_fields": ("id",), "envelope": "maxwell"}, "unknown envelope 'maxwell'"),
    ({"key_fields": ("id",), "kafka_key_format": "avro"}, "unknown kafka_key_format 'avro'"),
])
def test_spec_refuses_unknown_settings(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        KeyedSpec(**kwargs)
