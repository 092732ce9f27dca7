"""Names in a Hudi table: partition encoding is path-safe, file names parse back, instants grow."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, timezone
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.errors import TableFormatError
from shared.hudi.naming import (
    HIVE_DEFAULT_PARTITION,
    BaseFileName,
    base_file_name,
    encode_partition_value,
    ensure_inside,
    file_id,
    next_instant_time,
    parse_base_file_name,
    parse_instant_time,
    partition_path,
    write_token,
)


def _assert_safe(encoded: str) -> None:
    assert "/" not in encoded
    assert encoded not in (".", "..", "")
    assert not encoded.startswith(".")
    assert encoded not in ("metadata", "_delta_log")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, HIVE_DEFAULT_PARTITION),
        ("", HIVE_DEFAULT_PARTITION),
        ("sf", "sf"),
        ("a/b", "a%2Fb"),
        ("a b", "a%20b"),
        (".", "%2E"),
        ("..", "%2E."),
        (".hoodie", "%2Ehoodie"),
        ("../../etc", "%2E.%2F..%2Fetc"),
        ("metadata", "%6Detadata"),
        ("_delta_log", "%5Fdelta_log"),
        ("x=y", "x%3Dy"),
        ("100%", "100%25"),
        (42, "42"),
        (True, "true"),
        (date(2024, 1, 2), "2024-01-02"),
        (datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), "2024-01-02T03%3A04%3A05%2B00%3A00"),
    ],
)
def test_encode_partition_value(value: object, expected: str) -> None:
    encoded = encode_partition_value(value)
    assert encoded == expected
    _assert_safe(encoded)


@given(st.text(max_size=40))
def test_encode_partition_value_is_always_safe_and_reversible(text: str) -> None:
    encoded = encode_partition_value(text)
    _assert_safe(encoded)
    if text:
        assert unquote(encoded) == text


def test_partition_path() -> None:
    assert partition_path("sf", None, hive_style=False) == ""
    assert partition_path("sf", None, hive_style=True) == ""
    assert partition_path("sf", "country", hive_style=False) == "sf"
    assert partition_path("sf", "country", hive_style=True) == "country=sf"
    assert partition_path(None, "country", hive_style=True) == f"country={HIVE_DEFAULT_PARTITION}"
    assert partition_path("../x", "country", hive_style=False) == "%2E.%2Fx"


def test_file_id_shape_and_uniqueness() -> None:
    instant = "20250101000000001"
    fid = file_id("my_topic", 3, "sf", instant, 7)
    assert re.fullmatch(r"[0-9a-f]{8}-20250101000000001-7-0", fid)
    assert "_" not in fid
    assert fid == file_id("my_topic", 3, "sf", instant, 7)  # deterministic
    others = {
        file_id("my_topic", 4, "sf", instant, 7),
        file_id("other", 3, "sf", instant, 7),
        file_id("my_topic", 3, "la", instant, 7),
        file_id("my_topic", 3, "sf", "20250101000000002", 7),
        file_id("my_topic", 3, "sf", instant, 8),
    }
    assert fid not in others and len(others) == 5


def test_write_token() -> None:
    assert write_token(2, 5, 99) == "2-5-99"


def test_base_file_name_round_trip() -> None:
    fid = file_id("t", 0, "", "20250101000000001", 0)
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
