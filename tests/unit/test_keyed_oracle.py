"""The upsert oracle's fold (``tests/upsert_oracle.py``) on hand-made records: the acceptance
tests of upsert mode trust it to say what the table must hold, so each of Hudi's
``DefaultHoodieRecordPayload`` rules it encodes is pinned here on the smallest stream that
shows it — precombine ties and absent ordering values, tombstones before and after rows, soft
deletes, a Debezium change stream, misplaced keys and commit prefixes."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from upsert_oracle import Fold, Record, Spec, Winner, fold, hudi_key, murmur2_partition

PRE = Spec(precombine="ts")


def row(partition: int, offset: int, key: str | None, **values: Any) -> Record:
    body = values if key is None else {"id": key, **values}
    return Record(partition, offset, None if key is None else key.encode(), orjson.dumps(body))


def tomb(partition: int, offset: int, key: str) -> Record:
    return Record(partition, offset, key.encode(), None)


def won(result: Fold) -> dict[str, tuple[int, int]]:
    """Each surviving key's winning (partition, offset)."""
    return {k: (w.partition, w.offset) for k, w in result.winners.items()}


def test_without_precombine_the_later_offset_wins() -> None:
    result = fold([row(0, 0, "a", v=1), row(0, 1, "b", v=1), row(0, 2, "a", v=2)], Spec())
    assert won(result) == {"a": (0, 2), "b": (0, 1)}
    assert result.winners["a"].row == {"id": "a", "v": 2}
    assert result.ignored == result.deletes == result.absent_deletes == result.rejected == []


def test_records_are_folded_in_offset_order_whatever_order_they_come_in() -> None:
    records = [row(0, 5, "a", v=2), row(0, 3, "a", v=1)]
    assert won(fold(records, Spec())) == {"a": (0, 5)}


def test_precombine_greater_wins_and_a_lower_one_changes_nothing() -> None:
    result = fold([row(0, 0, "a", ts=5), row(0, 1, "a", ts=3), row(0, 2, "a", ts=7)], PRE)
    assert won(result) == {"a": (0, 2)}
    assert result.ignored == [(0, 1)]
    result = fold([row(0, 0, "a", ts=5), row(0, 1, "a", ts=3)], PRE)
    assert won(result) == {"a": (0, 0)} and result.winners["a"].ordering == 5


def test_precombine_tie_goes_to_the_later_offset() -> None:
    result = fold([row(0, 0, "a", ts=5, v=1), row(0, 1, "a", ts=5, v=2)], PRE)
    assert won(result) == {"a": (0, 1)} and result.winners["a"].row["v"] == 2
    assert result.ignored == []


@pytest.mark.parametrize("later", [{}, {"ts": None}], ids=["field absent", "field null"])
def test_a_record_without_ordering_value_always_applies(later: dict[str, Any]) -> None:
    result = fold([row(0, 0, "a", ts=9), row(0, 1, "a", v=2, **later)], PRE)
    assert won(result) == {"a": (0, 1)}
    assert result.winners["a"].ordering is None


def test_a_current_version_without_ordering_value_never_holds_a_record_off() -> None:
    result = fold([row(0, 0, "a"), row(0, 1, "a", ts=-100)], PRE)
    assert won(result) == {"a": (0, 1)} and result.ignored == []


def test_a_tombstone_deletes_whatever_the_ordering_and_a_later_row_inserts() -> None:
    records = [row(0, 0, "a", ts=9), tomb(0, 1, "a"), row(0, 2, "a", ts=1)]
    result = fold(records, PRE)
    assert won(result) == {"a": (0, 2)}  # the delete took ts=9 with it
    assert result.deletes == [(0, 1)]
    assert won(fold(records[:2], PRE)) == {}


def test_a_tombstone_before_any_row_is_a_delete_of_an_absent_key() -> None:
    result = fold([tomb(0, 0, "a"), row(0, 1, "a", v=1), tomb(0, 2, "b")], Spec())
    assert won(result) == {"a": (0, 1)}
    assert result.absent_deletes == [(0, 0), (0, 2)] and result.deletes == []


def test_a_soft_delete_compares_like_a_row() -> None:
    spec = Spec(precombine="ts", delete_field="_hoodie_is_deleted")
    older = fold([row(0, 0, "a", ts=5), row(0, 1, "a", ts=4, _hoodie_is_deleted=True)], spec)
    assert won(older) == {"a": (0, 0)} and older.ignored == [(0, 1)]
    newer = fold([row(0, 0, "a", ts=5), row(0, 1, "a", ts=5, _hoodie_is_deleted=True)], spec)
    assert won(newer) == {} and newer.deletes == [(0, 1)]
    kept = fold([row(0, 0, "a", ts=5), row(0, 1, "a", ts=6, _hoodie_is_deleted=False)], spec)
    assert won(kept) == {"a": (0, 1)}  # the marker is "true": false is a row


def test_upto_takes_each_partition_below_its_offset_and_nothing_of_others() -> None:
    records = [row(0, 0, "a", v=1), row(0, 1, "a", v=2), row(1, 0, "b"), row(2, 0, "c")]
    result = fold(records, Spec(), upto={0: 1, 1: 1})
    assert won(result) == {"a": (0, 0), "b": (1, 0)}
    assert won(fold(records, Spec(), upto={})) == {}


def test_misplaced_and_unkeyed_records_are_rejected_with_a_partition_count() -> None:
    home = murmur2_partition(b"a", 3)
    records = [row(home, 0, "a", v=1), row((home + 1) % 3, 0, "a", v=2), row(home, 1, None, id="x")]
    result = fold(records, Spec(partitions=3))
    assert won(result) == {"a": (home, 0)}
    assert {(r.partition, r.offset) for r in result.rejected} == {((home + 1) % 3, 0), (home, 1)}
    assert all("KeyPartitionMismatch" in r.reason for r in result.rejected)


