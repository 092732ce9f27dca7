"""Consumers read committed data only: records of aborted upstream transactions never reach a
partition's buffer.

The embedded development broker withholds an open transaction's records from read_committed
consumers (end to end in ``tests/integration/test_read_committed.py``) but never reports
aborted transactions in its fetch responses, so the aborted half is shown here: a partition log
with an aborted and a committed transaction, as a broker that supports transactions returns it
(record batches, control markers, the fetch response's ``aborted_transactions``), goes through
aiokafka's own fetch-response reader with the isolation level the sink's consumer options
carry, and the records it yields go into a real ``TransactionParticipant``.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from aiokafka.consumer.fetcher import READ_COMMITTED, READ_UNCOMMITTED, PartitionRecords
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.record.util import calc_crc32c
from aiokafka.structs import TopicPartition
from pydantic import ValidationError

from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.shared.config.settings import KafkaConfig
from hudi_sink.shared.kafka.connection import consumer_options
from hudi_sink.shared.schema.table_schema import TableSchema

ABORTING_PRODUCER, COMMITTING_PRODUCER = 7, 8
_ISOLATION = {"read_committed": READ_COMMITTED, "read_uncommitted": READ_UNCOMMITTED}


_BASE_OFFSET, _CRC, _ATTRIBUTES = 0, 17, 21  # byte positions in a v2 batch header
_CONTROL_MASK = 0x20  # the attributes bit of a control batch


def _batch(base_offset: int, values: list[bytes], *, producer_id: int = -1,
           control_type: int | None = None) -> bytes:
    """One record batch at ``base_offset``; transactional when a producer id is given; a
    control marker (0 abort, 1 commit) when ``control_type`` is given."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=int(producer_id >= 0),
                  producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                  base_sequence=0 if producer_id >= 0 else -1, batch_size=1 << 20)
    if control_type is None:
        for delta, value in enumerate(values):
            builder.append(delta, timestamp=1_700_000_000_000, key=None, value=value, headers=[])
    else:
        builder.append(0, timestamp=1_700_000_000_000, key=struct.pack(">HH", 0, control_type),
                       value=b"\x00\x00\x00\x00\x00\x00", headers=[])
    buffer = builder.build()
    struct.pack_into(">q", buffer, _BASE_OFFSET, base_offset)  # the broker assigns it
    if control_type is not None:  # only brokers write control batches: set the bit, re-sign
        attributes = struct.unpack_from(">h", buffer, _ATTRIBUTES)[0]
        struct.pack_into(">h", buffer, _ATTRIBUTES, attributes | _CONTROL_MASK)
        struct.pack_into(">I", buffer, _CRC, calc_crc32c(bytes(buffer[_ATTRIBUTES:])))
    return bytes(buffer)


def _row(i: int) -> bytes:
    return b'{"id": "%d"}' % i


# The partition's log as a broker with transactions stores it:
#   0-2  producer 7's transaction (aborted by the marker at 6)
#   3-4  producer 8's transaction (committed by the marker at 5)
#   5    commit marker of producer 8, 6 abort marker of producer 7
#   7-8  plain (non-transactional) records
_LOG = b"".join([
    _batch(0, [_row(0), _row(1), _row(2)], producer_id=ABORTING_PRODUCER),
    _batch(3, [_row(3), _row(4)], producer_id=COMMITTING_PRODUCER),
    _batch(5, [], producer_id=COMMITTING_PRODUCER, control_type=1),
    _batch(6, [], producer_id=ABORTING_PRODUCER, control_type=0),
    _batch(7, [_row(7), _row(8)]),
])
# What the fetch response says of aborted transactions: (producer id, first offset).
_ABORTED = [(ABORTING_PRODUCER, 0)]


def _fetched(isolation_level: str) -> list[Any]:
    """The records aiokafka's fetch-response reader yields for ``_LOG`` at ``isolation_level``."""
    records = PartitionRecords(TopicPartition("orders", 0), MemoryRecords(_LOG), list(_ABORTED),
                               fetch_offset=0, key_deserializer=None, value_deserializer=None,
                               check_crcs=True, isolation_level=_ISOLATION[isolation_level])
    return list(records)


def _participant() -> TransactionParticipant:
    schema = TableSchema.parse("id STRING", table_name="orders", record_key_field="id")
    decoder = RecordDecoder(schema, 1 << 20)
    participant = TransactionParticipant(topic="orders", partition=0, flush_records=100,
                                         fail_on_error=False, decoder=decoder)
    participant.begin("20250101000000001", 1, 0)
    return participant


def test_consumer_options_read_committed_by_default() -> None:
    options = consumer_options(KafkaConfig(), group_id="g")
    assert options["isolation_level"] == "read_committed"


def test_isolation_level_is_configurable_and_checked() -> None:
    options = consumer_options(KafkaConfig(isolation_level="read_uncommitted"), group_id="g")
    assert options["isolation_level"] == "read_uncommitted"
    with pytest.raises(ValidationError, match="isolation_level"):
        KafkaConfig(isolation_level="committed")  # type: ignore[arg-type]


def test_aborted_transactions_never_reach_the_buffer() -> None:
    """With the sink's default options, the aborted transaction's records are skipped; the
    committed transaction's and the plain records are taken, in order."""
    isolation = consumer_options(KafkaConfig(), group_id="g")["isolation_level"]
    fetched = _fetched(isolation)
    assert [r.offset for r in fetched] == [3, 4, 7, 8]

    participant = _participant()
    participant.accept(fetched)
    assert [row.record_key for row in participant.rows] == ["3", "4", "7", "8"]
    assert participant.next_offset == 9  # every offset below it is handled (skipped or taken)


def test_read_uncommitted_would_take_the_aborted_records() -> None:
    """The contrast that makes the test above meaningful: the same log read uncommitted."""
    assert [r.offset for r in _fetched("read_uncommitted")] == [0, 1, 2, 3, 4, 7, 8]
