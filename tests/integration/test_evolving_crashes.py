"""Schema evolution and crashes (acceptance 6; the long suite: scripts/long-tests.sh — a
default-suite test, test_evolving_tables, covers the evolution itself across instants).

A registry-sourced table takes v1 records, then two producers roll v2 out (v1 and v2
interleaved on both partitions). The coordinator is SIGKILLed right after the first commit
whose metadata evolves the schema, and a successor takes over from the table. Then, while v1
and v2 records are in flight and the participant holds staged files of an open instant
(partition 1 also stopped before a record of v4, which adds ``note``, proposing the next
evolution), the participant is SIGKILLed and replaced. Afterwards every record is in the table
exactly once with its exact values (hudi-rs and Hudi's Java reader agree), and no commit after
the evolved one ever lost a column: the schema stays intact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from avro_topic import produce_by_partition
from eventually import eventually
from evolving_orders import HALF, V1, V2, encoded, registry_sink, value
from pipeline import Pipeline
from registry_app import LocalRegistry, confluent_avro

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = [pytest.mark.long, pytest.mark.timeout(900)]

V4: dict[str, Any] = {**V2, "fields": [*V2["fields"], {"name": "note", "type": ["null", "string"],
                                                      "default": None}]}
NOTES = 5
"""v4 records after the second batch, on partition 1."""


def _columns(pipeline: Pipeline, instant: str) -> list[str]:
    schema = json.loads(pipeline.commit_metadata(instant)["extraMetadata"]["schema"])
    return [f["name"] for f in schema["fields"]]


def _evolved(pipeline: Pipeline) -> str | None:
    for instant in pipeline.completed_commits():
        if "hudi.sink.schema.changes" in pipeline.commit_metadata(instant)["extraMetadata"]:
            return instant
    return None


def test_exactly_once_with_the_schema_intact_across_sigkills(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    with LocalRegistry({1: V1, 2: V2, 4: V4}) as registry:
        pipeline = registry_sink(tmp_path, unique_name, broker.bootstrap, registry)
        with pipeline:
            coordinator, participant = pipeline.start_ready("coordinator", "participant")
            pipeline.wait_offsets(HALF, timeout_s=240)
            produce_by_partition(pipeline.bootstrap, pipeline.topic,
                                 {p: encoded(p, range(HALF, 2 * HALF)) for p in (0, 1)}, False)
            evolved = eventually(lambda: _evolved(pipeline), 240, "the commit evolving the schema",
                                 every_s=0.05)
            pipeline.kill(coordinator)  # right after it: before or after its ACK, START
            pipeline.start_ready("coordinator")

            notes = [confluent_avro(4, V4, {**value(1, n)[2], "qty": n, "coupon": None,
                                            "note": f"n{n}"})
                     for n in range(3 * HALF, 3 * HALF + NOTES)]
            produce_by_partition(pipeline.bootstrap, pipeline.topic,
                                 {0: encoded(0, range(2 * HALF, 3 * HALF)),
                                  1: [*encoded(1, range(2 * HALF, 3 * HALF)), *notes]}, False)
            pipeline.wait_holding_staged_files(participant)
            pipeline.kill(participant)
            pipeline.start_ready("participant")
            pipeline.wait_offsets(3 * HALF, timeout_s=300)  # partition 1: + NOTES, checked below
            eventually(lambda: pipeline.latest_offsets() == {0: 3 * HALF, 1: 3 * HALF + NOTES}, 120,
                       "the v4 records committed after their evolution")
            [table] = pipeline.read_agreed()
    rows = table.select(["id", "qty", "country", "amount", "coupon", "note"]).to_pylist()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) == 6 * HALF + NOTES, "exactly once"
    by_id = {r["id"]: r for r in rows}
    for partition in (0, 1):
        for n in range(3 * HALF):
            sent = value(partition, n)[2]
            assert by_id[sent["id"]] == {"coupon": None, "note": None, **sent}, sent["id"]
    for n in range(3 * HALF, 3 * HALF + NOTES):
        assert by_id[f"p1-{n}"]["note"] == f"n{n}"
    later = [i for i in pipeline.completed_commits() if i >= evolved]
    assert all({"coupon", "qty"} <= set(_columns(pipeline, i)) for i in later)
    assert _columns(pipeline, later[-1]) == ["id", "qty", "country", "amount", "coupon", "note"]
