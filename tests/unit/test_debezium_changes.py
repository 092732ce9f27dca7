"""The simulated Debezium source (``tests/debezium_changes.py``): its stream has every kind of
change in Debezium's shape, each converter's bytes decode back to the events, and — the point of
the fixture — folding the serialized stream with the upsert oracle gives exactly the source
table's final state, computed apart from the stream, for every flavour, with or without a
precombine field and with key-only ``before`` rows."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from debezium_changes import (
    AVRO,
    FLAVOURS,
    JSON_PLAIN,
    JSON_WITH_SCHEMAS,
    KEY_FIELDS,
    KEY_SCHEMA_ID,
    VALUE_SCHEMA_ID,
    ChangeStream,
    Flavour,
    avro_decoder,
    change_stream,
    oracle_spec,
    registry_contents,
    serialize,
    sink_overrides,
)
from upsert_oracle import Record, fold, murmur2_partition


def records(stream: ChangeStream, flavour: Flavour, partitions: int = 1) -> list[Record]:
    """The serialized stream as a murmur2 producer would place it in ``partitions``."""
    next_offset = [0] * partitions
    placed = []
    for key, value in serialize(stream, flavour):
        partition = murmur2_partition(key, partitions)
        placed.append(Record(partition, next_offset[partition], key, value))
        next_offset[partition] += 1
    return placed


def test_the_stream_is_seeded() -> None:
    assert change_stream(200, seed=7).events == change_stream(200, seed=7).events
    assert change_stream(200, seed=7).events != change_stream(200, seed=8).events


def test_the_stream_has_every_kind_of_change_in_debeziums_shape() -> None:
    stream = change_stream(600, seed=1, snapshot_rows=30)
    ops = stream.ops()
    assert ops["r"] == 30 and min(ops["c"], ops["u"], ops["d"]) > 30
    assert ops["tombstone"] == ops["d"]
    current: dict[Any, dict[str, Any]] = {}
    key_changes = 0
    for n, event in enumerate(stream.events):
        key = (event.key["region"], event.key["order_no"])
        if event.envelope is None:
            previous = stream.events[n - 1]
            assert previous.envelope is not None and previous.envelope["op"] == "d"
            assert previous.key == event.key  # a tombstone follows its delete, same key
            continue
        env = event.envelope
        assert list(env) == ["before", "after", "source", "op", "ts_ms", "transaction"]
        assert env["source"]["snapshot"] == ("false" if env["op"] != "r" else
                                             "last" if n == 29 else "true")
        if env["op"] in ("r", "c"):
            assert env["before"] is None and key not in current
            if env["op"] == "c" and n > 1 and stream.events[n - 1].envelope is None:
                key_changes += 1
            current[key] = env["after"]
        elif env["op"] == "u":
            assert env["before"] == current[key] and env["after"]["version"] > env["before"]["version"]
            current[key] = env["after"]
        else:
            assert env["after"] is None and env["before"] == current.pop(key)
        row = env["after"] or env["before"]
        assert {f: row[f] for f in KEY_FIELDS} == event.key
    assert current == stream.final and key_changes > 0
    assert len(stream.final) > 20


def test_keys_come_back_after_their_delete() -> None:
    stream = change_stream(800, seed=3, orders_per_region=10)
    deleted, returned = set(), 0
    for event in stream.events:
        key = (event.key["region"], event.key["order_no"])
        if event.envelope is not None and event.envelope["op"] == "d":
            deleted.add(key)
        elif event.envelope is not None and event.envelope["op"] == "c" and key in deleted:
            returned += 1
    assert returned > 10


def test_json_with_schemas_describes_its_payload() -> None:
    stream = change_stream(50, seed=2)
    for (key, value), event in zip(serialize(stream, JSON_WITH_SCHEMAS), stream.events, strict=True):
        parsed_key = orjson.loads(key)
        assert parsed_key["payload"] == event.key
        assert [f["field"] for f in parsed_key["schema"]["fields"]] == ["region", "order_no"]
        assert parsed_key["schema"]["name"] == "dbserver1.public.orders.Key"
        if event.envelope is None:
            assert value is None
            continue
        assert value is not None
        parsed = orjson.loads(value)
        assert parsed["payload"] == event.envelope
        fields = {f["field"]: f for f in parsed["schema"]["fields"]}
        assert list(fields) == list(event.envelope)
        assert [f["field"] for f in fields["after"]["fields"]] == [
            "region", "order_no", "customer", "amount", "qty", "status", "version"]
        assert fields["after"]["optional"] and not fields["op"]["optional"]


def test_plain_json_is_the_bare_envelope() -> None:
    stream = change_stream(20, seed=2)
    for (key, value), event in zip(serialize(stream, JSON_PLAIN), stream.events, strict=True):
        assert orjson.loads(key) == event.key
        assert (None if value is None else orjson.loads(value)) == event.envelope


def test_avro_is_confluent_framed_and_decodes_back() -> None:
    stream = change_stream(100, seed=4, full_before=False)
    decode = avro_decoder(registry_contents("t")[0])
    for (key, value), event in zip(serialize(stream, AVRO), stream.events, strict=True):
        assert key[:5] == b"\x00" + KEY_SCHEMA_ID.to_bytes(4, "big")
        assert decode(key) == event.key
        if event.envelope is not None:
            assert value is not None and value[:5] == b"\x00" + VALUE_SCHEMA_ID.to_bytes(4, "big")
            assert decode(value) == event.envelope
    with pytest.raises(ValueError, match="id 9"):
        decode(b"\x00\x00\x00\x00\x09")


def test_registry_subjects_follow_topic_name_strategy() -> None:
    schemas, subjects = registry_contents("orders-cdc")
    assert subjects == {"orders-cdc-key": KEY_SCHEMA_ID, "orders-cdc-value": VALUE_SCHEMA_ID}
    assert schemas[VALUE_SCHEMA_ID]["name"] == "Envelope"


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
@pytest.mark.parametrize("precombine", [None, "version"])
@pytest.mark.parametrize("full_before", [True, False])
def test_the_fold_of_the_stream_is_the_source_tables_final_state(
        flavour: str, precombine: str | None, full_before: bool) -> None:
    stream = change_stream(500, seed=11, full_before=full_before)
    spec = oracle_spec(FLAVOURS[flavour], precombine=precombine, partitions=3)
    result = fold(records(stream, FLAVOURS[flavour], 3), spec)
    expected = stream.expected()
    assert {k: w.row for k, w in result.winners.items()} == expected
    assert "region:eu,order_no:" in next(k for k in sorted(expected) if k.startswith("region:eu"))
    assert result.rejected == [] and result.ignored == []
    assert len(result.absent_deletes) == stream.ops()["tombstone"]


def test_a_prefix_of_the_stream_folds_to_the_table_at_that_point() -> None:
    stream = change_stream(300, seed=5)
    half = ChangeStream(stream.events[:150])
    # Replay the first 150 events by hand: the table then.
    table: dict[Any, Any] = {}
    for event in half.events:
        key = (event.key["region"], event.key["order_no"])
        if event.envelope is not None:
            if event.envelope["after"] is None:
                table.pop(key)
            else:
                table[key] = event.envelope["after"]
    result = fold(records(stream, JSON_PLAIN)[:150], oracle_spec(JSON_PLAIN))
    assert {(w.row["region"], w.row["order_no"]): w.row for w in result.winners.values()} == table


def test_sink_overrides() -> None:
    settings = sink_overrides(JSON_WITH_SCHEMAS)
    assert settings["kafka"] == {"envelope": "debezium", "value_format": "connect_json"}
    assert settings["table"]["record_key_field"] == "region,order_no"
    assert settings["upsert"] == {"kafka_key_format": "json"}
    assert sink_overrides(AVRO, "http://r")["avro"] == {"registry_url": "http://r"}
    with pytest.raises(ValueError, match="registry"):
        sink_overrides(AVRO)
