"""``hudi-sink produce --key-space K --delete-ratio R``: the keyed messages and the usage
errors (the records on a broker: tests/integration/test_keyed_produce.py)."""

from __future__ import annotations

import random

import orjson
import pytest

from hudi_sink.cli.main import main
from hudi_sink.cli.produce import COUNTRIES, KeySpace, keyed_message, synthetic_record
from hudi_sink.shared.config.settings import TableConfig

SCHEMA = TableConfig(schema="id STRING, country STRING, amount DOUBLE", record_key_field="id",
                     partition_field="country").table_schema()


@pytest.mark.parametrize(("args", "words"), [
    (["--delete-ratio", "0.1"], "--delete-ratio needs --key-space"),
    (["--key-space", "0"], "--key-space must be at least 1"),
    (["--key-space", "10", "--delete-ratio", "1.5"], "--delete-ratio must be between 0 and 1"),
    (["--key-space", "10", "--delete-ratio", "nan"], "--delete-ratio must be between 0 and 1"),
])
def test_bad_keyed_arguments_are_usage_errors(args: list[str], words: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # Checked before the config is read: the config file need not exist.
    with pytest.raises(SystemExit) as exit_info:
        main(["produce", "--config", "/nonexistent.yaml", "--records", "10", *args])
    assert exit_info.value.code == 2
    assert words in capsys.readouterr().err


def test_keyed_message_puts_the_key_in_the_key_field_and_the_message_key() -> None:
    rng = random.Random(1)
    seen = set()
    for n in range(500):
        key, value = keyed_message(SCHEMA, "run", n, rng, KeySpace(50))
        assert value is not None  # no deletes asked for
        record = orjson.loads(value)
        assert record["id"] == key.decode() and 0 <= int(key) < 50
        assert record["country"] == COUNTRIES[int(key) % len(COUNTRIES)]  # fixed per key
        seen.add(int(key))
    assert seen == set(range(50))


def test_integer_key_columns_get_the_integer() -> None:
    schema = TableConfig(schema="k BIGINT, v STRING", record_key_field="k").table_schema()
    key, value = keyed_message(schema, "run", 0, random.Random(3), KeySpace(1000))
    assert value is not None and orjson.loads(value)["k"] == int(key)


def test_delete_ratio_makes_tombstones() -> None:
    rng = random.Random(5)
    messages = [keyed_message(SCHEMA, "run", n, rng, KeySpace(10, 0.25)) for n in range(4000)]
    tombstones = sum(value is None for _, value in messages)
    # Binomial(4000, 0.25): sd = sqrt(4000 * 0.25 * 0.75) = 27.4; 5 sd either side.
    assert abs(tombstones - 1000) <= 5 * (4000 * 0.25 * 0.75) ** 0.5
    assert all(0 <= int(key) < 10 for key, _ in messages)
    everything = [keyed_message(SCHEMA, "run", n, rng, KeySpace(10, 1.0)) for n in range(50)]
    assert all(value is None for _, value in everything)


def test_unkeyed_records_are_unchanged() -> None:
    # Without a key the record key stays "<run>-<n>" and the partition cycles with n.
    record = synthetic_record(SCHEMA, "run", 9, random.Random(0))
    assert record["id"] == "run-9" and record["country"] == COUNTRIES[9 % len(COUNTRIES)]
