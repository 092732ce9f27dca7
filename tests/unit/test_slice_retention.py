"""File groups with several slices on real files: the maintenance view, the cleaner's plan,
archival, the deleter's decision and ``table read --as-of`` all follow KEEP_LATEST_COMMITS per
file group, and what hudi-rs reads at every retained instant survives the clean.

The table (commits_retained 3, so the earliest retained instant E is T4):

    group  slices              kept                         cleanable
    g1     T1 T2 T3 T5         T3 (latest before E), T5     T1 (T2 is later, before E), T2 (T3)
    g2     T1 T5               T1 (latest before E), T5     -
    g3     T2 T4               T2 (latest before E), T4=E   -
    g4     T4 T6               T4, T6                       -
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from slice_tables import FS, SliceTable
from test_committer_fencing import Env
from test_maintenance import RecordingDisposal

from hudi_sink.cli.main import main
from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.maintenance.archival import Archiver
from hudi_sink.services.coordinator.maintenance.cleaning import Cleaner
from hudi_sink.services.coordinator.maintenance.plan import plan_clustering
from hudi_sink.services.coordinator.maintenance.view import load_view
from hudi_sink.services.deleter.decision import Outcome, decide
from hudi_sink.services.deleter.table_state import load_snapshot
from hudi_sink.shared.deletion.intent import DeletionReason, PendingDelete
from hudi_sink.shared.hudi.replace import ReplaceTimeline

T = [f"2025010100000{i:04d}" for i in range(0, 30)]
RETAINED = 3


@pytest.fixture
def st(tmp_path: Path) -> SliceTable:
    table = SliceTable.create(tmp_path / "orders")
    table.commit(T[1], {"g1": ["a1"], "g2": ["b1"]})
    table.commit(T[2], {"g1": ["a2"], "g3": ["c1"]})
    table.commit(T[3], {"g1": ["a3"]})
    table.commit(T[4], {"g3": ["c2"], "g4": ["d1"]})
    table.commit(T[5], {"g1": ["a5"], "g2": ["b5"]})
    table.commit(T[6], {"g4": ["d6"]})
    return table


def _committer(st: SliceTable, disposal: RecordingDisposal | None = None) -> TableCommitter:
    env = Env(st.base, st.config, st.config.table_schema())
    return env.committer("a", disposal=disposal or RecordingDisposal())


def _cleaner(st: SliceTable, disposal: RecordingDisposal | None = None, *,
             retained: int = RETAINED, committer: TableCommitter | None = None) -> Cleaner:
    return Cleaner(committer or _committer(st, disposal), ReplaceTimeline(st.table()),
                   commits_retained=retained)


def _decide(st: SliceTable, path: str, clean: str,
            reason: DeletionReason = DeletionReason.CLEANED) -> Outcome:
    item = PendingDelete(table_path=str(st.base), file_path=path, reason=reason,
                         killing_instant=clean, not_before=0)
    snapshot = load_snapshot(FS, str(st.base))
    return decide(item, snapshot, FS.file_info(path), now=1e12, orphan_min_age_s=0).outcome


def _slices(st: SliceTable) -> list[str]:
    return [st.path(fid, t) for (_p, fid, t) in sorted(st.paths)]


def test_view_shows_one_live_slice_per_group_and_the_rest_superseded(st: SliceTable) -> None:
    view = load_view(ReplaceTimeline(st.table()))
    assert sorted((f.file_id, f.instant) for f in view.live) == [
        ("g1", T[5]), ("g2", T[5]), ("g3", T[4]), ("g4", T[6])]
    assert sorted((f.file_id, f.instant) for f in view.superseded) == [
        ("g1", T[1]), ("g1", T[2]), ("g1", T[3]), ("g2", T[1]), ("g3", T[2]), ("g4", T[4])]
    assert view.files_per_partition() == {"de": 4}  # what a snapshot reads: 4 file groups
    groups = plan_clustering(view.live, min_files=3, small_file_bytes=1 << 20,
                             target_file_bytes=1 << 24)
    assert [sorted(f.file_id for f in g) for g in groups] == [["g1", "g2", "g3", "g4"]]
    assert st.read() == ["a1", "a2", "a3", "a5", "b1", "b5", "c1", "c2", "d1", "d6"]


def test_clean_plans_superseded_slices_outside_retention_only(st: SliceTable) -> None:
    disposal = RecordingDisposal()
    cleaner = _cleaner(st, disposal)
    record = cleaner.plan(load_view(ReplaceTimeline(st.table())), T[7])
    assert record is not None
    assert record.earliest_retained == T[4]
    assert record.groups == []
    assert record.files == sorted(st.paths[("de", "g1", t)] for t in (T[1], T[2]))
    assert record.slices == [(st.paths[("de", "g1", T[1])], T[2]),
                             (st.paths[("de", "g1", T[2])], T[3])]
    cleaner.run(record)
    assert disposal.sent == [(T[7], [f"{st.base}/{f}" for f in record.files], "CLEANED")]
    assert all((st.base / f).exists() for f in record.files)  # the deleter deletes, not us
    # Covered by the recorded clean: the next pass plans nothing new.
    assert cleaner.plan(load_view(ReplaceTimeline(st.table())), T[8]) is None


def test_deleter_deletes_exactly_the_cleaned_slices_and_every_retained_read_survives(
        st: SliceTable, capsys: pytest.CaptureFixture[str]) -> None:
    before = {t: st.read(as_of=t) for t in T[1:7]}
    snapshot_before = st.read()
    cleaner = _cleaner(st)
    record = cleaner.plan(load_view(ReplaceTimeline(st.table())), T[7])
    assert record is not None
    cleaner.run(record)
    cleaned = {str(st.base / f) for f in record.files}
    for path in _slices(st):
        outcome = _decide(st, path, T[7])
        assert outcome is (Outcome.DELETE if path in cleaned else Outcome.KEEP), path
        # no other reason frees a listed slice
        for reason in (DeletionReason.UNCOMMITTED_FILE, DeletionReason.REPLACED):
            assert _decide(st, path, T[7], reason) is Outcome.KEEP
        assert _decide(st, path, T[7], DeletionReason.ORPHAN) is Outcome.KEEP
    for path in cleaned:
        os.remove(path)
        assert _decide(st, path, T[7]) is Outcome.ALREADY_GONE
    assert st.read() == snapshot_before
    for t in T[4:7]:  # every retained instant reads as before
        assert st.read(as_of=t) == before[t], t
    assert st.read(as_of=T[2]) != before[T[2]]  # older: rows silently missing (hudi-rs)
    # ... so table read refuses it, in one line naming --as-of, and answers from E on
    assert main(["table", "read", "--path", str(st.base), "--as-of", T[3], "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--as-of" in err[0] and "retained history" in err[0], err
    assert T[4] in err[0] and T[7] in err[0]
    assert main(["table", "read", "--path", str(st.base), "--as-of", T[4], "--json"]) == 0
    # The clean's record stays (the table's retained history) though its files are gone.
    assert cleaner.plan(load_view(ReplaceTimeline(st.table())), T[8]) is None
    assert [r.instant for r in ReplaceTimeline(st.table()).cleans()] == [T[7]]


def test_a_clean_with_older_retention_frees_fewer_slices(st: SliceTable) -> None:
    """The deleter re-checks against the clean's own earliest retained instant."""
    cleaner = _cleaner(st, retained=4)
    record = cleaner.plan(load_view(ReplaceTimeline(st.table())), T[7])
    assert record is not None and record.earliest_retained == T[3]
    assert record.files == [st.paths[("de", "g1", T[1])]]
    cleaner.run(record)
    assert _decide(st, st.path("g1", T[1]), T[7]) is Outcome.DELETE
    assert _decide(st, st.path("g1", T[2]), T[7]) is Outcome.KEEP  # latest before T3


