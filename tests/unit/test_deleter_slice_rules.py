"""The deleter's rule 2 with file slices (docs/design.md §4.3), one row per case: a file a
completed commit lists goes only under a CLEANED intent of a recorded clean, and only when it
is superseded outside that clean's retention (KEEP_LATEST_COMMITS: every slice at or after the
clean's earliest retained instant E and the latest slice before E stay).

The snapshot: completed C2..C6 on the active timeline (a base file of C0 or C1 is archived as
committed), P pending, clean K recorded with E = C4, clean K2 with E = C2 (older retention),
clean U decided but not recorded.
"""

from __future__ import annotations

from types import MappingProxyType

import pytest

from hudi_sink.services.deleter.decision import Outcome, decide
from hudi_sink.services.deleter.table_state import TableSnapshot
from hudi_sink.shared.deletion.intent import DeletionReason, PendingDelete
from hudi_sink.shared.storage.fs import FileInfo

BASE = "/tbl"
C0, C1, C2, C3, C4, C5, C6, P, K, K2, U = (f"202501010000000{i:02d}" for i in range(11))
NOW = 1_000_000.0
CL = DeletionReason.CLEANED


def slice_path(fid: str, instant: str, part: str = "de") -> str:
    return f"{BASE}/{part}/{fid}_0-0-1_{instant}.parquet"


LISTED = {
    # group:      slices listed by completed commits
    "latest": [C5],                  # one slice
    "chain": [C2, C3, C5],           # C2 superseded by C3 < E: cleanable; C3 latest before E
    "at-e": [C3, C4],                # C3 superseded by a slice AT E: the latest before E
    "inside": [C4, C5, C6],          # C4, C5 superseded but at or after E
    "archived": [C2],                # plus C1, archived (older than the timeline start)
    "pending-later": [C2],           # its next slice belongs to pending P (not listed)
    "replaced-early": [C2, C3],      # replaced by C3 <= E
    "replaced-late": [C3],           # replaced by C5 > E, one slice
}
LISTED_FILES = frozenset(slice_path(g, t) for g, times in LISTED.items() for t in times) | {
    slice_path("chain", C3, part="fr"),  # same file id, another partition: another group
}
SNAPSHOT = TableSnapshot(
    table_path=BASE,
    completed=frozenset({C2, C3, C4, C5, C6, K, K2}),
    pending=frozenset({P}),
    rolled_back=frozenset(),
    listed_files=LISTED_FILES,
    latest_instant=U,
    loaded_at=0.0,
    replaced=MappingProxyType({("de", "replaced-early"): C3, ("de", "replaced-late"): C5}),
    cleans=MappingProxyType({K: C4, K2: C2}),
    decided=frozenset({U}),
    timeline_start=C2,
)


def run(path: str, reason: DeletionReason = CL, clean: str | None = K,
        exists: bool = True) -> Outcome:
    item = PendingDelete(table_path=BASE, file_path=path, reason=reason, killing_instant=clean,
                         not_before=NOW)
    info = FileInfo(path=path, name=path.rsplit("/", 1)[-1], size=10, mtime=0.0,
                    is_dir=False) if exists else None
    return decide(item, SNAPSHOT, info, now=NOW, orphan_min_age_s=0).outcome


@pytest.mark.parametrize("path,outcome", [
    # the latest slice of a group is never deleted
    (slice_path("latest", C5), Outcome.KEEP),
    (slice_path("chain", C5), Outcome.KEEP),
    (slice_path("inside", C6), Outcome.KEEP),
    # superseded, but inside retention (at or after E): kept for time travel
    (slice_path("inside", C4), Outcome.KEEP),
    (slice_path("inside", C5), Outcome.KEEP),
    # the latest slice before E: serves reads from E until the group's next slice
    (slice_path("chain", C3), Outcome.KEEP),
    (slice_path("at-e", C3), Outcome.KEEP),
    # superseded by a later slice before E: no retained read returns it
    (slice_path("chain", C2), Outcome.DELETE),
    # archived as committed, superseded by a listed slice before E
    (slice_path("archived", C1), Outcome.DELETE),
    # its later slice is of a pending instant: not superseded (yet)
    (slice_path("pending-later", C2), Outcome.KEEP),
    # the same file id in another partition is another group
    (slice_path("chain", C3, part="fr"), Outcome.KEEP),
    # archived, and nothing listed supersedes it (its later slices, if any, archived too):
    # kept, the safe side
    (slice_path("solo", C0, part="fr"), Outcome.KEEP),
    # replaced groups (the existing rule): replaced at or before E goes, whole
    (slice_path("replaced-early", C2), Outcome.DELETE),
    (slice_path("replaced-early", C3), Outcome.DELETE),
    # replaced after E, and its one slice superseded by nothing: kept
    (slice_path("replaced-late", C3), Outcome.KEEP),
])
def test_cleaned_intent_on_a_slice(path: str, outcome: Outcome) -> None:
    assert run(path) is outcome


def test_the_clean_s_own_retention_decides() -> None:
    """K2 retained from C2: chain@C2 is at its E, so it stays; the group replaced by C3
    after that E stays too. K (E = C4) deletes both."""
    assert run(slice_path("chain", C2), clean=K2) is Outcome.KEEP
    assert run(slice_path("replaced-early", C2), clean=K2) is Outcome.KEEP  # replaced by C3 > C2


@pytest.mark.parametrize("reason", [DeletionReason.UNCOMMITTED_FILE, DeletionReason.ABORTED_INSTANT,
                                    DeletionReason.REPLACED, DeletionReason.ORPHAN])
def test_only_a_clean_frees_a_superseded_slice(reason: DeletionReason) -> None:
    clean = None if reason is DeletionReason.ORPHAN else C6
    assert run(slice_path("chain", C2), reason=reason, clean=clean) is Outcome.KEEP


def test_a_slice_of_a_pending_instant_waits() -> None:
    """Not listed, so rule 2 does not protect it; rule 4 does: its own instant is pending."""
    assert run(slice_path("pending-later", P)) is Outcome.RETRY_LATER


def test_a_clean_not_recorded_yet_waits_and_a_gone_slice_is_success() -> None:
    assert run(slice_path("chain", C2), clean=U) is Outcome.RETRY_LATER
    assert run(slice_path("chain", C2), exists=False) is Outcome.ALREADY_GONE


def test_a_snapshot_that_misses_the_later_slice_keeps_the_file() -> None:
    """Supersession only grows (completed is terminal): a cached snapshot from before the
    later slice's commit — or after that commit was archived — answers KEEP, never a
    DELETE a fresh one would not give."""
    stale = TableSnapshot(
        table_path=BASE, completed=frozenset({C1, C2, K}), pending=frozenset(),
        rolled_back=frozenset(), listed_files=frozenset({slice_path("chain", C2)}),
        latest_instant=K, loaded_at=0.0, cleans=MappingProxyType({K: C4}), timeline_start=C1)
    item = PendingDelete(table_path=BASE, file_path=slice_path("chain", C2), reason=CL,
                         killing_instant=K, not_before=NOW)
    info = FileInfo(path=item.file_path, name="x", size=1, mtime=0.0, is_dir=False)
    assert decide(item, stale, info, now=NOW, orphan_min_age_s=0).outcome is Outcome.KEEP
    assert run(slice_path("chain", C2)) is Outcome.DELETE
