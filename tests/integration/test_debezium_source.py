"""The Debezium fixture through a real broker (no sink): each converter flavour's change stream
lands key by key where murmur2 puts it, in stream order per partition, reads back as the same
events (Avro decoded with the writer schemas the test registry serves under the topic's
subjects), and the upsert oracle's fold of what the broker holds equals the simulated source
table's final state — so an acceptance test that finds the sink's table differing from
``stream.expected()`` is looking at the sink, not at the fixture."""

from __future__ import annotations

import json
from typing import Any

import httpx
import orjson
import pytest
from debezium_changes import (
    FLAVOURS,
    Event,
    avro_decoder,
    change_stream,
    oracle_spec,
    registry_contents,
    serialize,
)
from debezium_source import produce_stream
from keyed_oracle import end_offsets, read_topic
from registry_app import LocalRegistry
from upsert_oracle import fold, murmur2_partition

pytestmark = pytest.mark.long  # checks the test fixture itself: scripts/long-tests.sh

PARTITIONS = 3


def _decoder(registry: LocalRegistry, topic: str) -> Any:
    """Decode with the schemas the registry serves: by id, as AvroConverter's readers fetch
    them, after checking the subjects name those ids."""
    ids = {}
    for part in ("key", "value"):
        latest = httpx.get(f"{registry.url}/subjects/{topic}-{part}/versions/latest", timeout=5)
        ids[part] = latest.json()["id"]
    schemas = {schema_id: json.loads(httpx.get(f"{registry.url}/schemas/ids/{schema_id}",
                                               timeout=5).json()["schema"])
               for schema_id in ids.values()}
    return avro_decoder(schemas)


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_each_flavour_lands_in_order_and_folds_to_the_source_state(
        broker: Any, unique_name: str, flavour: str) -> None:
    converters = FLAVOURS[flavour]
    topic = f"{unique_name}-cdc"
    stream = change_stream(400, seed=2024, snapshot_rows=25)
    schemas, subjects = registry_contents(topic)
    with LocalRegistry(schemas, subjects=subjects) as registry:
        sent = produce_stream(broker.bootstrap, topic, stream, converters, partitions=PARTITIONS)
        ends = end_offsets(broker.bootstrap, topic)
        records = read_topic(broker.bootstrap, topic, ends)
        decode = _decoder(registry, topic)
    assert sent == len(stream.events) == len(records) == sum(ends.values())
    assert len(ends) == PARTITIONS and all(ends.values())  # the keys really spread

    def parse(raw: bytes | None, converter: str) -> Any:
        if raw is None:
            return None
        if converter == "avro":
            return decode(raw)
        parsed = orjson.loads(raw)
        return parsed["payload"] if converter == "json_schemas" else parsed

    expected_in: dict[int, list[Event]] = {p: [] for p in range(PARTITIONS)}
    for event, (key, _) in zip(stream.events, serialize(stream, converters), strict=True):
        expected_in[murmur2_partition(key, PARTITIONS)].append(event)
    for partition in range(PARTITIONS):
        landed = sorted((r for r in records if r.partition == partition), key=lambda r: r.offset)
        assert [Event(parse(r.key, converters.key), parse(r.value, converters.value))
                for r in landed] == expected_in[partition], f"partition {partition}"

    result = fold(records, oracle_spec(converters, partitions=PARTITIONS), ends)
    assert result.rejected == []
    assert {key: winner.row for key, winner in result.winners.items()} == stream.expected()
    assert len(stream.expected()) > 20 and len(result.deletes) > 20