def test_archival_waits_for_cleanable_slices_and_the_deleter_still_decides(st: SliceTable) -> None:
    committer = _committer(st)
    cleaner = _cleaner(st, committer=committer)
    timeline = ReplaceTimeline(st.table())
    record = cleaner.plan(load_view(timeline), T[7])
    assert record is not None
    cleaner.run(record)
    archiver = Archiver(committer, timeline, max_instants=4, min_instants=2,
                        commits_retained=RETAINED)
    # E is T4; the slices superseding the cleanable ones (T2, T3) must stay on the active
    # timeline while those are on disk: the deleter proves supersession from listed commits.
    assert [i.time for i in archiver.plan(load_view(timeline))] == [T[1]]
    archiver.run(T[20], archiver.plan(load_view(timeline)))
    # g1@T1 now counts as committed by age (archived); T2 still lists the later slice.
    assert _decide(st, st.path("g1", T[1]), T[7]) is Outcome.DELETE
    assert _decide(st, st.path("g2", T[1]), T[7]) is Outcome.KEEP
    for f in record.files:
        os.remove(st.base / f)
    assert [i.time for i in archiver.plan(load_view(timeline))] == [T[2], T[3]]


def test_clean_skips_slices_whose_later_slice_was_archived(st: SliceTable) -> None:
    """A superseding slice off the active timeline cannot be proven by the deleter (it reads
    the active commits): such a slice is not handed to it."""
    timeline = ReplaceTimeline(st.table())
    for instant in timeline.completed()[:3]:  # T1..T3, as archival before this rule might
        timeline.archive(instant)
    cleaner = _cleaner(st, retained=2)
    record = cleaner.plan(load_view(timeline), T[7])
    assert record is not None and record.earliest_retained == T[5]
    # g1@T1 and g1@T2 are superseded before E by T2 and T3, both archived: kept. g3@T2 is
    # superseded by T4, still active.
    assert record.files == [st.paths[("de", "g3", T[2])]]
    cleaner.run(record)
    assert _decide(st, st.path("g3", T[2]), T[7]) is Outcome.DELETE
    assert _decide(st, st.path("g1", T[1]), T[7]) is Outcome.KEEP


