"""``hudi-sink offsets set`` on a real local table: a fenced commit of its own that a later
coordinator resumes from, refused (exit 2, nothing committed) while a coordinator is active —
an instant in flight, a table that changes while it watches, or a coordinator that starts an
instant while it claims its epoch."""

from __future__ import annotations

from typing import Any

import pytest
from test_committer_fencing import Env
from test_maintenance import env as env  # the fixture

from hudi_sink.cli import offsets_cmd, table_cmd
from hudi_sink.cli.main import main
from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.shared.errors import FencedError
from hudi_sink.shared.hudi.offset_change import CHANGE_KEY
from hudi_sink.shared.hudi.offsets import offsets_from_metadata, offsets_metadata
from hudi_sink.shared.hudi.sink_log import SinkLog
from hudi_sink.shared.hudi.write_stats import build_commit_metadata

T1, T2 = "20250101000000001", "20250101000000002"


def _commit(env: Env, committer: TableCommitter, instant: str, offsets: dict[tuple[str, int], int],
            topics: list[str]) -> None:
    """An ingestion commit without files that stores ``offsets`` (as a coordinator's would)."""
    extra = {"schema": env.schema.avro_schema_json(), **offsets_metadata(offsets, topics)}
    committer.start(instant)
    committer.commit(instant, build_commit_metadata([], extra), [])


def _set(env: Env, *extra: str, partition: int = 0, offset: int = 101) -> int:
    return main(["offsets", "set", "--path", str(env.base), "--partition", str(partition),
                 "--offset", str(offset), "--reason", "poison record at 100",
                 "--quiet-seconds", "0", *extra])


def _offsets(env: Env) -> dict[tuple[str, int], int]:
    metadata = env.table().latest_commit_metadata()
    assert metadata is not None
    return offsets_from_metadata(metadata["extraMetadata"], ["orders"])


def test_the_change_is_committed_fenced_and_in_the_history(env: Env) -> None:
    coordinator = env.committer("a")
    _commit(env, coordinator, T1, {("orders", 0): 100, ("orders", 1): 50}, ["orders"])
    assert _set(env) == 0
    assert _offsets(env) == {("orders", 0): 101, ("orders", 1): 50}
    [latest, _] = table_cmd.table_history(str(env.base))
    assert latest["offsets_set"] == {"orders:0": {"from": 100, "to": 101}}
    assert latest["reason"] == "poison record at 100" and latest["set_by"] == "cli"
    assert SinkLog(env.table().fs, str(env.base)).read_state().leader["tool"] == "hudi-sink offsets set"
    with pytest.raises(FencedError):  # the coordinator that was stopped meanwhile is a zombie now
        _commit(env, coordinator, "20990101000000001", {("orders", 0): 1}, ["orders"])
    assert _offsets(env)[("orders", 0)] == 101


def _refused(env: Env, capsys: pytest.CaptureFixture[str], words: str, *extra: str) -> None:
    assert _set(env, *extra) == 2
    assert words in capsys.readouterr().err
    table = env.table()
    assert not any(CHANGE_KEY in table.read_commit_metadata(i)["extraMetadata"]
                   for i in table.completed_commits()), "an offset change was committed"


def test_an_instant_in_flight_is_refused_before_any_claim(
        env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    coordinator = env.committer("a")
    _commit(env, coordinator, T1, {("orders", 0): 100}, ["orders"])
    coordinator.start(T2)  # a running leader's open instant
    _refused(env, capsys, f"instant {T2} is in flight")
    assert SinkLog(env.table().fs, str(env.base)).read_state().epoch == coordinator.epoch  # not fenced


def test_a_table_that_changes_while_watched_is_refused(
        env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    coordinator = env.committer("a")
    _commit(env, coordinator, T1, {("orders", 0): 100}, ["orders"])

    def a_coordinator_commits(_seconds: float) -> None:  # stands in for the quiet window
        _commit(env, coordinator, T2, {("orders", 0): 150}, ["orders"])

    monkeypatch.setattr(offsets_cmd.time, "sleep", a_coordinator_commits)
    _refused(env, capsys, "the table changed within")
    assert _offsets(env) == {("orders", 0): 150}
    assert SinkLog(env.table().fs, str(env.base)).read_state().epoch == coordinator.epoch


def test_an_instant_started_during_the_claim_is_refused(
        env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    coordinator = env.committer("a")
    _commit(env, coordinator, T1, {("orders", 0): 100}, ["orders"])
    claim = TableCommitter.claim_epoch

    def racing_claim(self: TableCommitter, leader: dict[str, Any]) -> int:
        coordinator.start(T2)  # the coordinator opened an instant just before our claim
        return claim(self, leader)

    monkeypatch.setattr(TableCommitter, "claim_epoch", racing_claim)
    _refused(env, capsys, f"started instant {T2} meanwhile")
    with pytest.raises(FencedError):  # the racer is fenced: it cannot commit under our feet
        coordinator.commit(T2, build_commit_metadata([], {"schema": env.schema.avro_schema_json()}), [])


def test_several_topics_need_one_named(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    coordinator = env.committer("a")
    _commit(env, coordinator, T1, {("orders", 0): 1, ("refunds", 0): 2}, ["orders", "refunds"])
    _refused(env, capsys, "--topic")
    assert _set(env, "--topic", "refunds", offset=9) == 0
    metadata = env.table().latest_commit_metadata()
    assert metadata is not None
    assert offsets_from_metadata(metadata["extraMetadata"], ["orders", "refunds"]) == {
        ("orders", 0): 1, ("refunds", 0): 9}


def test_an_offset_beyond_kafkas_range_is_refused(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    c = env.committer("a")
    c.start(T1)
    c.commit(T1, build_commit_metadata([], {"schema": env.schema.avro_schema_json()}), [])
    assert _set(env, offset=2**64) == 2
    assert "above Kafka's largest offset" in capsys.readouterr().err
    assert env.table().completed_commits() == [T1]


def test_a_topic_the_tables_offsets_do_not_name_is_refused(env: Env) -> None:
    """A typo in --topic would store every partition's offsets under a topic the sink does not
    read, which then starts its real topic from 0 (found in review): refused, nothing committed."""
    _commit(env, env.committer("a"), T1, {("orders", 0): 100, ("orders", 1): 50}, ["orders"])
    assert _set(env, "--topic", "ordrs") == 2
    assert _offsets(env) == {("orders", 0): 100, ("orders", 1): 50}


def test_offsets_that_name_no_topic_are_not_reassigned_by_the_cli(env: Env) -> None:
    """Offsets written before commits named their topic (``0=100,1=50``, Hudi's own form): a
    --topic cannot be told from a typo here, so the CLI refuses and points at POST /offsets."""
    c = env.committer("a")
    c.start(T1)
    c.commit(T1, build_commit_metadata([], {"schema": env.schema.avro_schema_json(),
                                             "kafka.commit.offsets": "0=100,1=50"}), [])
    assert _set(env, "--topic", "ordrs") == 2
    metadata = env.table().latest_commit_metadata()
    assert metadata is not None and metadata["extraMetadata"]["kafka.commit.offsets"] == "0=100,1=50"
