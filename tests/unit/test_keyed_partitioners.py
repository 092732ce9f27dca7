"""Kafka's default partitioner recomputed on record keys (``upsert.key_partitioner``).

murmur2 must be the Java client's bit for bit: the vectors are Apache Kafka's own
(``UtilsTest.testMurmur2``), and for random keys the partition must be aiokafka's
``DefaultPartitioner``'s (the producer ``hudi-sink produce --key-space`` uses). crc32 is
librdkafka's ``consistent_random`` (``rd_crc32`` = IEEE CRC-32); its placement by a real
librdkafka producer is checked in ``tests/integration/test_keyed_produce.py``.
"""

from __future__ import annotations

import random

import pytest
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from hudi_sink.services.participant.decoded import ERROR_CLASSES, KEY_PARTITION_MISMATCH
from hudi_sink.services.participant.keyed.partitioners import (
    CRC32,
    MURMUR2,
    NONE,
    expected_partition,
    murmur2,
    partition_mismatch,
)

# org.apache.kafka.common.utils.UtilsTest#testMurmur2 (signed Java ints).
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS)
def test_murmur2_equals_kafka_java_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_of_the_empty_key_is_the_seed_mix() -> None:
    # An empty (not null) key is hashed by the Java client like any other; the value is
    # aiokafka's too.
    assert murmur2(b"") & 0xFFFFFFFF == aiokafka_murmur2(b"")
    assert expected_partition(MURMUR2, b"", 7) == (murmur2(b"") & 0x7FFFFFFF) % 7


def test_murmur2_equals_aiokafka_for_random_keys() -> None:
    rng = random.Random(24)
    for _ in range(5000):
        key = rng.randbytes(rng.randrange(0, 41))
        assert murmur2(key) & 0xFFFFFFFF == aiokafka_murmur2(key), key
        assert -(2**31) <= murmur2(key) < 2**31


def test_partition_equals_aiokafka_default_partitioner() -> None:
    rng = random.Random(7)
    partitioner = DefaultPartitioner()
    for _ in range(3000):
        count = rng.randrange(1, 64)
        partitions = list(range(count))
        key = str(rng.randrange(1_000_000)).encode() if rng.random() < 0.5 else rng.randbytes(
            rng.randrange(1, 30))
        assert expected_partition(MURMUR2, key, count) == partitioner(key, partitions, partitions)


def test_partition_of_the_toPositive_of_a_negative_hash() -> None:
    # toPositive masks the sign bit (it is not abs()): "foobar" hashes to -790332482.
    assert expected_partition(MURMUR2, b"foobar", 50) == (-790332482 & 0x7FFFFFFF) % 50 == 16


def test_crc32_is_ieee_crc32_modulo() -> None:
    # The CRC-32 check value: crc32("123456789") = 0xCBF43926.
    assert expected_partition(CRC32, b"123456789", 2**31 - 1) == 0xCBF43926 % (2**31 - 1)
    assert expected_partition(CRC32, b"123456789", 10) == 0xCBF43926 % 10


@pytest.mark.parametrize("kind", [MURMUR2, CRC32])
def test_a_null_key_belongs_nowhere(kind: str) -> None:
    assert expected_partition(kind, None, 4) is None
    mismatch = partition_mismatch(kind, None, 0, 4)
    assert mismatch is not None and mismatch.error_class == KEY_PARTITION_MISMATCH
    assert "null Kafka message key" in mismatch.message and kind in mismatch.message


def test_an_empty_key_is_random_under_crc32_only() -> None:
    assert expected_partition(CRC32, b"", 4) is None
    mismatch = partition_mismatch(CRC32, b"", 0, 4)
    assert mismatch is not None and "empty Kafka message key" in mismatch.message
    right = expected_partition(MURMUR2, b"", 4)
    assert right is not None and partition_mismatch(MURMUR2, b"", right, 4) is None


def test_none_checks_nothing() -> None:
    assert expected_partition(NONE, b"k", 4) is None
    assert partition_mismatch(NONE, None, 3, 4) is None
    assert partition_mismatch(NONE, b"k", 3, 4) is None


def test_mismatch_names_key_and_both_partitions() -> None:
    right = expected_partition(MURMUR2, b"order-17", 6)
    assert right is not None
    assert partition_mismatch(MURMUR2, b"order-17", right, 6) is None
    wrong = (right + 1) % 6
    mismatch = partition_mismatch(MURMUR2, b"order-17", wrong, 6)
    assert mismatch is not None and mismatch.error_class == "KeyPartitionMismatch"
    assert "'order-17'" in mismatch.message
    assert f"partition {right} of 6" in mismatch.message
    assert f"in partition {wrong}" in mismatch.message
    binary = partition_mismatch(MURMUR2, b"\xff" * 3, 99, 100)
    assert binary is not None and "of 3 bytes" in binary.message


def test_error_class_is_registered() -> None:
    assert KEY_PARTITION_MISMATCH in ERROR_CLASSES


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown key partitioner 'fnv1a'"):
        expected_partition("fnv1a", b"k", 4)
    with pytest.raises(ValueError, match="at least 1"):
        expected_partition(MURMUR2, b"k", 0)