def test_a_later_clean_moves_the_retained_history_and_replaces_the_done_record(
        st: SliceTable, capsys: pytest.CaptureFixture[str]) -> None:
    cleaner = _cleaner(st)
    first = cleaner.plan(load_view(ReplaceTimeline(st.table())), T[7])
    assert first is not None
    cleaner.run(first)
    for f in first.files:  # the deleter, after the first clean
        os.remove(st.base / f)
    st.commit(T[8], {"g1": ["a8"]})
    st.commit(T[9], {"g2": ["b9"]})
    st.commit(T[10], {"g3": ["c10"]})
    before = {t: st.read(as_of=t) for t in (T[8], T[9], T[10])}
    second = cleaner.plan(load_view(ReplaceTimeline(st.table())), T[11])
    assert second is not None and second.earliest_retained == T[8]
    assert second.files == sorted(st.paths[("de", g, t)] for g, t in (
        ("g1", T[3]), ("g2", T[1]), ("g3", T[2]), ("g4", T[4])))
    cleaner.run(second)
    for path in _slices(st):
        if os.path.exists(path):
            expected = Outcome.DELETE if path in {str(st.base / f) for f in second.files} else Outcome.KEEP
            assert _decide(st, path, T[11]) is expected, path
    for f in second.files:
        os.remove(st.base / f)
    assert {t: st.read(as_of=t) for t in before} == before
    assert cleaner.plan(load_view(ReplaceTimeline(st.table())), T[12]) is None
    assert [r.instant for r in ReplaceTimeline(st.table()).cleans()] == [T[11]]
    assert main(["table", "read", "--path", str(st.base), "--as-of", T[7]]) == 2
    assert T[8] in capsys.readouterr().err
    assert main(["table", "read", "--path", str(st.base), "--as-of", T[8]]) == 0
