"""Review finding 3: a replacecommit is decided only once no older ingestion instant is in
flight — completing it first leaves a hole an incremental reader checkpoints past, losing
the rows the older instant commits later."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pyarrow as pa
import pytest
from eventually import eventually
from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder
from test_committer_fencing import Env
from test_maintenance import T, _commit_small_files
from test_maintenance import env as env  # the fixture

from hudi_sink.services.coordinator.instants import wait_for_older_ingestion
from hudi_sink.services.coordinator.maintenance.clustering import Clusterer
from hudi_sink.services.coordinator.maintenance.plan import plan_clustering
from hudi_sink.services.coordinator.maintenance.view import load_view
from hudi_sink.shared.errors import FencedError
from hudi_sink.shared.hudi.replace import ReplaceTimeline


def _incremental(env: Env, start: str) -> list[str]:
    options = (HudiReadOptions().with_query_type(HudiQueryType.Incremental)
               .with_start_timestamp(start))
    batches = HudiTableBuilder.from_base_uri(str(env.base)).build().read(options)
    return sorted(pa.Table.from_batches(batches).column("id").to_pylist()) if batches else []


def _clusterer(env: Env, driver: SimpleNamespace, leading: bool = True, timeout_s: float = 10,
               polls: list[str] | None = None) -> tuple[Clusterer, ReplaceTimeline]:
    """A clusterer whose decision waits for older ingestion; each look of that wait (it asks
    ``leading`` every time it finds an older instant unfinished) is appended to ``polls``."""
    committer = env.committer("a")
    _commit_small_files(env, committer, T[:4])
    timeline = ReplaceTimeline(env.table())
    clusterer = Clusterer(committer, timeline, "snappy")
    looks = polls if polls is not None else []

    def still_leading() -> bool:
        looks.append("still leading?")
        return leading

    clusterer.before_decision = lambda c: wait_for_older_ingestion(
        driver, c, timeout_s=timeout_s, leading=still_leading,  # type: ignore[arg-type]
        pending=timeline.table.pending_instants, poll_s=0.01)
    return clusterer, timeline


def _groups(timeline: ReplaceTimeline) -> list[list]:  # type: ignore[type-arg]
    return plan_clustering(load_view(timeline).live, min_files=3, small_file_bytes=1 << 20,
                           target_file_bytes=1 << 24)


def test_replacecommit_waits_for_the_older_ingestion_instant(env: Env) -> None:
    driver = SimpleNamespace(current=SimpleNamespace(instant=T[5]), starting=None, latest_instant=T[6])
    polls: list[str] = []
    clusterer, timeline = _clusterer(env, driver, polls=polls)
    committer = clusterer._committer
    committer.start(T[5])
    staged = env.stage(T[5], "de", ["late-1", "late-2"])
    errors: list[BaseException] = []

    def cluster() -> None:
        try:
            clusterer.run(T[6], _groups(timeline), env.schema.avro_schema_json())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    worker = threading.Thread(target=cluster)
    worker.start()
    eventually(lambda: len(polls) >= 3, 20, "the replacecommit to wait for the older instant",
               every_s=0.01)
    assert worker.is_alive() and not timeline.path_exists_completed(T[6])
    checkpoint = max(i.time for i in timeline.completed())  # a reader's checkpoint now
    committer.commit(T[5], env.metadata([staged], 9), [staged.move])
    driver.current = None
    worker.join(20)
    assert not errors and timeline.path_exists_completed(T[6])
    assert {"late-1", "late-2"} <= set(_incremental(env, checkpoint))


def test_waiting_replacecommit_rolls_back_on_timeout_or_lost_leadership(env: Env) -> None:
    driver = SimpleNamespace(current=None, starting=T[5], latest_instant=T[6])
    clusterer, timeline = _clusterer(env, driver, timeout_s=0.2)
    with pytest.raises(TimeoutError):
        clusterer.run(T[6], _groups(timeline), env.schema.avro_schema_json())
    assert not timeline.pending() and not timeline.path_exists_completed(T[6])
    lost = SimpleNamespace(current=SimpleNamespace(instant=T[7]), starting=None, latest_instant=T[8])
    clusterer.before_decision = lambda c: wait_for_older_ingestion(
        lost, c, timeout_s=10, leading=lambda: False,  # type: ignore[arg-type]
        pending=timeline.table.pending_instants, poll_s=0.01)
    with pytest.raises(FencedError):
        clusterer.run(T[8], _groups(timeline), env.schema.avro_schema_json())
    assert not timeline.path_exists_completed(T[8])
