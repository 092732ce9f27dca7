"""A registry reply that is broken in a way the client did not foresee defers the partition;
it never dead-letters the record.

Only the registry's own "no such id" (404) makes a record bad. A status line that is not HTTP
(``http.client.BadStatusLine``), a body cut short (``IncompleteRead``), a header line over
64 KiB (``LineTooLong``), JSON nested too deep to parse (``RecursionError``) or a CA bundle
that no longer loads used to escape the client as themselves, reach the decoder's last-resort
guard and become ``DecodeError`` dead letters: good records of a schema id not yet cached
went to the DLQ and the committed offset moved past them. Real sockets, scripted bytes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from kafka_records import Rec
from registry_app import LocalRegistry, RawServer, Step, confluent_avro, self_signed_certificate

from hudi_sink.services.participant.avro_format import AvroValues
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.shared.config.sections import AvroConfig
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.schema.registry import RegistrySchemas, RegistryUnavailable

TABLE = TableConfig(schema="id STRING NOT NULL", record_key_field="id").table_schema()
SCHEMA: dict[str, Any] = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}


def _ok(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def _accept(values: AvroValues) -> TransactionParticipant:
    p = TransactionParticipant(topic="t", partition=0, flush_records=100, fail_on_error=False,
                               decoder=RecordDecoder(TABLE, 1 << 20, value_parser=values.parse))
    p.begin("20250101000000001", 1, 0)
    p.accept([Rec(i, confluent_avro(1, SCHEMA, {"id": f"o-{i}"})) for i in range(3)])
    return p


@pytest.mark.parametrize("reply", [
    pytest.param([b"HTTP/1.1 abc\r\n\r\n"], id="bad-status-line"),
    pytest.param([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1f4\r\n{\"schema\": "],
                 id="incomplete-read"),  # a chunk of 500 bytes cut off after 11
    pytest.param([b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n"], id="line-too-long"),
    pytest.param([_ok(b"[" * 200_000)], id="answer-nested-too-deep"),
    pytest.param([_ok(json.dumps({"schema": "[" * 200_000}).encode())], id="schema-nested-too-deep"),
])
def test_a_broken_reply_defers_and_dead_letters_nothing(reply: list[bytes]) -> None:
    with RawServer(list(reply)) as server:
        p = _accept(AvroValues(RegistrySchemas(AvroConfig(registry_url=server.url))))
    assert (p.next_offset, p.rows, p.dead_letters) == (0, [], [])  # the old code: 3 DecodeErrors
    assert p.deferred is not None and "registry" in p.deferred
    assert server.requests == 1  # the partition stopped at the first record


def test_a_ca_bundle_that_stopped_loading_defers(tmp_path: Path) -> None:
    cert, key = self_signed_certificate(tmp_path)
    with LocalRegistry({1: SCHEMA}, tls=(str(cert), str(key))) as registry:
        schemas = RegistrySchemas(AvroConfig(registry_url=registry.url, registry_ca_file=str(cert)))
        good = cert.read_bytes()
        cert.write_text("not a certificate\n")  # rotated badly after start
        with pytest.raises(RegistryUnavailable, match="SSLError"):
            schemas.get(1)
        p = _accept(AvroValues(schemas))
        assert p.deferred is not None and (p.next_offset, p.dead_letters) == (0, [])
        cert.write_bytes(good)
        assert schemas.get(1)["name"] == "Order"


def test_a_ca_bundle_that_does_not_load_is_refused_at_start(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("not a certificate\n")
    with pytest.raises(ValueError, match="registry_ca_file: .* is not a CA bundle"):
        AvroConfig(registry_url="https://registry:8081", registry_ca_file=str(bundle))


def test_a_trickling_answer_is_cut_off_at_the_timeout() -> None:
    """Each byte comes within the socket timeout, so only an overall deadline stops the read
    (the old client read on for as long as the server kept sending)."""
    trickle: list[Step] = [b"HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\n"]
    for _ in range(30):
        trickle += [b" ", 0.2]  # 6 s in all
    with RawServer(list(trickle)) as server:
        started = time.monotonic()
        with pytest.raises(RegistryUnavailable, match="incomplete"):
            RegistrySchemas(AvroConfig(registry_url=server.url, registry_timeout_s=1)).get(1)
        assert time.monotonic() - started < 3
