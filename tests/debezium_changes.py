"""A simulated source table and the change stream Debezium would send for it: the fixture of the
Debezium acceptance test of upsert mode (a table with a composite key; its final state is the
oracle: computed directly from the simulated table, not by folding the stream).

The table ``orders`` (``region STRING, order_no BIGINT`` is the primary key; ``region`` is also
the partition field, so a key never moves between table partitions) goes through a seeded
series of operations. Its stream is Debezium's for Postgres with ``REPLICA IDENTITY FULL``:

- a snapshot first (``op: r``), then inserts (``c``), updates (``u``, ``before`` and ``after``),
  deletes (``d``, ``before``; then a tombstone: a null value with the same message key), and
  primary-key changes (``d`` + tombstone of the old key, ``c`` of the new one, as Debezium
  emits them);
- the message key is the key struct; the value is the envelope ``{before, after, source, op,
  ts_ms, transaction}``.

Serialized as Debezium's converters write it (:class:`Flavour`): Kafka Connect's JsonConverter
with schemas (``{"schema", "payload"}``) or without, and Confluent's AvroConverter (the wire
format: magic byte 0, the 4-byte schema id, the Avro body, written with fastavro —
``registry_app.confluent_avro``; the schemas are served by ``registry_app.LocalRegistry``
under TopicNameStrategy's subjects). Producing them: ``tests/integration/debezium_source.py``.
"""

from __future__ import annotations

import io
import random
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from fastavro import parse_schema, schemaless_reader
from registry_app import confluent_avro
from upsert_oracle import Spec, hudi_key

__all__ = ["KEY_FIELDS", "RECORD_KEY_FIELD", "PARTITION_FIELD", "TABLE_SCHEMA", "Event",
           "ChangeStream", "change_stream", "Flavour", "JSON_WITH_SCHEMAS", "JSON_PLAIN", "AVRO",
           "AVRO_JSON_KEYS", "FLAVOURS", "KEY_SCHEMA_ID", "VALUE_SCHEMA_ID", "serialize",
           "key_avro_schema", "envelope_avro_schema", "registry_contents", "avro_decoder",
           "oracle_spec", "sink_overrides"]

KEY_FIELDS: Final = ("region", "order_no")
RECORD_KEY_FIELD: Final = "region,order_no"
PARTITION_FIELD: Final = "region"
#: (name, Connect type, optional): the source table's columns, key first.
COLUMNS: Final = (("region", "string", False), ("order_no", "int64", False),
                  ("customer", "string", True), ("amount", "double", True), ("qty", "int32", True),
                  ("status", "string", False), ("version", "int64", False))
TABLE_SCHEMA: Final = ("region STRING, order_no BIGINT, customer STRING, amount DOUBLE, qty INT, "
                       "status STRING, version BIGINT")
"""``table.schema`` of the sink; ``version`` grows with every change of a key (a precombine
field that agrees with the stream's order)."""
SOURCE_FIELDS: Final = (("version", "string", False), ("connector", "string", False),
                        ("name", "string", False), ("ts_ms", "int64", False),
                        ("snapshot", "string", True), ("db", "string", False),
                        ("schema", "string", False), ("table", "string", False),
                        ("txId", "int64", True), ("lsn", "int64", True))
REGIONS: Final = ("eu", "us", "apac", "latam")
STATUSES: Final = ("new", "paid", "shipped", "returned")
PREFIX: Final = "dbserver1.public.orders"
"""Debezium's topic prefix . schema . table: the namespace of its struct names."""
_AVRO_TYPES: Final = {"string": "string", "int64": "long", "int32": "int", "double": "double"}
_START_MS: Final = 1_714_557_600_000

Key = tuple[str, int]


@dataclass(frozen=True)
class Event:
    """One Kafka record of the stream: the message key's fields and Debezium's envelope, or
    ``None`` for a tombstone."""

    key: dict[str, Any]
    envelope: dict[str, Any] | None


