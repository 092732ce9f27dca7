"""Names in a Hudi table: partition encoding is path-safe and exactly Hudi's (checked against
a transcription of Hudi's Java codec), file names parse back, instants grow."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hudi_reference import hudi_escape, hudi_unescape
from hypothesis import given, settings
from hypothesis import strategies as st

from hudi_sink.shared.errors import InvalidPartitionValue, TableFormatError
from hudi_sink.shared.hudi.naming import (
    HIVE_DEFAULT_PARTITION,
    BaseFileName,
    base_file_name,
    encode_partition_value,
    ensure_inside,
    new_file_id,
    next_instant_time,
    parse_base_file_name,
    parse_instant_time,
    partition_path,
    write_token,
)


def _assert_safe(encoded: str) -> None:
    assert "/" not in encoded and "\\" not in encoded and "\x00" not in encoded
    assert encoded not in (".", "..", "")
    assert not encoded.startswith(".")
    assert encoded not in ("metadata", "_delta_log")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, HIVE_DEFAULT_PARTITION),
        ("", HIVE_DEFAULT_PARTITION),
        ("sf", "sf"),
        ("München", "München"),  # non-ASCII kept as is, as Hudi does
        ("日本/東京", "日本%2F東京"),
        ("🙂", "🙂"),
        ("a/b", "a%2Fb"),
        ("a b", "a b"),
        ("100%", "100%25"),
        ("%2F", "%252F"),
        ("#1", "%231"),
        ("x=y", "x%3Dy"),
        ("a:b", "a%3Ab"),
        ("why?", "why%3F"),
        ("a*", "a%2A"),
        ("a\\b", "a%5Cb"),
        ("'\"{[]}^", "%27%22%7B%5B%5D}%5E"),  # '}' is not in Hudi's set
        ("tab\there\nnul\x00del\x7f", "tab%09here%0Anul%00del%7F"),
        ("+-_.~!$&(),;@`|<> ", "+-_.~!$&(),;@`|<> "),
        (".", "%2E"),
        ("..", "%2E."),
        ("...", "%2E.."),
        (".hoodie", "%2Ehoodie"),
        ("../../etc", "%2E.%2F..%2Fetc"),
        ("a.b", "a.b"),
        ("metadata", "%6Detadata"),
        ("_delta_log", "%5Fdelta_log"),
        ("metadata2", "metadata2"),
        (42, "42"),
        (1.5, "1.5"),
        (True, "true"),
        (date(2024, 1, 2), "2024-01-02"),
        (datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), "2024-01-02T03%3A04%3A05+00%3A00"),
    ],
)
def test_encode_partition_value(value: object, expected: str) -> None:
    encoded = encode_partition_value(value)
    assert encoded == expected
    _assert_safe(encoded)
    if isinstance(value, str) and value:
        assert hudi_unescape(encoded) == value


def test_equals_hudi_encoder_except_our_two_escapes() -> None:
    for value in ("München", "a/b", "100%", "#=:?*", "\x01x", "日本"):
        assert encode_partition_value(value) == hudi_escape(value)
    assert encode_partition_value(".x") == "%2E" + hudi_escape("x")
    assert hudi_escape(".x") == ".x"  # Hudi itself would write a hidden directory


def test_decoder_transcription_quirks() -> None:
    # Guards the reference decoder the property test relies on.
    assert hudi_unescape("M%C3%BCnchen") == "MÃ¼nchen"  # why byte-wise encoding was wrong
    assert hudi_unescape("100%") == "100%"
    assert hudi_unescape("%2") == "%2"
    assert hudi_unescape("%zz1") == "%zz1"
    assert hudi_unescape("%+F") == "\x0f"
    assert hudi_unescape("%-1") == "%-1"
    assert hudi_unescape("%2e%2E") == ".."


@settings(max_examples=500)
@given(st.text(max_size=40))
def test_hudi_decoder_reads_every_value_back(text: str) -> None:
    encoded = encode_partition_value(text)
    _assert_safe(encoded)
    if text:
        assert hudi_unescape(encoded) == text
        if not text.startswith(".") and text not in ("metadata", "_delta_log"):
            assert encoded == hudi_escape(text)


@given(st.text(alphabet=st.sampled_from(".%/#=:?*\\\x00é中🙂ab"), min_size=1, max_size=12))
def test_hudi_decoder_reads_hostile_values_back(text: str) -> None:
    encoded = encode_partition_value(text)
    _assert_safe(encoded)
    assert hudi_unescape(encoded) == text


def test_partition_path() -> None:
    assert partition_path("sf", None, hive_style=False) == ""
    assert partition_path("sf", None, hive_style=True) == ""
    assert partition_path("sf", "country", hive_style=False) == "sf"
    assert partition_path("sf", "country", hive_style=True) == "country=sf"
    assert partition_path(None, "country", hive_style=True) == f"country={HIVE_DEFAULT_PARTITION}"
    assert partition_path("../x", "country", hive_style=False) == "%2E.%2Fx"
    assert partition_path("a=b", "country", hive_style=True) == "country=a%3Db"
    assert partition_path("München", "city", hive_style=True) == "city=München"


def test_directory_names_longer_than_a_filesystem_allows_are_refused() -> None:
    assert len(encode_partition_value("a" * 255)) == 255
    assert encode_partition_value("ü" * 127) == "ü" * 127  # 254 bytes
    with pytest.raises(InvalidPartitionValue, match="256 UTF-8 bytes"):
        encode_partition_value("a" * 256)
    with pytest.raises(InvalidPartitionValue, match="256 UTF-8 bytes"):
        encode_partition_value("ü" * 128)
    with pytest.raises(InvalidPartitionValue, match="258 UTF-8 bytes"):
        encode_partition_value("a" * 255 + "/")  # the escape counts
    # Hive style: "country=" counts too, and the message names the field.
    value = "a" * (255 - len("country="))
    assert partition_path(value, "country", hive_style=True) == f"country={value}"
    assert partition_path(value + "a", "country", hive_style=False) == value + "a"
    with pytest.raises(InvalidPartitionValue, match=r"partition field 'country'.* 256 UTF-8"):
        partition_path(value + "a", "country", hive_style=True)
    with pytest.raises(InvalidPartitionValue, match="partition field 'city'"):
        partition_path("x" * 300, "city", hive_style=False)
    with pytest.raises(InvalidPartitionValue, match="lone surrogate"):
        encode_partition_value("\ud800" * 70)


def test_new_file_id_is_hudis_form_and_never_repeats() -> None:
    ids = [new_file_id() for _ in range(1000)]
    assert len(set(ids)) == len(ids)
    for fid in ids[:20]:
        prefix, _, index = fid.rpartition("-")
        assert index == "0"
        assert str(uuid.UUID(prefix)) == prefix and uuid.UUID(prefix).version == 4
        assert "_" not in fid and "/" not in fid


def test_write_token() -> None:
    assert write_token(2, 5, 99) == "2-5-99"
    fid = new_file_id()
    name = base_file_name(fid, write_token(2, 5, 99), "20250101000000001")
    assert parse_base_file_name(name) == BaseFileName(fid, "2-5-99", "20250101000000001")


def test_base_file_name_round_trip() -> None:
    fid = new_file_id()
    name = base_file_name(fid, "0-0-1", "20250101000000001")
    assert name == f"{fid}_0-0-1_20250101000000001.parquet"
    assert parse_base_file_name(name) == BaseFileName(fid, "0-0-1", "20250101000000001")


@pytest.mark.parametrize(
    "name",
    [
        ".hoodie_partition_metadata",
        "abc.parquet",
        "a_b_c.parquet",
        "a_b_20250101000000001.json",
        "a_b_c_20250101000000001.parquet",
        ".a.parquet.1234.tmp",
    ],
)
def test_parse_base_file_name_rejects(name: str) -> None:
    assert parse_base_file_name(name) is None


def test_base_file_name_rejects_underscores() -> None:
    with pytest.raises(ValueError):
        base_file_name("a_b", "0-0-1", "20250101000000001")
    with pytest.raises(ValueError):
        base_file_name("ab", "0_0", "20250101000000001")
    with pytest.raises(ValueError):
        base_file_name("ab", "0-0", "2025")


def test_next_instant_time_uses_now_when_ahead() -> None:
    now = datetime(2025, 3, 4, 5, 6, 7, 891_234, tzinfo=UTC)
    assert next_instant_time(None, now) == "20250304050607891"
    assert next_instant_time("20250304050607000", now) == "20250304050607891"


def test_next_instant_time_converts_to_utc() -> None:
    now = datetime(2025, 3, 4, 7, 0, 0, tzinfo=timezone(timedelta(hours=2)))
    assert next_instant_time(None, now) == "20250304050000000"


def test_next_instant_time_is_strictly_increasing_when_clock_lags() -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    assert next_instant_time("20250101000000000", now) == "20250101000000001"
    assert next_instant_time("20260101235959999", now) == "20260102000000000"
    assert next_instant_time("20260101235959", now) == "20260101235959001"
    latest = None
    seen = []
    for _ in range(50):
        latest = next_instant_time(latest, now)
        seen.append(latest)
    assert seen == sorted(set(seen))


def test_next_instant_time_rejects_naive_and_garbage() -> None:
    with pytest.raises(ValueError):
        next_instant_time(None, datetime(2025, 1, 1))  # noqa: DTZ001
    with pytest.raises(TableFormatError):
        next_instant_time("yesterday", datetime.now(UTC))


def test_parse_instant_time() -> None:
    assert parse_instant_time("20250102030405678") == datetime(
        2025, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC
    )
    with pytest.raises(TableFormatError):
        parse_instant_time("20251399000000000")


def test_ensure_inside() -> None:
    assert ensure_inside("/t", "sf/f.parquet") == "/t/sf/f.parquet"
    assert ensure_inside("/t/", "a/../b") == "/t/b"
    assert ensure_inside("/t", "") == "/t"
    assert ensure_inside("file:///t", "sf/x") == "file:///t/sf/x"
    assert ensure_inside("/t", "%2E.%2F..%2Fetc/x") == "/t/%2E.%2F..%2Fetc/x"
    for bad in ("..", "../x", "a/../../x", "/etc/passwd", "a/\x00", "a\\..\\b"):
        with pytest.raises(TableFormatError):
            ensure_inside("/t", bad)
