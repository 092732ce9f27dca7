"""Dead letters: original bytes untouched, provenance and reason in the agreed headers, the
record's own headers copied (nulls kept, our namespaces renamed, capped)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_sink.services.participant.dead_letters import (
    DLQ_HEADER_NAMES,
    MAX_MESSAGE_CHARS,
    DeadLetter,
    copied_headers,
    parse_headers,
)
from hudi_sink.services.participant.decoded import Rejected
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.kafka.dlq_headers import MAX_COPIED_HEADER_BYTES

ORDERS = TableConfig(
        schema="id STRING, ts TIMESTAMP, country STRING, amount DOUBLE, qty BIGINT, ok BOOLEAN, "
        "payload STRING",
        record_key_field="id",
        partition_field="country",
    ).table_schema()

EXPECTED_NAMES = [
    "hudi.sink.source.topic",
    "hudi.sink.source.partition",
    "hudi.sink.source.offset",
    "hudi.sink.source.timestamp",
    "hudi.sink.error.class",
    "hudi.sink.error.message",
]


def make(rejected: Rejected, key: bytes | None = b"k-1", value: bytes | None = b"\xff{") -> DeadLetter:
    return DeadLetter.from_rejected(rejected, "orders", 3, 1234567, 1_709_296_200_123, key=key, value=value)


def test_from_decoder_rejection() -> None:
    value = b'{"id":"a","amount":"abc"}'
    result = RecordDecoder(ORDERS, 1000).decode(value)
    assert isinstance(result, Rejected)
    letter = DeadLetter.from_rejected(result, "orders", 0, 42, 1700000000000, b"key", value)
    assert letter.key == b"key"
    assert letter.value is value  # the original bytes, not a re-encoding
    assert parse_headers(letter.headers()) == {
        "hudi.sink.source.topic": "orders",
        "hudi.sink.source.partition": "0",
        "hudi.sink.source.offset": "42",
        "hudi.sink.source.timestamp": "1700000000000",
        "hudi.sink.error.class": "TypeMismatch",
        "hudi.sink.error.message": "field 'amount': expected DOUBLE, got string 'abc'",
    }


def test_headers_are_exactly_the_agreed_names_in_order() -> None:
    headers = make(Rejected("InvalidJson", "value is not valid JSON")).headers()
    assert [name for name, _ in headers] == EXPECTED_NAMES
    assert list(DLQ_HEADER_NAMES) == EXPECTED_NAMES
    assert all(isinstance(raw, bytes) for _, raw in headers)
    assert dict(headers)["hudi.sink.source.offset"] == b"1234567"
    assert dict(headers)["hudi.sink.source.timestamp"] == b"1709296200123"


@pytest.mark.parametrize(("key", "value"), [(None, None), (b"", b""), (b"\x00\xff", b"\xfe")])
def test_key_and_value_kept_unchanged(key: bytes | None, value: bytes | None) -> None:
    letter = make(Rejected("InvalidUtf8", "bad"), key=key, value=value)
    assert letter.key == key
    assert letter.value == value


def test_message_is_truncated_to_limit() -> None:
    letter = make(Rejected("TypeMismatch", "x" * 5000))
    assert len(letter.message) == MAX_MESSAGE_CHARS == 1000
    assert letter.message.endswith("...")
    parsed = parse_headers(letter.headers())
    assert parsed["hudi.sink.error.message"] == letter.message


def test_message_at_limit_is_kept_whole() -> None:
    message = "é" * MAX_MESSAGE_CHARS
    letter = make(Rejected("TypeMismatch", message))
    assert letter.message == message
    assert dict(letter.headers())["hudi.sink.error.message"] == message.encode("utf-8")


def test_non_ascii_message_is_utf8() -> None:
    letter = make(Rejected("TypeMismatch", "field 'id': expected STRING, got string '✓'"))
    assert dict(letter.headers())["hudi.sink.error.message"].decode("utf-8").endswith("'✓'")


def test_lone_surrogate_in_message_does_not_break_headers() -> None:
    letter = make(Rejected("TypeMismatch", "bad \ud800 text"))
    parsed = parse_headers(letter.headers())
    assert parsed["hudi.sink.error.message"] == "bad \\ud800 text"


def test_dead_letter_is_frozen() -> None:
    letter = make(Rejected("InvalidJson", "x"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        letter.offset = 1  # type: ignore[misc]


def test_parse_headers_is_lenient() -> None:
    headers = [
        ("other", b"1"),
        ("hudi.sink.error.class", b"A"),
        ("hudi.sink.error.class", b"B"),
        ("nullable", None),
        ("broken", b"\xff"),
    ]
    assert parse_headers(headers) == {
        "other": "1",
        "hudi.sink.error.class": "B",
        "nullable": "",
        "broken": "\ufffd",
    }
    assert parse_headers(None) == {}
    assert parse_headers(()) == {}


@given(
    error_class=st.sampled_from(["InvalidJson", "TypeMismatch", "RecordTooLarge"]),
    message=st.text(max_size=2000),
    topic=st.text(min_size=1, max_size=50),
    partition=st.integers(0, 10_000),
    offset=st.integers(0, 2**63 - 1),
    timestamp=st.integers(-1, 2**62),
)
def test_headers_round_trip(
    error_class: str, message: str, topic: str, partition: int, offset: int, timestamp: int
) -> None:
    letter = DeadLetter.from_rejected(
        Rejected(error_class, message), topic, partition, offset, timestamp, None, b"v"
    )
    parsed = parse_headers(letter.headers())
    assert list(parsed) == EXPECTED_NAMES
    assert parsed["hudi.sink.source.topic"] == topic
    assert int(parsed["hudi.sink.source.partition"]) == partition
    assert int(parsed["hudi.sink.source.offset"]) == offset
    assert int(parsed["hudi.sink.source.timestamp"]) == timestamp
    assert parsed["hudi.sink.error.class"] == error_class
    shown = parsed["hudi.sink.error.message"]
    assert len(shown) <= MAX_MESSAGE_CHARS
    if len(message) <= MAX_MESSAGE_CHARS:
        assert shown == message
    else:
        assert shown == message[: MAX_MESSAGE_CHARS - 3] + "..."


def test_the_records_own_headers_are_copied_null_kept_ours_renamed() -> None:
    """A null header stays null; a record's own ``hudi.sink.*`` / ``__connect.errors.*`` header
    is kept under ``hudi.sink.original.``, so the letter's names of those namespaces are only
    the ones describing this failure."""
    own = [("trace", b"t-1"), ("flag", None), ("empty", b""),
           ("hudi.sink.error.class", b"Forged"), ("__connect.errors.topic", b"elsewhere")]
    letter = DeadLetter.from_rejected(Rejected("InvalidJson", "bad"), "orders", 0, 7, 1, None,
                                      b"v", headers=own)
    headers = letter.headers()
    assert headers[:5] == [("trace", b"t-1"), ("flag", None), ("empty", b""),
                           ("hudi.sink.original.hudi.sink.error.class", b"Forged"),
                           ("hudi.sink.original.__connect.errors.topic", b"elsewhere")]
    assert [value for name, value in headers if name == "hudi.sink.error.class"] == [b"InvalidJson"]
    assert not any(name.startswith("__connect.errors.") for name, _ in headers)


def test_the_records_headers_are_capped_with_a_marker() -> None:
    own = [(f"h{i}", b"x" * 1000) for i in range(100)]  # ~100 KiB
    copied = copied_headers(own)
    assert sum(len(n) + len(v or b"") for n, v in copied[:-1]) <= MAX_COPIED_HEADER_BYTES
    assert copied[:-1] == tuple(own[: len(copied) - 1])  # a prefix, in order
    kept = len(copied) - 1
    assert copied[-1] == ("hudi.sink.headers.truncated",
                          f"{100 - kept} headers, {sum(len(n) + 1000 for n, _ in own[kept:])} "
                          "bytes".encode())
    assert copied_headers(own[:3]) == tuple(own[:3])  # under the cap: no marker
