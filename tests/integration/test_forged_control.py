"""Signed control messages through the contract (issue 27): a sink whose key comes from a
file (a mounted Secret) runs, and forged control messages put on its control topic mid-run
change nothing.

The forgeries are the ones that would hurt: a "coordinator" START_COMMIT with a huge epoch
that rewinds every partition to offset 0 (obeyed, participants would re-write what is
committed and then ignore the real coordinator as stale), sent unsigned, signed with a
foreign key, altered after the sink's own key signed it, and with a malformed signature; and
an unsigned "participant" WRITE_STATUS claiming far more than was read. The table still holds
every record exactly once, the real coordinator keeps committing, no partition ever takes the
forged epoch, and each process that reads the topic counts the forgeries in
``hudi_sink_control_rejected_total``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from eventually import eventually
from pipeline import HTTP, Pipeline, Service, metric_samples

from hudi_sink.cli.broker import EmbeddedBroker
from hudi_sink.shared.kafka.protocol import (
    AnyPayload,
    Envelope,
    PartitionOffset,
    Role,
    Sender,
    StartCommit,
    WriteStatus,
    encode,
)
from hudi_sink.shared.kafka.signing import SIGNATURE_HEADER, ControlKeys

pytestmark = pytest.mark.timeout(600)

KEY = "test-signing-key-" + "0123456789abcdef"
OURS = ControlKeys((KEY.encode(),))
FOREIGN = ControlKeys((b"a-key-the-sink-does-not-hold",))
HUGE_EPOCH = 2**40
REJECTED = "hudi_sink_control_rejected_total"


def _forgeries(pipeline: Pipeline) -> list[tuple[bytes, list[tuple[str, bytes]]]]:
    """(value, headers) of each forged record: three coordinator STARTs and a status."""
    def envelope(payload: AnyPayload, role: Role, instant: str, epoch: int) -> bytes:
        return encode(Envelope.wrap(payload, sink=pipeline.name, commit_time=instant, epoch=epoch,
                                    sender=Sender(role=role, id=f"forger-{role}")))

    rewind = StartCommit(offsets=[PartitionOffset(topic=pipeline.topic, partition=p, offset=0)
                                  for p in range(pipeline.partitions)])
    start = envelope(rewind, Role.COORDINATOR, "29991231235959999", HUGE_EPOCH)
    # A message signed with the sink's own key, then altered (its epoch raised): the signature
    # names our key, but not these bytes.
    genuine = envelope(rewind, Role.COORDINATOR, "29991231235959999", 1)
    tampered = genuine.replace(b'"coordinator_epoch":1,', f'"coordinator_epoch":{HUGE_EPOCH},'.encode())
    assert tampered != genuine
    status = envelope(WriteStatus(topic=pipeline.topic, partition=0, start_offset=0,
                                  next_offset=10**9), Role.PARTICIPANT, "29991231235959999", 1)
    malformed = b"v1:" + OURS.signing_key_id.encode() + b":00"
    return [
        (start, []),                                      # unsigned
        (start, [FOREIGN.sign(start)]),                   # a key the sink does not hold
        (tampered, [OURS.sign(genuine)]),                 # our key's signature, other bytes
        (start, [(SIGNATURE_HEADER, malformed)]),         # not a signature at all
        (status, []),                                     # a "participant" status, unsigned
    ]


async def _send(bootstrap: str, topic: str, records: list[tuple[bytes, list[tuple[str, bytes]]]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False)
    await producer.start()
    try:
        for value, headers in records:
            await producer.send_and_wait(topic, value=value, partition=0, headers=headers or None)
    finally:
        await producer.stop()


def _rejected(service: Service) -> dict[str, float]:
    return {labels.removeprefix('reason="').removesuffix('"'): value
            for labels, value in metric_samples(service, REJECTED).items()}


def test_forged_control_messages_change_nothing(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    key_file = tmp_path / "control-signing-key"
    key_file.write_text(KEY + "\n", encoding="utf-8")  # as a Secret often is: a trailing newline
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap,
                        overrides={"kafka": {"control_signing_key_file": str(key_file)}})
    with pipeline:
        pipeline.produce(4_000)
        coordinator, participant = pipeline.start_ready("coordinator", "participant")
        pipeline.wait_offsets(1_000, timeout_s=240)  # the signed protocol works
        epoch = int(sum(metric_samples(coordinator, "hudi_sink_coordinator_epoch").values()))
        none = {"unsigned": 0.0, "unknown_key": 0.0, "bad_signature": 0.0, "undecodable": 0.0}
        assert _rejected(coordinator) == _rejected(participant) == none  # all signed, all exported

        forgeries = _forgeries(pipeline)
        asyncio.run(_send(broker.bootstrap, f"{pipeline.name}-control", forgeries))
        pipeline.produce(4_000)

        # The real coordinator keeps committing: every record, once.
        pipeline.wait_offsets(2_000, timeout_s=240)
        [table] = pipeline.read_agreed()
        ids = table.column("id").to_pylist()
        assert len(ids) == 8_000 and len(set(ids)) == 8_000
        assert not pipeline.unlisted_completed_files()

        # Nobody took the forged epoch; both processes counted every forgery they read.
        views = HTTP.get(f"{participant.url}/partitions").json()
        assert views and all(v["coordinator_epoch"] < HUGE_EPOCH for v in views), views
        assert int(sum(metric_samples(coordinator, "hudi_sink_coordinator_epoch").values())) == epoch
        expected = {"unsigned": 2.0, "unknown_key": 1.0, "bad_signature": 2.0, "undecodable": 0.0}
        for service in (coordinator, participant):
            eventually(lambda s=service: _rejected(s) == expected, 30,
                       f"{service.role} counted the forgeries as {expected}")
        assert "ignored (unsigned)" in participant.log_tail(400)
