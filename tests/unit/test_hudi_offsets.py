"""``kafka.commit.offsets``: Hudi's single-topic form, our multi-topic form, strict parsing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.errors import TableFormatError
from shared.hudi.offsets import KAFKA_COMMIT_OFFSETS_KEY, Offsets, format_offsets, parse_offsets


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
def test_metadata_names_the_topic_of_unqualified_entries() -> None:
    from shared.hudi.offsets import UNQUALIFIED_TOPIC_KEY, offsets_from_metadata, offsets_metadata

    extra = offsets_metadata({("orders", 0): 5, ("orders", 1): 7}, ["orders"])
    assert extra == {"kafka.commit.offsets": "0=5,1=7", UNQUALIFIED_TOPIC_KEY: "orders"}
    # Topics added (and listed first) later: the entries stay with "orders".
    assert offsets_from_metadata(extra, ["refunds", "orders"]) == {("orders", 0): 5, ("orders", 1): 7}


def test_unconfigured_topics_are_returned_and_kept() -> None:
    from shared.hudi.offsets import offsets_from_metadata, offsets_metadata

    offsets = {("orders", 0): 5, ("old", 0): 9}
    extra = offsets_metadata(offsets, ["orders"])
    assert extra["kafka.commit.offsets"] == "0=5,old:0=9"
    assert offsets_from_metadata(extra, ["orders"]) == offsets


def test_unnamed_unqualified_entries_with_several_topics_are_refused() -> None:
    from shared.hudi.offsets import offsets_from_metadata

    legacy = {"kafka.commit.offsets": "0=5"}
    assert offsets_from_metadata(legacy, ["orders"]) == {("orders", 0): 5}
    with pytest.raises(TableFormatError, match="ambiguous"):
        offsets_from_metadata(legacy, ["orders", "refunds"])
    qualified = {"kafka.commit.offsets": "orders:0=5,refunds:1=2"}
    assert offsets_from_metadata(qualified, ["refunds", "orders"]) == {("orders", 0): 5, ("refunds", 1): 2}
