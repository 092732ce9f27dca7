"""Avro values (``kafka.value_format: avro``): the Confluent wire format decoded with fastavro,
writer schemas from a schema registry (``GET /schemas/ids/{id}``, cached, basic auth) or an
``.avsc`` file, resolved by field name against the table schema; an unknown id or a bad body
is a bad record, a registry outage is not (``Deferred``: the partition waits)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from kafka_records import Rec
from registry_app import LocalRegistry, confluent_avro, self_signed_certificate

from hudi_sink.services.participant.avro_format import AvroValues
from hudi_sink.services.participant.decoded import Deferred, Rejected, rows_to_arrow
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.shared.config.sections import AvroConfig
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.schema.registry import (
    RegistrySchemas,
    RegistryUnavailable,
    UnknownSchemaId,
    writer_schemas,
)

TABLE = TableConfig(schema="id STRING NOT NULL, amount DOUBLE, qty BIGINT, ts TIMESTAMP, "
                           "created TIMESTAMP, day DATE, ref STRING, status STRING, note STRING",
                    record_key_field="id").table_schema()

WRITER_V1: dict[str, Any] = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "qty", "type": "int"},  # int written, BIGINT column: promoted
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "created", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "extra", "type": "string", "default": ""},  # not a column: ignored, counted
    ],
}
WRITER_V2: dict[str, Any] = {  # a later writer: fewer fields (note stays null)
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": ["null", "double"]}],
}
REF = uuid.UUID("12345678-1234-5678-1234-567812345678")
V1 = {"id": "o-1", "amount": 12.5, "qty": 3, "ts": datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC),
      "created": datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC), "day": date(2024, 5, 1),
      "ref": REF, "status": "PAID", "extra": "x"}




def _participant(values: AvroValues) -> TransactionParticipant:
    p = TransactionParticipant(topic="t", partition=0, flush_records=100, fail_on_error=False,
                               decoder=RecordDecoder(TABLE, 1 << 20, value_parser=values.parse))
    p.begin("20250101000000001", 1, 0)
    return p


def test_round_trip_through_the_registry_with_basic_auth_and_a_cache() -> None:
    with LocalRegistry({1: WRITER_V1, 2: WRITER_V2}, user="sink", password="pw") as registry:
        values = AvroValues(RegistrySchemas(AvroConfig(registry_url=registry.url,
                                                       registry_username="sink",
                                                       registry_password="pw")))
        p = _participant(values)
        p.accept([Rec(0, confluent_avro(1, WRITER_V1, V1)),
                  Rec(1, confluent_avro(2, WRITER_V2, {"id": "o-2", "amount": None})),
                  Rec(2, confluent_avro(1, WRITER_V1, {**V1, "id": "o-3", "created": None})),
                  Rec(3, confluent_avro(9, WRITER_V2, {"id": "o-4", "amount": 1.0})),  # unknown id
                  Rec(4, b"\x00\x00\x00\x00\x01\xff"),                               # truncated body
                  Rec(5, b'{"id": "json"}'),                                         # no framing
                  Rec(6, None)])
        assert sorted(registry.requests) == ["/schemas/ids/1", "/schemas/ids/2", "/schemas/ids/9"]
    rows = rows_to_arrow(p.rows, TABLE).to_pylist()
    assert rows[0] == {"id": "o-1", "amount": 12.5, "qty": 3, "ts": V1["ts"], "created": V1["created"],
                       "day": date(2024, 5, 1), "ref": str(REF), "status": "PAID", "note": None}
    assert rows[1] == dict.fromkeys(rows[0], None) | {"id": "o-2"}
    assert rows[2]["id"] == "o-3" and rows[2]["created"] is None
    assert p.counters.unknown_fields == 2  # "extra" in both V1 records
    assert [(d.offset, d.error_class) for d in p.dead_letters] == [
        (3, "UnknownSchemaId"), (4, "InvalidAvro"), (5, "InvalidAvro")]
    assert p.counters.records_skipped == 1 and p.next_offset == 7


def test_a_registry_outage_defers_the_partition_instead_of_dead_lettering() -> None:
    with LocalRegistry({1: WRITER_V1}) as registry:
        values = AvroValues(RegistrySchemas(AvroConfig(registry_url=registry.url)))
        p = _participant(values)
        registry.down = True
        p.accept([Rec(0, confluent_avro(1, WRITER_V1, V1)), Rec(1, confluent_avro(1, WRITER_V1, V1))])
        assert p.deferred is not None and "503" in p.deferred
        assert (p.next_offset, p.rows, p.dead_letters) == (0, [], [])
        registry.down = False
        p.deferred = None  # what the intake does when it reads again from next_offset
        p.accept([Rec(0, confluent_avro(1, WRITER_V1, V1)), Rec(1, confluent_avro(1, WRITER_V1, V1))])
        assert (p.next_offset, len(p.rows), p.deferred) == (2, 2, None)


def test_registry_errors_are_told_apart(tmp_path: Path) -> None:
    with LocalRegistry({1: WRITER_V1}, user="u", password="right") as registry:
        wrong = RegistrySchemas(AvroConfig(registry_url=registry.url, registry_username="u",
                                           registry_password="wrong"))
        with pytest.raises(RegistryUnavailable, match="401"):
            wrong.get(1)
        right = RegistrySchemas(AvroConfig(registry_url=registry.url + "/", registry_username="u",
                                           registry_password="right"))
        with pytest.raises(UnknownSchemaId):
            right.get(7)
        assert right.get(1)["name"] == "Order"
        url = registry.url
    with pytest.raises(RegistryUnavailable, match="unreachable"):
        RegistrySchemas(AvroConfig(registry_url=url, registry_timeout_s=1)).get(2)
    assert isinstance(AvroValues(RegistrySchemas(AvroConfig(registry_url=url))).parse(
        confluent_avro(1, WRITER_V1, V1)), Deferred)


def test_avsc_file_provider_and_config(tmp_path: Path) -> None:
    avsc = tmp_path / "order.avsc"
    avsc.write_text(json.dumps(WRITER_V2))
    values = AvroValues(writer_schemas(AvroConfig(schema_file=str(avsc), schema_id=42)))
    decoded = values.parse(confluent_avro(42, WRITER_V2, {"id": "f", "amount": 2.5}))
    assert decoded == {"id": "f", "amount": 2.5}
    assert isinstance(values.parse(b"\x01\x00\x00\x00\x01"), Rejected)
    with pytest.raises(ConfigError, match="avro.registry_url"):
        writer_schemas(AvroConfig())


def test_tls_registry_with_a_ca_bundle(tmp_path: Path) -> None:
    cert, key = self_signed_certificate(tmp_path)
    with LocalRegistry({1: WRITER_V1}, tls=(str(cert), str(key))) as registry:
        assert registry.url.startswith("https://")
        trusted = RegistrySchemas(AvroConfig(registry_url=registry.url, registry_ca_file=str(cert)))
        assert trusted.get(1)["name"] == "Order"
        with pytest.raises(RegistryUnavailable, match="CERTIFICATE_VERIFY_FAILED|certificate"):
            RegistrySchemas(AvroConfig(registry_url=registry.url)).get(1)  # system CAs only
