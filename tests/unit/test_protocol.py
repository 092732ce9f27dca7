"""Control-topic protocol: every message round-trips inside an Envelope; bad input is refused."""

from __future__ import annotations

import orjson
import pytest

from hudi_sink.shared.errors import ProtocolDecodeError
from hudi_sink.shared.kafka.protocol import (
    PROTOCOL_VERSION,
    AckCommit,
    EndCommit,
    Envelope,
    MessageType,
    ParticipantReady,
    PartitionOffset,
    Role,
    Sender,
    StagedFile,
    StartCommit,
    TopicPartition,
    WriteStatus,
    decode,
    encode,
)

T = "20250101000000001"
COORDINATOR = Sender(role=Role.COORDINATOR, id="c-1", host="host-a")
PARTICIPANT = Sender(role=Role.PARTICIPANT, id="p-1")

PAYLOADS = [
    StartCommit(
        offsets=[
            PartitionOffset(topic="orders", partition=0, offset=1500),
            PartitionOffset(topic="orders", partition=1, offset=0),
        ]
    ),
    StartCommit(
        offsets=[PartitionOffset(topic="orders", partition=0, offset=7)],
        targets=[TopicPartition(topic="orders", partition=0)],
    ),
    EndCommit(),
    EndCommit(targets=[TopicPartition(topic="orders", partition=3)]),
    WriteStatus(
        topic="orders",
        partition=2,
        start_offset=10,
        next_offset=25,
        files=[
            StagedFile(
                staged_path=f".hoodie/.temp/{T}/sf/abc_0-0-1_{T}.parquet",
                final_path=f"sf/abc_0-0-1_{T}.parquet",
                file_id="abc",
                partition_path="sf",
                num_records=12,
                size_bytes=4096,
            )
        ],
        records_written=12,
        records_dlq=2,
        records_skipped=1,
        unknown_fields=3,
    ),
    WriteStatus(topic="orders", partition=0, start_offset=5, next_offset=5, failed="bad record at 5"),
    AckCommit(offsets=[PartitionOffset(topic="orders", partition=0, offset=25)]),
    ParticipantReady(
        partitions=[TopicPartition(topic="orders", partition=0), TopicPartition(topic="b", partition=4)]
    ),
]


def _wrap(payload: object, sender: Sender = COORDINATOR) -> Envelope:
    return Envelope.wrap(payload, sink="orders", sender=sender, commit_time=T, epoch=3)  # type: ignore[arg-type]


def _raw(payload: object) -> dict[str, object]:
    return orjson.loads(encode(_wrap(payload)))


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{p.type.value}")
def test_round_trip_inside_envelope(payload: object) -> None:
    envelope = _wrap(payload)
    decoded = decode(encode(envelope))
    assert decoded == envelope
    assert decoded.payload == payload
    assert type(decoded.payload) is type(payload)
    assert decoded.type == payload.type  # type: ignore[attr-defined]
    assert decoded.protocol_version == PROTOCOL_VERSION
    assert decoded.sink == "orders"
    assert decoded.commit_time == T
    assert decoded.coordinator_epoch == 3
    assert decoded.sender == COORDINATOR


def test_every_message_type_is_covered() -> None:
    assert {p.type for p in PAYLOADS} == set(MessageType)  # type: ignore[attr-defined]


def test_envelope_without_commit_time_round_trips() -> None:
    envelope = Envelope.wrap(
        ParticipantReady(partitions=[TopicPartition(topic="orders", partition=0)]),
        sink="orders",
        sender=PARTICIPANT,
        commit_time=None,
        epoch=0,
    )
    decoded = decode(encode(envelope))
    assert decoded == envelope
    assert decoded.commit_time is None
    assert decoded.sender.role is Role.PARTICIPANT


def test_write_status_fields_survive_round_trip() -> None:
    status = PAYLOADS[4]
    decoded = decode(encode(_wrap(status, PARTICIPANT))).payload
    assert isinstance(decoded, WriteStatus)
    assert decoded.key() == ("orders", 2)
    assert (decoded.start_offset, decoded.next_offset) == (10, 25)
    assert decoded.files[0].final_path == f"sf/abc_0-0-1_{T}.parquet"
    assert (decoded.records_written, decoded.records_dlq, decoded.records_skipped) == (12, 2, 1)
    assert decoded.unknown_fields == 3
    assert decoded.failed is None


