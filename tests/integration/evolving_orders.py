"""The orders of the schema evolution tests: three versions of one Avro writer schema (v2 adds
``coupon: ["null", "string"]`` and widens ``qty`` int → long; v3 changes ``country`` string →
int, which the table must refuse) and records of two producers rolling v2 out (v1 first, then
v1 and v2 alternating), encoded in the Confluent wire format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from avro_topic import produce_by_partition
from pipeline import Pipeline
from registry_app import LocalRegistry, confluent_avro

__all__ = ["HALF", "V1", "V2", "V3", "value", "encoded", "registry_sink"]

HALF = 2500
"""Records per partition and phase (two partitions: 5,000 per phase)."""
V1: dict[str, Any] = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "string"},
    {"name": "qty", "type": "int"},
    {"name": "country", "type": "string"},
    {"name": "amount", "type": ["null", "double"], "default": None},
]}
V2: dict[str, Any] = {**V1, "fields": [
    {"name": "id", "type": "string"},
    {"name": "qty", "type": "long"},
    {"name": "country", "type": "string"},
    {"name": "amount", "type": ["null", "double"], "default": None},
    {"name": "coupon", "type": ["null", "string"], "default": None},
]}
V3: dict[str, Any] = {**V1, "fields": [
    {"name": "id", "type": "string"}, {"name": "qty", "type": "long"},
    {"name": "country", "type": "int"}]}


def _v1(partition: int, n: int) -> dict[str, Any]:
    return {"id": f"p{partition}-{n}", "qty": n, "country": "de" if n % 2 else "fr",
            "amount": None if n % 5 == 0 else n / 4}


def _v2(partition: int, n: int) -> dict[str, Any]:
    return {**_v1(partition, n), "qty": 2**33 + n, "coupon": None if n % 7 == 0 else f"c{n}"}


def value(partition: int, n: int) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """(schema id, schema, record) of record ``n``: v1 first, then v1 and v2 alternating."""
    if n >= HALF and n % 2 == 0:
        return 2, V2, _v2(partition, n)
    return 1, V1, _v1(partition, n)


def encoded(partition: int, numbers: range) -> list[bytes]:
    """Records ``numbers`` of ``partition`` in the Confluent wire format."""
    return [confluent_avro(*value(partition, n)) for n in numbers]


def registry_sink(tmp: Path, name: str, bootstrap: str, registry: LocalRegistry) -> Pipeline:
    """A two-partition sink of Avro values whose table follows the registry (created from
    v1, its subject's latest version), with the first ``HALF`` records of each partition
    produced (topic created)."""
    pipeline = Pipeline(tmp, name, bootstrap, partitions=2, overrides={
        "kafka": {"value_format": "avro"},
        "table": {"schema_source": "registry"},
        "avro": {"registry_url": registry.url},
        "service": {"retry_backoff_ms": 500},
    })
    registry.subjects[f"{pipeline.topic}-value"] = 1
    produce_by_partition(pipeline.bootstrap, pipeline.topic,
                         {p: encoded(p, range(HALF)) for p in (0, 1)}, True)
    return pipeline
