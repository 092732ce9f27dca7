"""The offset-change commit's pure parts: request parsing (errors name the entry), the
reason, the metadata it writes and how histories read it back."""

from __future__ import annotations

import pytest

from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.hudi.offset_change import (
    CHANGE_KEY,
    REASON_KEY,
    OffsetChange,
    change_metadata,
    check_reason,
    describe_change,
    parse_requested,
)
from hudi_sink.shared.hudi.offsets import offsets_from_metadata

TOPICS = ["orders", "refunds"]
COUNTS = {"orders": 4, "refunds": 2}


def test_a_request_names_topic_and_partition() -> None:
    assert parse_requested({"orders:3": 1201, "refunds:0": 0}, TOPICS, COUNTS) == {
        ("orders", 3): 1201, ("refunds", 0): 0}


@pytest.mark.parametrize(("raw", "key", "words"), [
    ({}, "offsets", "non-empty"),
    ([1], "offsets", "non-empty"),
    ({"3": 1}, "offsets.3", "<topic>:<partition>"),
    ({"payments:0": 1}, "offsets.payments:0", "not one of this sink's topics"),
    ({"orders:x": 1}, "offsets.orders:x", "not a non-negative integer"),
    ({"orders:4": 1}, "offsets.orders:4", "has 4 partition(s)"),
    ({"orders:0": -1}, "offsets.orders:0", "offset -1"),
    ({"orders:0": "12"}, "offsets.orders:0", "offset '12'"),
    ({"orders:0": True}, "offsets.orders:0", "offset True"),
    ({"orders:0": 1, "orders:00": 2}, "offsets.orders:00", "named twice"),
])
def test_a_bad_entry_is_named(raw: object, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_requested(raw, TOPICS, COUNTS)
    assert caught.value.key == key
    assert words in str(caught.value)


def test_without_partition_counts_any_partition_is_taken() -> None:
    assert parse_requested({"orders:99": 5}, TOPICS, None) == {("orders", 99): 5}


@pytest.mark.parametrize("reason", ["", "   ", None, 3, "x" * 1001])
def test_a_reason_is_required_and_bounded(reason: object) -> None:
    with pytest.raises(ConfigError) as caught:
        check_reason(reason, "--reason")
    assert caught.value.key == "--reason"


def test_the_commit_keeps_every_other_offset_and_records_what_changed_and_why() -> None:
    committed = {("orders", 0): 100, ("orders", 1): 200, ("gone", 0): 7}
    change = OffsetChange({("orders", 0): 101, ("orders", 2): 0}, "poison at 100", "rest", "r1")
    metadata = change_metadata(change, committed, topics=["orders"], schema_json='{"type":"record"}',
                               epoch=4, sink_name="s", operation="INSERT")
    assert metadata["partitionToWriteStats"] == {}
    extra = metadata["extraMetadata"]
    assert offsets_from_metadata(extra, ["orders"]) == {
        ("orders", 0): 101, ("orders", 1): 200, ("orders", 2): 0, ("gone", 0): 7}
    assert extra[CHANGE_KEY] == "orders:0=100->101,orders:2=-->0"
    assert extra[REASON_KEY] == "poison at 100"
    assert extra["hudi.sink.coordinator.epoch"] == "4"
    assert describe_change(extra) == {
        "reason": "poison at 100", "set_by": "rest",
        "changes": {"orders:0": {"from": 100, "to": 101}, "orders:2": {"from": None, "to": 0}}}


def test_an_ingestion_commit_is_no_offset_change() -> None:
    assert describe_change({"kafka.commit.offsets": "0=5"}) is None
