"""``table read --as-of``: the instant hudi-rs reads a timestamp as, and the retained history
(recorded cleans) it is checked against."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from slice_tables import SliceTable

from hudi_sink.cli.main import main
from hudi_sink.shared.hudi.replace import CleanRecord, ReplaceTimeline, retention_floor
from hudi_sink.shared.hudi.time_travel import AsOfError, as_of_instant

T = [f"2025010100000{i:04d}" for i in range(0, 10)]


@pytest.mark.parametrize("value,instant", [
    ("20250101000000002", "20250101000000002"),
    ("20250101000000", "20250101000000"),
    (" 20250101000000002 ", "20250101000000002"),
    ("1735689600", "20250101000000000"),  # epoch seconds
    ("1735689600002", "20250101000000002"),  # milliseconds
    ("1735689600002345", "20250101000000002"),  # microseconds
    ("1735689600002345678", "20250101000000002"),  # nanoseconds
    ("2025", "19700101003345000"),  # short digits are epoch seconds, as in hudi-rs
    ("2025-01-01T00:00:00.002Z", "20250101000000002"),
    ("2025-01-01T01:00:00.002+01:00", "20250101000000002"),
])
def test_as_of_is_read_as_hudi_rs_reads_it(value: str, instant: str) -> None:
    assert as_of_instant(value) == instant


@pytest.mark.parametrize("value", ["garbage", "2025-01-01", "2025-01-01T00:00:00", "-1", ""])
def test_what_hudi_rs_cannot_read_is_refused(value: str) -> None:
    with pytest.raises(AsOfError):
        as_of_instant(value)


def test_the_parse_agrees_with_hudi_rs_on_a_table(tmp_path: Path) -> None:
    st = SliceTable.create(tmp_path / "orders")
    for n in (1, 2, 3):
        st.commit(T[n], {f"g{n}": [f"r{n}"]})
    for value in ("2025-01-01T00:00:00.002Z", "1735689600002", "1735689600", "20250101000000",
                  "2025-01-01T00:00:00.003+00:00", "2025-01-01T01:00:00.001+01:00"):
        assert st.read(as_of=value) == st.read(as_of=as_of_instant(value)), value


def _read_json(base: Path, as_of: str, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["table", "read", "--path", str(base), "--as-of", as_of, "--json"]) == 0
    result: dict[str, object] = json.loads(capsys.readouterr().out)
    return result


def test_as_of_before_the_first_commit_is_an_empty_table_not_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st = SliceTable.create(tmp_path / "orders")
    st.commit(T[2], {"g": ["a"]})
    st.commit(T[3], {"g": ["b"]})
    early = _read_json(st.base, T[1], capsys)
    assert early["rows"] == 0 and early["as_of_instant"] == T[1]
    assert isinstance(early["note"], str) and T[2] in early["note"] and "empty" in early["note"]
    at_first = _read_json(st.base, T[2], capsys)
    assert at_first["rows"] == 1 and at_first["note"] is None
    # archived instants still count: the first commit is T2 whatever the active timeline says
    timeline = ReplaceTimeline(st.table())
    timeline.archive(timeline.completed()[0])
    assert _read_json(st.base, T[2], capsys)["note"] is None
    assert T[2] in str(_read_json(st.base, T[1], capsys)["note"])


def test_an_unreadable_as_of_exits_2_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st = SliceTable.create(tmp_path / "orders")
    st.commit(T[2], {"g": ["a"]})
    assert main(["table", "read", "--path", str(st.base), "--as-of", "yesterday"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--as-of" in err[0] and "'yesterday'" in err[0], err


def test_without_a_clean_every_instant_is_readable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st = SliceTable.create(tmp_path / "orders")
    for n in (1, 2, 3, 4):
        st.commit(T[n], {"g": [f"r{n}"]})
    assert _read_json(st.base, T[1], capsys)["rows"] == 1
    assert _read_json(st.base, T[3], capsys)["rows"] == 3


def test_the_retained_history_is_the_greatest_retention_of_any_clean() -> None:
    """Retention can shrink back (commits_retained raised): what older cleans deleted stays
    deleted, so the floor is the greatest earliest retained instant of all."""
    def record(instant: str, retained: str) -> CleanRecord:
        return CleanRecord(instant, retained, [], [])

    assert retention_floor([]) is None
    records = [record(T[5], T[3]), record(T[8], T[2]), record(T[6], T[3])]
    floor = retention_floor(records)
    assert floor is not None and (floor.instant, floor.earliest_retained) == (T[6], T[3])
