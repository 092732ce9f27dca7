"""The deleter's decision table (docs/design.md §4.3), one row per rule, plus the intent message and
the snapshot/orphan-scan it decides from."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from table_files import FS, abort, complete, write_file

from hudi_sink.services.deleter.decision import Outcome, decide
from hudi_sink.services.deleter.table_state import TableSnapshot, load_snapshot, scan_orphans
from hudi_sink.shared.deletion.intent import (
    DeletionDecodeError,
    DeletionReason,
    IntentHeaders,
    PendingDelete,
    intent_for_staged_file,
)
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.storage.fs import FileInfo

BASE = "/tbl"
C1, C2, R, P, MID = (f"2025010100000000{i}" for i in (1, 2, 3, 4, 5))
"""C1, C2 completed; R rolled back; P pending; MID decided ABORT, rollback not finished."""
FUTURE = "20250101000000009"
NOW = 1_000_000.0
MIN_AGE = 3600.0

LISTED = f"{BASE}/de/aaaa-1_0-0-1_{C1}.parquet"


def base_file(instant: str, part: str = "de", fid: str = "bbbb-1") -> str:
    return f"{BASE}/{part}/{fid}_0-0-1_{instant}.parquet"


def staged(instant: str) -> str:
    return f"{BASE}/.hoodie/.temp/{instant}/de/cccc-1_0-0-1_{instant}.parquet"


SNAPSHOT = TableSnapshot(
    table_path=BASE,
    completed=frozenset({C1, C2}),
    pending=frozenset({P, MID}),
    rolled_back=frozenset({R, MID}),
    listed_files=frozenset({LISTED}),
    latest_instant=MID,
    loaded_at=0.0,
)


def intent(path: str, reason: DeletionReason, killing: str | None = None, *,
           table: str = BASE) -> PendingDelete:
    return PendingDelete(table_path=table, file_path=path, reason=reason, killing_instant=killing,
                         not_before=NOW)


def info(path: str, age_s: float = 2 * MIN_AGE, is_dir: bool = False) -> FileInfo:
    return FileInfo(path=path, name=path.rsplit("/", 1)[-1], size=10, mtime=NOW - age_s,
                    is_dir=is_dir)


def run(item: PendingDelete, file: FileInfo | None | str = "exists") -> tuple[Outcome, bool]:
    present = info(item.file_path) if file == "exists" else file
    assert not isinstance(present, str)
    decision = decide(item, SNAPSHOT, present, now=NOW, orphan_min_age_s=MIN_AGE)
    return decision.outcome, decision.recheck


U, A, REP, CL, ORPH = (DeletionReason.UNCOMMITTED_FILE, DeletionReason.ABORTED_INSTANT,
                    DeletionReason.REPLACED, DeletionReason.CLEANED, DeletionReason.ORPHAN)


# --- rule 1: only this table's data and staging -------------------------------------------
@pytest.mark.parametrize("item", [
    intent("/other/de/x_0-0-1_20250101000000003.parquet", A, R, table="/other"),
    intent("/etc/passwd", ORPH),
    intent(f"{BASE}/../etc/passwd", A, R),
    intent(f"{BASE}/.hoodie/hoodie.properties", ORPH),
    intent(f"{BASE}/.hoodie/{C1}.commit", A, R),
    intent(f"{BASE}/.hoodie/.sink/log/000000000001.json", ORPH),
    intent(f"{BASE}/de/.hoodie_partition_metadata", A, R),
])
def test_foreign_paths_and_metadata_are_never_deleted(item: PendingDelete) -> None:
    assert run(item) == (Outcome.KEEP, False)


# --- rule 2: a listed file is never deleted, whatever the intent says ----------------------
@pytest.mark.parametrize("reason,killing", [(U, C1), (U, C2), (A, R), (REP, C2), (CL, C2), (ORPH, None)])
def test_file_listed_by_a_completed_commit_is_kept(reason: DeletionReason, killing: str | None) -> None:
    assert run(intent(LISTED, reason, killing)) == (Outcome.KEEP, False)


def test_listed_check_compares_normalised_paths() -> None:
    spelled = f"{BASE}/de/./../de/aaaa-1_0-0-1_{C1}.parquet"
    assert run(intent(spelled, A, R)) == (Outcome.KEEP, False)


def test_listed_file_missing_is_still_not_reported_as_deleted() -> None:
    assert run(intent(LISTED, A, R), None) == (Outcome.KEEP, False)


# --- rule 3: missing is success --------------------------------------------------------------
@pytest.mark.parametrize("reason,killing", [(U, C2), (A, R), (A, P), (REP, P), (ORPH, None)])
def test_missing_file_is_success(reason: DeletionReason, killing: str | None) -> None:
    assert run(intent(staged(R), reason, killing), None) == (Outcome.ALREADY_GONE, False)


def test_directory_is_kept() -> None:
    path = f"{BASE}/.hoodie/.temp/{R}"
    assert run(intent(path, A, R), info(path, is_dir=True)) == (Outcome.KEEP, False)


# --- rule 4: files of pending instants are in use --------------------------------------------
def test_staged_file_of_pending_instant_waits() -> None:
    assert run(intent(staged(P), A, P)) == (Outcome.RETRY_LATER, True)
    assert run(intent(staged(P), U, P)) == (Outcome.RETRY_LATER, True)


def test_forged_killing_instant_cannot_free_a_pending_instants_file() -> None:
    # The instant is read from the path: R is rolled back, but the file belongs to P.
    assert run(intent(staged(P), A, R)) == (Outcome.RETRY_LATER, True)
    assert run(intent(base_file(P), REP, C2)) == (Outcome.RETRY_LATER, True)


def test_decided_abort_wins_over_a_rollback_in_progress() -> None:
    assert run(intent(staged(MID), A, MID)) == (Outcome.DELETE, False)


# --- rule 5: UNCOMMITTED_FILE / ABORTED_INSTANT ----------------------------------------------
def test_unlisted_staged_file_of_completed_instant_is_deleted() -> None:
    assert run(intent(staged(C2), U, C2)) == (Outcome.DELETE, False)


def test_file_of_rolled_back_instant_is_deleted() -> None:
    assert run(intent(staged(R), A, R)) == (Outcome.DELETE, False)
    assert run(intent(base_file(R), A, R)) == (Outcome.DELETE, False)


@pytest.mark.parametrize("reason", [U, A])
def test_unknown_future_killing_instant_waits(reason: DeletionReason) -> None:
    assert run(intent(staged(FUTURE), reason, FUTURE)) == (Outcome.RETRY_LATER, True)


@pytest.mark.parametrize("reason", [U, A])
def test_unknown_instant_older_than_the_latest_commit_is_over(reason: DeletionReason) -> None:
    # Rolled back, and its ABORT decision already trimmed from the sink log: instant times
    # only grow, so it can never become pending or completed again.
    older_unknown = "20240101000000000"
    assert run(intent(staged(older_unknown), reason, older_unknown)) == (Outcome.DELETE, False)


# --- rule 5: REPLACED / CLEANED --------------------------------------------------------------
@pytest.mark.parametrize("reason", [REP, CL])
def test_replaced_or_cleaned(reason: DeletionReason) -> None:
    old = base_file(C1, fid="dddd-1")  # unlisted file of an old instant
    assert run(intent(old, reason, C2)) == (Outcome.DELETE, False)
    assert run(intent(old, reason, R)) == (Outcome.KEEP, False)
    assert run(intent(old, reason, P)) == (Outcome.RETRY_LATER, True)
    assert run(intent(old, reason, FUTURE)) == (Outcome.RETRY_LATER, True)


# --- rule 5: ORPHAN --------------------------------------------------------------------------
def test_old_orphan_is_deleted_young_one_kept() -> None:
    path = base_file(R)
    assert run(intent(path, ORPH)) == (Outcome.DELETE, False)
    assert run(intent(path, ORPH), info(path, age_s=MIN_AGE - 1)) == (Outcome.KEEP, False)
    leftover = f"{BASE}/de/.x.parquet.0123.tmp"  # a crashed writer's temp file, no instant
    assert run(intent(leftover, ORPH)) == (Outcome.DELETE, False)


def test_orphan_of_pending_or_unseen_instant_is_kept() -> None:
    assert run(intent(staged(P), ORPH)) == (Outcome.KEEP, True)
    assert run(intent(base_file(FUTURE), ORPH)) == (Outcome.KEEP, True)


# --- the intent message --------------------------------------------------------------------
def test_intent_round_trip_and_key() -> None:
    item = intent(staged(R), A, R).model_copy(update={"attempt": 2, "first_failure_at": 5.0})
    again = PendingDelete.decode(item.encode())
    assert again == item
    assert again.key() == staged(R).encode()


@pytest.mark.parametrize("raw", [None, b"", b"not json", b"{}", b'{"table_path": "/t"}'])
def test_undecodable_intent(raw: bytes | None) -> None:
    with pytest.raises(DeletionDecodeError):
        PendingDelete.decode(raw)


def test_intent_validation() -> None:
    with pytest.raises(ValueError, match="killing_instant"):
        PendingDelete(table_path=BASE, file_path=staged(R), reason=A)
    with pytest.raises(ValueError, match="absolute"):
        PendingDelete(table_path=BASE, file_path="de/x.parquet", reason=ORPH)
    with pytest.raises(ValueError, match="instant"):
        PendingDelete(table_path=BASE, file_path=staged(R), reason=A, killing_instant="yesterday")


def test_intent_for_staged_file_reads_the_name() -> None:
    item = intent_for_staged_file(BASE + "/", staged(P), P, A, not_before=7.0)
    assert (item.file_id, item.file_instant, item.killing_instant) == ("cccc-1", P, P)
    assert item.table_path == BASE and item.not_before == 7.0 and item.attempt == 0
    odd = intent_for_staged_file(BASE, f"{BASE}/.hoodie/.temp/{P}/MARKERS", P, U, not_before=0)
    assert (odd.file_id, odd.file_instant) == (None, P)


def test_headers_round_trip() -> None:
    headers = IntentHeaders(source_topic="s-deletion", source_partition=1, source_offset=7,
                            error_class="PermissionError", error_message="x" * 5000, attempt=3)
    parsed = IntentHeaders.from_kafka(headers.to_kafka())
    assert parsed.source_offset == 7 and parsed.attempt == 3
    assert parsed.error_message is not None and len(parsed.error_message) == 1000


# --- the snapshot and the orphan scan, on a real table --------------------------------------
def test_snapshot_and_scan_on_disk(tmp_path: Path) -> None:
    base = tmp_path / "t"
    table = HudiTable(FS, str(base))
    listed = complete(table, C1, "aaaa-1", age_s=7200)
    table.start_instant(R)
    abort(table, R)
    table.start_instant(P)
    write_file(base / f".hoodie/.temp/{P}/de/cccc-1_0-0-1_{P}.parquet", age_s=7200)
    orphan = write_file(base / f"de/bbbb-1_0-0-1_{R}.parquet", age_s=7200)
    write_file(base / f"de/eeee-1_0-0-1_{R}.parquet")  # young
    staged_orphan = write_file(base / f".hoodie/.temp/{R}/de/ffff-1_0-0-1_{R}.parquet", age_s=7200)
    write_file(base / f"de/gggg-1_0-0-1_{FUTURE}.parquet", age_s=7200)  # unseen instant
    write_file(base / "de/.hoodie_partition_metadata", age_s=7200)

    snap = load_snapshot(FS, str(base))
    assert snap.completed == {C1} and snap.pending == {P} and snap.rolled_back == {R}
    assert snap.is_listed(listed) and snap.latest_instant == P

    found = scan_orphans(FS, snap, now=time.time(), min_age_s=3600)
    assert sorted(o.path for o in found) == sorted([orphan, staged_orphan])