def test_murmur2_partition_is_kafkas() -> None:
    # Kafka's DefaultPartitionerTest/UtilsTest vectors: murmur2("21") = -973932308.
    assert murmur2_partition(b"21", 2**31 - 1) == (-973932308 & 0x7FFFFFFF) % (2**31 - 1)


def test_a_key_in_two_partitions_without_a_check_is_the_tests_error() -> None:
    with pytest.raises(AssertionError, match="partitions 0 and 1"):
        fold([row(0, 0, "a"), row(1, 0, "a")], Spec())


def test_records_without_key_or_object_are_rejected_not_applied() -> None:
    records = [Record(0, 0, b"a", b"[1]"), Record(0, 1, b"a", b"{bad"), Record(0, 2, b"a", b"null"),
               Record(0, 3, None, None), row(0, 4, None, v=1)]
    result = fold(records, Spec())
    assert won(result) == {} and [r.offset for r in result.rejected] == [0, 1, 2, 3, 4]


def test_incomparable_ordering_values_fail_naming_the_key() -> None:
    with pytest.raises(AssertionError, match="'a'"):
        fold([row(0, 0, "a", ts=1), row(0, 1, "a", ts="x")], PRE)


def test_hudi_key_spelling() -> None:
    fields = ("region", "order_no")
    assert hudi_key({"region": "eu", "order_no": 7}, fields) == "region:eu,order_no:7"
    assert hudi_key({"region": None, "order_no": 7}, fields) == "region:__null__,order_no:7"
    assert hudi_key({"region": "", "order_no": 7}, fields) == "region:__empty__,order_no:7"
    assert hudi_key({"order_no": None}, fields) is None
    assert hudi_key({"id": True}, ["id"]) == "true" and hudi_key({"id": ""}, ["id"]) is None
    assert hudi_key({"id": 12}, ["id"]) == "12"


# --- Debezium ---------------------------------------------------------------------------

KEYS = ("region", "order_no")


def _connect(payload: Any) -> bytes:
    return orjson.dumps({"schema": {"type": "struct", "optional": False}, "payload": payload})


def _key(region: str, order_no: int) -> bytes:
    return _connect({"region": region, "order_no": order_no})


def _event(offset: int, op: str, before: Any, after: Any) -> Record:
    source = after or before or {"region": "eu", "order_no": 1}
    return Record(0, offset, _key(source["region"], source["order_no"]),
                  _connect({"before": before, "after": after, "op": op, "ts_ms": offset,
                            "source": {"lsn": offset}}))


def test_a_debezium_stream_with_schemas() -> None:
    spec = Spec(key_fields=KEYS, envelope="debezium", value_format="connect_json", key_format="json")
    a1 = {"region": "eu", "order_no": 1, "qty": 1}
    a2 = {**a1, "qty": 2}
    b = {"region": "us", "order_no": 2, "qty": 5}
    c = {"region": "eu", "order_no": 3, "qty": 9}
    records = [
        _event(0, "r", None, a1), _event(1, "c", None, b), _event(2, "u", a1, a2),
        _event(3, "d", b, None), Record(0, 4, _key("us", 2), None),  # delete, then its tombstone
        _event(5, "c", None, c),
        _event(6, "d", None, None),  # no 'before' (no REPLICA IDENTITY): the message key's
        Record(0, 7, _key("eu", 1), None),
        _event(8, "c", None, a1),  # the key comes back
        Record(0, 9, _key("eu", 3), _connect(None)),  # a Connect tombstone: null payload
        _event(10, "t", None, None),
    ]
    result = fold(records, spec)
    assert won(result) == {"region:eu,order_no:1": (0, 8)}
    assert result.winners["region:eu,order_no:1"] == Winner("region:eu,order_no:1", a1, 0, 8)
    assert result.deletes == [(0, 3), (0, 6), (0, 9)]
    assert result.absent_deletes == [(0, 4), (0, 7)]
    assert [(r.offset, "'t'" in r.reason) for r in result.rejected] == [(10, True)]


def test_a_debezium_stream_without_schemas_and_a_custom_decoder() -> None:
    plain = Spec(key_fields=KEYS, envelope="debezium", key_format="json")
    a = {"region": "eu", "order_no": 1}
    key = orjson.dumps(a)
    records = [Record(0, 0, key, orjson.dumps({"op": "c", "before": None, "after": a})),
               Record(0, 1, key, orjson.dumps({"op": "d", "before": a, "after": None})),
               Record(0, 2, key, None)]
    assert won(fold(records[:1], plain)) == {"region:eu,order_no:1": (0, 0)}
    result = fold(records, plain)
    assert won(result) == {} and result.deletes == [(0, 1)] and result.absent_deletes == [(0, 2)]
    decoded = Spec(key_fields=KEYS, envelope="debezium", decode_value=orjson.loads,
                   decode_key=lambda raw: {"region": "eu", "order_no": 1})
    assert won(fold([Record(0, 0, b"\x00opaque", records[0].value), Record(0, 1, b"\x00", None)],
                    decoded)) == {}


def test_a_debezium_delete_is_keyed_by_before_when_it_holds_the_key() -> None:
    spec = Spec(key_fields=KEYS, envelope="debezium", key_format="json")
    a = {"region": "eu", "order_no": 1}
    records = [Record(0, 0, orjson.dumps(a), orjson.dumps({"op": "c", "before": None, "after": a})),
               Record(0, 1, b"\x00not json", orjson.dumps({"op": "d", "before": a, "after": None}))]
    result = fold(records, spec)
    assert won(result) == {} and result.deletes == [(0, 1)] and result.rejected == []
