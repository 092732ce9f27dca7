"""The upsert merge's plan against hand-built tables (real Parquet slices): keys in groups whose
commit was archived are found, a key stored twice is left once, a key whose partition value
changes replaces its old row (one instant or two alike), and a delete known by its key only is
spelt like the row's key (converted values). Regressions of a data-loss review."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from slice_tables import FS, SliceTable

from hudi_sink.services.participant.decoded import Row
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.flush_plan import FlushInput
from hudi_sink.services.participant.keyed.changes import KeyedDecoder
from hudi_sink.services.participant.keyed.envelope import KeyedSpec
from hudi_sink.services.participant.keyed.fold import Change, fold
from hudi_sink.services.participant.keyed.merge import MergePlan, plan_merge
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.layout import Instant, InstantState
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.hudi.slices import SliceCache
from hudi_sink.shared.schema.table_schema import TableSchema

C1, C2, T = "20260101000000001", "20260101000000002", "20260101000000003"


def _plan(t: SliceTable, tmp_path: Path, changes: list[Change],
          cache: SliceCache | None = None) -> MergePlan:
    spec = FlushInput("orders", 0, 0, T, 0, 1, str(tmp_path / "stage"), False)
    latest = (cache or SliceCache(t.table())).latest()
    return plan_merge(fold(changes), latest, owner=0, schema=t.config.table_schema(), spec=spec,
                      fs=FS, base_path=str(t.base), small_file_bytes=0, precombine=None)


def _row(key: str, country: str) -> Row:
    return Row({"id": key, "country": country, "amount": 9.0}, key, country)


def test_keys_of_a_group_whose_commit_was_archived_are_found(tmp_path: Path) -> None:
    t = SliceTable.create(tmp_path / "t")
    t.commit(C1, {"g1": ["a", "b"]})
    t.commit(C2, {"g2": ["c"]})
    cache = SliceCache(t.table())
    cache.latest()  # a process that saw C1 active, and one that starts after its archival
    ReplaceTimeline(t.table()).archive(Instant(C1, layout.COMMIT_ACTION, InstantState.COMPLETED))
    for seen in (cache, SliceCache(t.table())):
        plan = _plan(t, tmp_path, [Change("a", 10, _row("a", "de"), None, "de", False),
                                   Change("b", 11, None, None, None, True)], seen)
        assert dict(plan.outcomes) == {"written": 1, "deleted": 1}
        [carry] = plan.carries.values()
        assert carry.file_id == "g1" and carry.drop_keys == {"a", "b"} and carry.rows == 0


def test_a_key_stored_twice_is_left_once(tmp_path: Path) -> None:
    t = SliceTable.create(tmp_path / "t")
    t.commit(C1, {"g1": ["a", "a", "b"]})
    t.commit(C2, {"g2": ["a"]})
    plan = _plan(t, tmp_path, [Change("a", 10, _row("a", "de"), None, "de", False)])
    carries = {c.file_id: c for c in plan.carries.values()}
    assert set(carries) == {"g1", "g2"}
    assert carries["g1"].rows == 1  # both stored 'a' rows go (Spark's filter drops both)
    assert carries["g2"].rows == 0


@pytest.mark.parametrize("with_tombstone", [False, True])
def test_a_key_whose_partition_value_changes_replaces_its_old_row(
        tmp_path: Path, with_tombstone: bool) -> None:
    t = SliceTable.create(tmp_path / "t")
    t.commit(C1, {"g1": ["a"]}, country="de")
    changes = ([Change("a", 9, None, None, None, True)] if with_tombstone else []) + [
        Change("a", 10, _row("a", "us"), None, "us", False)]
    plan = _plan(t, tmp_path, changes)
    [carry] = plan.carries.values()
    assert carry.file_id == "g1" and carry.drop_keys == {"a"} and carry.rows == 0
    assert plan.prepared is not None and plan.prepared.num_rows == 1


@pytest.mark.parametrize("ddl,value", [
    ("dev STRING, ts TIMESTAMP, v INT", "2024-01-01T00:00:00Z"),
    ("dev STRING, ts DECIMAL(10,2), v INT", 5),
    ("dev STRING, ts DOUBLE, v INT", 5),
])
def test_a_delete_by_key_is_spelt_like_the_rows_key(ddl: str, value: object) -> None:
    schema = TableSchema.parse(ddl, table_name="t", record_key_field="dev,ts")
    spec = KeyedSpec(key_fields=("dev", "ts"), envelope="debezium", kafka_key_format="json")
    keyed = KeyedDecoder(spec, partitioner="none", precombine_field=None,
                         partitions_of_topic=lambda: None)
    decoder = RecordDecoder(schema, 1 << 20, unwrap=keyed.unwrap)
    row = {"dev": "d1", "ts": value, "v": 1}
    message_key = orjson.dumps({"dev": "d1", "ts": value})
    created = keyed.change(decoder, orjson.dumps({"op": "c", "before": None, "after": row}),
                           message_key, 0, 1)
    deleted = keyed.change(decoder, orjson.dumps({"op": "d", "before": row, "after": None}),
                           message_key, 0, 2)
    tombstone = keyed.change(decoder, None, message_key, 0, 3)
    assert isinstance(created, Change) and isinstance(deleted, Change)
    assert isinstance(tombstone, Change)
    assert created.key == deleted.key == tombstone.key


def test_a_string_message_key_of_a_number_column_is_spelt_like_the_row(tmp_path: Path) -> None:
    schema = TableSchema.parse("id BIGINT, v INT", table_name="t", record_key_field="id")
    keyed = KeyedDecoder(KeyedSpec(key_fields=("id",)), partitioner="none",
                         precombine_field=None, partitions_of_topic=lambda: None)
    decoder = RecordDecoder(schema, 1 << 20, unwrap=keyed.unwrap)
    written = keyed.change(decoder, orjson.dumps({"id": 42, "v": 1}), b"42", 0, 1)
    tombstone = keyed.change(decoder, None, b"42", 0, 2)
    assert isinstance(written, Change) and isinstance(tombstone, Change)
    assert written.key == tombstone.key == "42"