def test_unknown_fields_are_ignored_everywhere() -> None:
    raw = _raw(PAYLOADS[4])
    raw["future_field"] = {"anything": [1, 2]}
    raw["sender"]["zone"] = "eu"  # type: ignore[index]
    raw["payload"]["new_counter"] = 42  # type: ignore[index]
    raw["payload"]["files"][0]["checksum"] = "abc"  # type: ignore[index]
    decoded = decode(orjson.dumps(raw))
    assert decoded == _wrap(PAYLOADS[4])
    assert not hasattr(decoded, "future_field")
    assert not hasattr(decoded.payload, "new_counter")


def test_unknown_message_type_raises() -> None:
    raw = _raw(EndCommit())
    raw["type"] = "REBOOT_EVERYTHING"
    raw["payload"]["type"] = "REBOOT_EVERYTHING"  # type: ignore[index]
    with pytest.raises(ProtocolDecodeError, match="unknown message type"):
        decode(orjson.dumps(raw))


def test_missing_message_type_raises() -> None:
    raw = _raw(EndCommit())
    del raw["type"]
    with pytest.raises(ProtocolDecodeError):
        decode(orjson.dumps(raw))


@pytest.mark.parametrize("version", [0, 2, PROTOCOL_VERSION + 1, "1", None])
def test_other_protocol_version_raises(version: object) -> None:
    raw = _raw(EndCommit())
    raw["protocol_version"] = version
    with pytest.raises(ProtocolDecodeError, match="protocol_version"):
        decode(orjson.dumps(raw))


def test_missing_protocol_version_raises() -> None:
    raw = _raw(EndCommit())
    del raw["protocol_version"]
    with pytest.raises(ProtocolDecodeError, match="protocol_version"):
        decode(orjson.dumps(raw))


@pytest.mark.parametrize("data", [b"", b"not json", b"{\"type\": ", b"\xff\xfe", b"{'a': 1}"])
def test_non_json_raises(data: bytes) -> None:
    with pytest.raises(ProtocolDecodeError, match="not JSON"):
        decode(data)


@pytest.mark.parametrize("value", [[], [1, 2], "START_COMMIT", 1, None, True])
def test_non_object_raises(value: object) -> None:
    with pytest.raises(ProtocolDecodeError, match="not a JSON object"):
        decode(orjson.dumps(value))


def test_payload_type_differs_from_envelope_type_raises() -> None:
    raw = _raw(EndCommit())
    raw["type"] = MessageType.START_COMMIT.value
    with pytest.raises(ProtocolDecodeError, match="payload type"):
        decode(orjson.dumps(raw))


def test_payload_of_other_type_with_envelope_type_relabelled_raises() -> None:
    # A WRITE_STATUS payload relabelled as ACK_COMMIT must not sneak through.
    raw = _raw(PAYLOADS[4])
    raw["payload"]["type"] = MessageType.ACK_COMMIT.value  # type: ignore[index]
    raw["type"] = MessageType.ACK_COMMIT.value
    with pytest.raises(ProtocolDecodeError):
        decode(orjson.dumps(raw))


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda r: r.pop("payload"), id="missing-payload"),
        pytest.param(lambda r: r.__setitem__("payload", "x"), id="payload-not-object"),
        pytest.param(lambda r: r.pop("sender"), id="missing-sender"),
        pytest.param(lambda r: r.pop("sink"), id="missing-sink"),
        pytest.param(lambda r: r.__setitem__("coordinator_epoch", -1), id="negative-epoch"),
        pytest.param(lambda r: r["payload"].__setitem__("partition", -1), id="negative-partition"),
        pytest.param(lambda r: r["payload"].__setitem__("next_offset", "many"), id="bad-offset"),
        pytest.param(lambda r: r["payload"].pop("topic"), id="missing-topic"),
        pytest.param(lambda r: r["sender"].__setitem__("role", "king"), id="unknown-role"),
    ],
)
def test_invalid_message_raises_protocol_error(mutate: object) -> None:
    raw = _raw(PAYLOADS[4])
    mutate(raw)  # type: ignore[operator]
    with pytest.raises(ProtocolDecodeError, match="invalid WRITE_STATUS"):
        decode(orjson.dumps(raw))


def test_envelope_is_frozen() -> None:
    envelope = _wrap(EndCommit())
    with pytest.raises(ValueError):
        envelope.coordinator_epoch = 9  # type: ignore[misc]


def test_boolean_protocol_version_raises() -> None:
    # JSON true is not version 1, even though Python's True == 1.
    raw = _raw(EndCommit())
    raw["protocol_version"] = True
    with pytest.raises(ProtocolDecodeError, match="protocol_version"):
        decode(orjson.dumps(raw))
