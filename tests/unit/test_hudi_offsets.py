"""``kafka.commit.offsets``: Hudi's single-topic form, our multi-topic form, strict parsing, and
the topic-set rules (unqualified entries named, unconfigured topics carried, ambiguity refused)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_sink.shared.errors import TableFormatError
from hudi_sink.shared.hudi.offsets import (
    KAFKA_COMMIT_OFFSETS_KEY,
    UNQUALIFIED_TOPIC_KEY,
    Offsets,
    format_offsets,
    offsets_from_metadata,
    offsets_metadata,
    parse_offsets,
)


def test_key() -> None:
    assert KAFKA_COMMIT_OFFSETS_KEY == "kafka.commit.offsets"


def test_single_topic_uses_hudi_format() -> None:
    offsets: Offsets = {("orders", 1): 1432, ("orders", 0): 1500, ("orders", 10): 3}
    value = format_offsets(offsets, ["orders"])
    assert value == "0=1500,1=1432,10=3"
    assert parse_offsets(value, ["orders"]) == offsets


def test_multi_topic_format_follows_topic_order() -> None:
    offsets: Offsets = {("b", 1): 5, ("a", 0): 7, ("b", 0): 6, ("a", 2): 8}
    value = format_offsets(offsets, ["b", "a"])
    assert value == "b:0=6,b:1=5,a:0=7,a:2=8"
    assert parse_offsets(value, ["b", "a"]) == offsets


def test_unconfigured_topic_is_kept_qualified() -> None:
    offsets: Offsets = {("orders", 0): 1, ("old", 0): 2}
    value = format_offsets(offsets, ["orders"])
    assert value == "0=1,old:0=2"
    assert parse_offsets(value, ["orders"]) == offsets


def test_unqualified_entries_belong_to_first_topic() -> None:
    # A table written with one topic, read after a second topic was configured.
    assert parse_offsets("0=10,1=20", ["orders", "refunds"]) == {
        ("orders", 0): 10,
        ("orders", 1): 20,
    }
    assert parse_offsets("0=10,refunds:0=3", ["orders", "refunds"]) == {
        ("orders", 0): 10,
        ("refunds", 0): 3,
    }


def test_topic_names_with_dots_and_dashes() -> None:
    offsets: Offsets = {("my.topic-v2_x", 3): 9, ("t", 0): 0}
    value = format_offsets(offsets, ["t", "my.topic-v2_x"])
    assert parse_offsets(value, ["t", "my.topic-v2_x"]) == offsets


def test_empty() -> None:
    assert format_offsets({}, ["orders"]) == ""
    assert parse_offsets("", ["orders"]) == {}
    assert parse_offsets("  ", ["orders"]) == {}


@pytest.mark.parametrize(
    "garbage",
    ["abc", "0=", "=5", "0=x", "0=-1", "-1=3", "0=1,0=2", ":0=1", "t:=1", "0=1,,1=2", "0=1.5",
     "0=١"],
)
def test_garbage_raises(garbage: str) -> None:
    with pytest.raises(TableFormatError):
        parse_offsets(garbage, ["orders"])


def test_format_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        format_offsets({("a", 0): 1}, [])
    with pytest.raises(ValueError):
        format_offsets({("a", 0): -1}, ["a"])
    with pytest.raises(ValueError):
        format_offsets({("a:b", 0): 1}, ["x"])


_topics = st.sampled_from(["orders", "refunds", "a.b-c"])


@given(
    st.dictionaries(
        st.tuples(_topics, st.integers(0, 500)), st.integers(0, 2**62), max_size=20
    ),
    st.permutations(["orders", "refunds", "a.b-c"]),
    st.integers(1, 3),
)
def test_round_trip(offsets: Offsets, order: list[str], count: int) -> None:
    topics = order[:count]
    assert parse_offsets(format_offsets(offsets, topics), topics) == offsets


# --- topic-set rules (issue 9, finding 8) -------------------------------------------------
ORDERS = {("orders", 0): 5, ("orders", 1): 7}


def test_one_topic_is_written_unqualified_and_named() -> None:
    assert offsets_metadata(ORDERS, ["orders"]) == {
        KAFKA_COMMIT_OFFSETS_KEY: "0=5,1=7", UNQUALIFIED_TOPIC_KEY: "orders"}
    assert UNQUALIFIED_TOPIC_KEY == "hudi.sink.offsets.topic"


def test_several_topics_are_written_qualified_without_a_name() -> None:
    assert offsets_metadata({**ORDERS, ("refunds", 0): 3}, ["orders", "refunds"]) == {
        KAFKA_COMMIT_OFFSETS_KEY: "orders:0=5,orders:1=7,refunds:0=3"}


def test_no_name_when_nothing_is_written_unqualified() -> None:
    assert offsets_metadata({}, ["orders"]) == {KAFKA_COMMIT_OFFSETS_KEY: ""}
    assert offsets_metadata({("old", 0): 9}, ["orders"]) == {KAFKA_COMMIT_OFFSETS_KEY: "old:0=9"}


def test_unconfigured_topics_are_written_qualified_and_read_back() -> None:
    extra = offsets_metadata({**ORDERS, ("old", 0): 9}, ["orders"])
    assert extra == {KAFKA_COMMIT_OFFSETS_KEY: "0=5,1=7,old:0=9", UNQUALIFIED_TOPIC_KEY: "orders"}
    assert offsets_from_metadata(extra, ["orders"]) == {**ORDERS, ("old", 0): 9}


def test_named_entries_stay_with_their_topic_whatever_is_configured() -> None:
    extra = offsets_metadata(ORDERS, ["orders"])
    assert offsets_from_metadata(extra, ["refunds", "orders"]) == ORDERS  # added, listed first
    assert offsets_from_metadata(extra, ["orders", "refunds"]) == ORDERS
    assert offsets_from_metadata(extra, ["refunds"]) == ORDERS  # replaced: carried, not reused


def test_legacy_unnamed_entries_belong_to_the_single_configured_topic() -> None:
    # Commits written before the name existed, or by Hudi's own Kafka tools.
    assert offsets_from_metadata({KAFKA_COMMIT_OFFSETS_KEY: "0=5,1=7"}, ["orders"]) == ORDERS


@pytest.mark.parametrize("raw", ["0=5", "0=5,refunds:0=3", "refunds:0=3,1=2"])
def test_legacy_unnamed_entries_with_several_topics_are_refused(raw: str) -> None:
    with pytest.raises(TableFormatError) as caught:
        offsets_from_metadata({KAFKA_COMMIT_OFFSETS_KEY: raw}, ["orders", "refunds"])
    message = str(caught.value)
    assert "ambiguous" in message and raw in message and UNQUALIFIED_TOPIC_KEY in message
    assert "orders, refunds" in message
    assert "Run once with only the topic the table was written from" in message


def test_qualified_entries_need_no_name() -> None:
    extra = {KAFKA_COMMIT_OFFSETS_KEY: "orders:0=5,refunds:1=2"}
    assert offsets_from_metadata(extra, ["refunds", "orders"]) == {
        ("orders", 0): 5, ("refunds", 1): 2}
    assert offsets_from_metadata(extra, ["other"]) == {("orders", 0): 5, ("refunds", 1): 2}


def test_missing_offsets_are_empty() -> None:
    assert offsets_from_metadata({}, ["orders", "refunds"]) == {}
    assert offsets_from_metadata({KAFKA_COMMIT_OFFSETS_KEY: ""}, ["orders", "refunds"]) == {}


@pytest.mark.parametrize(
    "extra",
    [
        {KAFKA_COMMIT_OFFSETS_KEY: 5},
        {KAFKA_COMMIT_OFFSETS_KEY: "0=x", UNQUALIFIED_TOPIC_KEY: "orders"},
        {KAFKA_COMMIT_OFFSETS_KEY: "0=1", UNQUALIFIED_TOPIC_KEY: ""},
        {KAFKA_COMMIT_OFFSETS_KEY: "0=1", UNQUALIFIED_TOPIC_KEY: 3},
        {KAFKA_COMMIT_OFFSETS_KEY: "0=1", UNQUALIFIED_TOPIC_KEY: "a:b"},
    ],
)
def test_corrupt_metadata_is_refused(extra: dict[str, object]) -> None:
    with pytest.raises(TableFormatError):
        offsets_from_metadata(extra, ["orders"])


def test_a_topic_removed_and_re_added_resumes_where_it_stopped() -> None:
    both = ["orders", "refunds"]
    first = offsets_metadata({**ORDERS, ("refunds", 0): 3}, both)
    # Refunds removed: its offset is read and carried through the next commits...
    carried = offsets_from_metadata(first, ["orders"])
    assert carried[("refunds", 0)] == 3
    second = offsets_metadata({**carried, ("orders", 0): 50}, ["orders"])
    # ... so re-adding it (first in the list, even) resumes at 3, not at 0.
    assert offsets_from_metadata(second, ["refunds", "orders"]) == {
        ("orders", 0): 50, ("orders", 1): 7, ("refunds", 0): 3}


@given(
    st.dictionaries(
        st.tuples(_topics, st.integers(0, 500)), st.integers(0, 2**62), max_size=20
    ),
    st.lists(_topics, min_size=1, max_size=3, unique=True),
    st.lists(_topics, min_size=1, max_size=3, unique=True),
)
def test_any_change_of_the_topic_list_keeps_every_offset(
    offsets: Offsets, written_with: list[str], read_with: list[str]
) -> None:
    extra = offsets_metadata(offsets, written_with)
    assert offsets_from_metadata(extra, read_with) == offsets