@dataclass
class ChangeStream:
    events: list[Event] = field(default_factory=list)
    final: dict[Key, dict[str, Any]] = field(default_factory=dict)
    """The source table after the last operation: (region, order_no) → row."""

    def expected(self) -> dict[str, dict[str, Any]]:
        """The final state by Hudi record key (``region:eu,order_no:7``): what the table must
        hold (``upsert_reads.assert_snapshot_equals`` takes it as is)."""
        rows = {hudi_key(row, KEY_FIELDS): row for row in self.final.values()}
        return {key: row for key, row in rows.items() if key is not None}

    def ops(self) -> dict[str, int]:
        """How many events of each op (``tombstone`` for the null values)."""
        counts: dict[str, int] = {}
        for event in self.events:
            op = "tombstone" if event.envelope is None else event.envelope["op"]
            counts[op] = counts.get(op, 0) + 1
        return counts


class _Source:
    """The simulated table and the events its changes send."""

    def __init__(self, rng: random.Random, orders_per_region: int) -> None:
        self.rng = rng
        self.space = orders_per_region
        self.rows: dict[Key, dict[str, Any]] = {}
        self.versions: dict[Key, int] = {}
        self.stream = ChangeStream(final=self.rows)
        self.lsn = 1000

    def free_key(self) -> Key | None:
        for _ in range(50):
            key = (self.rng.choice(REGIONS), self.rng.randrange(self.space))
            if key not in self.rows:
                return key
        return None

    def row(self, key: Key, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self.versions[key] = self.versions.get(key, 0) + 1
        rng = self.rng
        return {"region": key[0], "order_no": key[1],
                "customer": (base or {}).get("customer", None if rng.random() < 0.1
                                             else f"cust-{rng.randrange(500)}"),
                "amount": None if rng.random() < 0.1 else round(rng.uniform(1, 500), 2),
                "qty": None if rng.random() < 0.1 else rng.randrange(1, 20),
                "status": rng.choice(STATUSES), "version": self.versions[key]}

    def send(self, op: str, key: Key, before: dict[str, Any] | None, after: dict[str, Any] | None,
             snapshot: str = "false") -> None:
        self.lsn += self.rng.randrange(8, 200)
        ts = _START_MS + len(self.stream.events) * 7
        source = {"version": "2.7.0.Final", "connector": "postgresql", "name": "dbserver1",
                  "ts_ms": ts - 3, "snapshot": snapshot, "db": "inventory", "schema": "public",
                  "table": "orders", "txId": None if op == "r" else 500 + self.lsn // 100,
                  "lsn": self.lsn}
        envelope = {"before": before, "after": after, "source": source, "op": op, "ts_ms": ts,
                    "transaction": None}
        self.stream.events.append(Event({"region": key[0], "order_no": key[1]}, envelope))

    def delete(self, key: Key, full_before: bool) -> None:
        before = self.rows.pop(key)
        if not full_before:  # REPLICA IDENTITY DEFAULT: only the key columns hold values
            before = {name: before[name] if name in KEY_FIELDS else _blank(kind, optional)
                      for name, kind, optional in COLUMNS}
        self.send("d", key, before, None)
        self.stream.events.append(Event({"region": key[0], "order_no": key[1]}, None))


def _blank(kind: str, optional: bool) -> Any:
    """What Debezium puts in a column a key-only ``before`` lacks: null, or the type's
    default where the column is not optional."""
    return None if optional else "" if kind == "string" else 0


def change_stream(operations: int, seed: int, *, snapshot_rows: int = 20,
                  orders_per_region: int = 40, insert_ratio: float = 0.3,
                  delete_ratio: float = 0.15, key_change_ratio: float = 0.05,
                  full_before: bool = True) -> ChangeStream:
    """A snapshot of ``snapshot_rows`` rows then ``operations`` operations drawn with
    ``random.Random(seed)``: inserts, deletes and primary-key changes at the given ratios, the
    rest updates. Keys come from ``orders_per_region`` order numbers in each of 4 regions, so
    deleted keys come back. ``full_before=False``: deletes' ``before`` holds only the key."""
    source = _Source(random.Random(seed), orders_per_region)
    for n in range(snapshot_rows):
        key = source.free_key()
        if key is None:
            break
        source.rows[key] = source.row(key)
        source.send("r", key, None, source.rows[key], "last" if n == snapshot_rows - 1 else "true")
    for _ in range(operations):
        draw = source.rng.random()
        existing = sorted(source.rows)
        new = source.free_key()
        if new is not None and (draw < insert_ratio or not existing):
            source.rows[new] = source.row(new)
            source.send("c", new, None, source.rows[new])
        elif draw < insert_ratio + delete_ratio:
            source.delete(source.rng.choice(existing), full_before)
        elif new is not None and draw < insert_ratio + delete_ratio + key_change_ratio:
            old = source.rng.choice(existing)
            moved = {**source.rows[old], "region": new[0], "order_no": new[1]}
            source.delete(old, full_before)
            source.rows[new] = {**moved, "version": source.row(new)["version"]}
            source.send("c", new, None, source.rows[new])
        else:
            key = source.rng.choice(existing)
            before = source.rows[key]
            source.rows[key] = source.row(key, before)
            source.send("u", key, before, source.rows[key])
    return source.stream


# --- converters -----------------------------------------------------------------------

@dataclass(frozen=True)
class Flavour:
    """Debezium's key and value converters: ``json`` (JsonConverter, schemas.enable=false),
    ``json_schemas`` (schemas.enable=true) or ``avro`` (AvroConverter)."""

    key: str
    value: str


JSON_WITH_SCHEMAS: Final = Flavour("json_schemas", "json_schemas")
JSON_PLAIN: Final = Flavour("json", "json")
AVRO: Final = Flavour("avro", "avro")
AVRO_JSON_KEYS: Final = Flavour("json", "avro")
"""Avro values with JSON keys (``key.converter=JsonConverter``): a tombstone's key is then
readable with ``upsert.kafka_key_format: json``."""
FLAVOURS: Final = {"json_schemas": JSON_WITH_SCHEMAS, "json": JSON_PLAIN, "avro": AVRO,
                   "avro_json_keys": AVRO_JSON_KEYS}
KEY_SCHEMA_ID: Final = 1
VALUE_SCHEMA_ID: Final = 2


def _connect_struct(fields: Any, name: str, optional: bool, field_name: str | None = None,
                    ) -> dict[str, Any]:
    struct_schema: dict[str, Any] = {
        "type": "struct",
        "fields": [{"type": kind, "optional": opt, "field": f} for f, kind, opt in fields],
        "optional": optional, "name": name}
    if field_name is not None:
        struct_schema["field"] = field_name
    return struct_schema


def _connect_key_schema() -> dict[str, Any]:
    return _connect_struct([c for c in COLUMNS if c[0] in KEY_FIELDS], f"{PREFIX}.Key", False)


def _connect_envelope_schema() -> dict[str, Any]:
    value = f"{PREFIX}.Value"
    return {"type": "struct", "fields": [
        _connect_struct(COLUMNS, value, True, "before"),
        _connect_struct(COLUMNS, value, True, "after"),
        _connect_struct(SOURCE_FIELDS, "io.debezium.connector.postgresql.Source", False, "source"),
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
        _connect_struct((("id", "string", False), ("total_order", "int64", False),
                         ("data_collection_order", "int64", False)),
                        "event.block", True, "transaction"),
    ], "optional": False, "name": f"{PREFIX}.Envelope", "version": 1}


def _avro_fields(fields: Any) -> list[dict[str, Any]]:
    return [{"name": f, "type": ["null", _AVRO_TYPES[kind]], "default": None} if opt
            else {"name": f, "type": _AVRO_TYPES[kind]} for f, kind, opt in fields]


def key_avro_schema() -> dict[str, Any]:
    """AvroConverter's key schema (``connect.name`` as Debezium writes it)."""
    return {"type": "record", "name": "Key", "namespace": PREFIX, "connect.name": f"{PREFIX}.Key",
            "fields": _avro_fields([c for c in COLUMNS if c[0] in KEY_FIELDS])}


def envelope_avro_schema() -> dict[str, Any]:
    """AvroConverter's value schema: the envelope with nullable ``before``/``after``."""
    value = {"type": "record", "name": "Value", "connect.name": f"{PREFIX}.Value",
             "fields": _avro_fields(COLUMNS)}
    source = {"type": "record", "name": "Source", "namespace": "io.debezium.connector.postgresql",
              "fields": _avro_fields(SOURCE_FIELDS)}
    block = {"type": "record", "name": "block", "namespace": "event",
             "fields": _avro_fields((("id", "string", False), ("total_order", "int64", False),
                                     ("data_collection_order", "int64", False)))}
    return {"type": "record", "name": "Envelope", "namespace": PREFIX,
            "connect.name": f"{PREFIX}.Envelope", "fields": [
                {"name": "before", "type": ["null", value], "default": None},
                {"name": "after", "type": ["null", "Value"], "default": None},
                {"name": "source", "type": source},
                {"name": "op", "type": "string"},
                {"name": "ts_ms", "type": ["null", "long"], "default": None},
                {"name": "transaction", "type": ["null", block], "default": None}]}


def registry_contents(topic: str) -> tuple[dict[int, dict[str, Any]], dict[str, int]]:
    """(schemas by id, subjects) for ``LocalRegistry(schemas, subjects=subjects)``: the key and
    value schemas under TopicNameStrategy's ``<topic>-key`` / ``<topic>-value``."""
    return ({KEY_SCHEMA_ID: key_avro_schema(), VALUE_SCHEMA_ID: envelope_avro_schema()},
            {f"{topic}-key": KEY_SCHEMA_ID, f"{topic}-value": VALUE_SCHEMA_ID})


def _encode(datum: dict[str, Any], converter: str, schema_id: int, avro: dict[str, Any],
            connect: dict[str, Any]) -> bytes:
    if converter == "avro":
        return confluent_avro(schema_id, avro, datum)
    if converter == "json_schemas":
        return orjson.dumps({"schema": connect, "payload": datum})
    if converter == "json":
        return orjson.dumps(datum)
    raise ValueError(f"unknown converter {converter!r}")


def serialize(stream: ChangeStream, flavour: Flavour) -> list[tuple[bytes, bytes | None]]:
    """Each event as (message key, value or ``None`` for a tombstone), in stream order."""
    key_avro, value_avro = key_avro_schema(), envelope_avro_schema()
    key_connect, value_connect = _connect_key_schema(), _connect_envelope_schema()
    return [(_encode(e.key, flavour.key, KEY_SCHEMA_ID, key_avro, key_connect),
             None if e.envelope is None else _encode(e.envelope, flavour.value, VALUE_SCHEMA_ID,
                                                     value_avro, value_connect))
            for e in stream.events]


def avro_decoder(schemas: Mapping[int, dict[str, Any]]) -> Callable[[bytes], dict[str, Any]]:
    """Decodes Confluent-framed Avro with the writer schema of the id it names (fastavro)."""
    parsed = {schema_id: parse_schema(schema) for schema_id, schema in schemas.items()}

    def decode(raw: bytes) -> dict[str, Any]:
        magic, schema_id = struct.unpack(">bI", raw[:5])
        if magic != 0 or schema_id not in parsed:
            raise ValueError(f"not Confluent Avro of a known schema (magic {magic}, id {schema_id})")
        datum = schemaless_reader(io.BytesIO(raw[5:]), parsed[schema_id], None)
        assert isinstance(datum, dict)
        return datum

    return decode


def oracle_spec(flavour: Flavour, precombine: str | None = None,
                partitions: int | None = None) -> Spec:
    """The upsert oracle's reading of a stream of ``flavour`` (``upsert_oracle.fold``)."""
    decoder = avro_decoder(registry_contents("any")[0])
    return Spec(key_fields=KEY_FIELDS, precombine=precombine, envelope="debezium",
                value_format="connect_json" if flavour.value == "json_schemas" else "json",
                key_format="json", partitions=partitions,
                decode_value=decoder if flavour.value == "avro" else None,
                decode_key=decoder if flavour.key == "avro" else None)


def sink_overrides(flavour: Flavour, registry_url: str | None = None) -> dict[str, dict[str, Any]]:
    """``Pipeline(overrides=...)`` for a sink reading this stream in upsert mode. An Avro key
    has no ``upsert.kafka_key_format``: tombstones then cannot be keyed from the message key
    (Debezium's deletes still are, from ``before``)."""
    overrides: dict[str, dict[str, Any]] = {
        "kafka": {"envelope": "debezium",
                  "value_format": {"json_schemas": "connect_json"}.get(flavour.value, flavour.value)},
        "table": {"write_mode": "upsert", "record_key_field": RECORD_KEY_FIELD,
                  "partition_field": PARTITION_FIELD, "schema": TABLE_SCHEMA},
        "upsert": {"kafka_key_format": "json"},
    }
    if flavour.value == "avro":
        if registry_url is None:
            raise ValueError("Avro values need the registry's URL")
        overrides["avro"] = {"registry_url": registry_url}
    return overrides
