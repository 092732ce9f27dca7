"""Which Kafka partition a producer's partitioner puts a record key in.

Why: in upsert mode a key must live in exactly one Kafka partition, because only that
partition's participant writes (and looks keys up in) the file groups it owns. Keyed producers
guarantee it by hashing the key; the participant recomputes the same hash on every record and
refuses a record that arrived elsewhere (``KeyPartitionMismatch``) instead of letting the same
key grow a second row in another partition's group.

Two producer families, two hashes:

- ``murmur2``: Apache Kafka's Java client (``BuiltInPartitioner.partitionForKey``:
  ``Utils.toPositive(Utils.murmur2(key)) % numPartitions``), which aiokafka's
  ``DefaultPartitioner`` and librdkafka's ``murmur2``/``murmur2_random`` reproduce. A null key
  is spread by a sticky or random choice, so it belongs nowhere; an empty key hashes like any
  other.
- ``crc32``: librdkafka's default ``consistent_random`` (``rd_crc32(key) % partition_cnt``,
  the IEEE CRC-32 that :func:`zlib.crc32` computes). A null or empty key is placed at random
  there, so it belongs nowhere either.

``none`` checks nothing: the user vouches for the producer.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

from hudi_sink.services.participant.decoded import KEY_PARTITION_MISMATCH, Rejected

__all__ = ["MURMUR2", "CRC32", "NONE", "PARTITIONERS", "murmur2", "expected_partition",
           "partition_mismatch"]

MURMUR2: Final = "murmur2"
CRC32: Final = "crc32"
NONE: Final = "none"
#: The values ``upsert.key_partitioner`` takes.
PARTITIONERS: Final = (MURMUR2, CRC32, NONE)

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_MASK: Final = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: MurmurHash2 (32 bit, seed ``0x9747b28c``) of ``data`` as Java's
    signed ``int`` — the same number the Java client computes, so its test vectors apply as is
    (``murmur2(b"21") == -973932308``)."""
    length = len(data)
    h = _SEED ^ length
    end = length & ~3
    for k in struct.unpack_from(f"<{end >> 2}I", data):  # the 4-byte words, little-endian
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def expected_partition(kind: str, key: bytes | None, num_partitions: int) -> int | None:
    """The partition ``kind``'s partitioner sends ``key`` to among ``num_partitions``; ``None``
    when it places the key at random (a null key; an empty one under ``crc32``) or when
    ``kind`` is ``none`` (no check). Raises ValueError for an unknown kind or no partitions."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    if kind == MURMUR2:
        return None if key is None else (murmur2(key) & 0x7FFFFFFF) % num_partitions
    if kind == CRC32:
        return None if not key else zlib.crc32(key) % num_partitions
    if kind == NONE:
        return None
    raise ValueError(f"unknown key partitioner {kind!r}; expected one of {', '.join(PARTITIONERS)}")


def partition_mismatch(kind: str, key: bytes | None, partition: int,
                       num_partitions: int) -> Rejected | None:
    """``None`` when a record with message key ``key`` belongs in ``partition`` (or ``kind`` is
    ``none``); else the ``KeyPartitionMismatch`` rejection saying where the key belongs and
    why, so a dead letter tells the producer's owner what to fix."""
    if kind == NONE:
        return None
    expected = expected_partition(kind, key, num_partitions)
    if expected == partition:
        return None
    setting = f"upsert.key_partitioner: {kind}"
    if expected is None:
        what = "null" if key is None else "empty"
        return Rejected(KEY_PARTITION_MISMATCH,
                        f"the record has a {what} Kafka message key, so its partition says nothing "
                        f"about its record key ({setting} places such keys at random); keyed "
                        f"writes need every record keyed")
    return Rejected(KEY_PARTITION_MISMATCH,
                    f"the message key {_shown(key)} belongs in partition {expected} of "
                    f"{num_partitions} ({setting}), but the record is in partition {partition}: "
                    f"the producer does not partition by key that way")


def _shown(key: bytes | None) -> str:
    """The key for a message: its text when it is short UTF-8, else its length."""
    assert key is not None
    if len(key) <= 64:
        try:
            return repr(key.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return f"of {len(key)} bytes"
