"""What a table was created for: ``.hoodie/.sink/table.json``, written once with the table.

A table's write mode cannot change under it: an insert-mode table holds every version of
every key, so switching it to upsert would merge into groups that already hold duplicates;
an upsert table switched to insert would start appending versions of keys it keeps unique.
Its record key cannot change either (the stored keys are spelt from the old fields, so no
update would find its row), nor, in upsert mode, the field that orders a key's versions. The
record holds these facts as the table was created; every service that opens the table and
``config check`` refuse a config that disagrees (exit 2, one line naming the key and both
values). ``hoodie.properties`` holds the record key as well (and is checked on its own);
this file is the sink's, so Hudi's key set stays what Hudi writers expect.

The record is written before ``hoodie.properties`` (exclusively, so two processes creating
the table at once agree on one record): a table whose properties exist has its record,
unless it was created before the record existed — such a table is an insert-mode table, as
every table was then. A crash between the two leaves the record and no properties; the next
start finds the record and checks the config against it, as for any table.

In upsert mode the record holds one more fact, the data topic's partition count
(``kafka_partitions``): keys are mapped to Kafka partitions and a partition's participant owns
the file groups its keys live in, so a changed count re-maps keys to other partitions and two
writers would hold one key. The coordinator, which knows the topic, records the count when it
creates the table, or on its first start when another service created the table without it
(an atomic replace of the file keeping every other field), and refuses to start when the topic
has another count (``keep_kafka_partitions``). Insert mode records nothing.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace

import orjson

from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.errors import ConfigError, TableFormatError
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.storage.fs import FileSystem

__all__ = ["TableRecord", "read_record", "record_problems", "check_table_record",
           "partitions_changed", "keep_kafka_partitions"]


@dataclass(frozen=True)
class TableRecord:
    """The facts a table was created with (``table.json``)."""

    write_mode: str
    record_key_fields: tuple[str, ...]
    precombine_field: str | None
    kafka_partitions: int | None = None
    """The data topic's partition count keys were spread over; None until recorded."""

    @classmethod
    def of(cls, table: TableConfig, kafka_partitions: int | None = None) -> TableRecord:
        return cls(table.write_mode, table.record_key_fields, table.precombine_field,
                   kafka_partitions)

    def to_json(self) -> bytes:
        return orjson.dumps({
            "write_mode": self.write_mode,
            "record_key_fields": list(self.record_key_fields),
            "precombine_field": self.precombine_field,
            "kafka_partitions": self.kafka_partitions,
        }, option=orjson.OPT_INDENT_2)

    @classmethod
    def from_json(cls, raw: bytes, where: str) -> TableRecord:
        """The record in ``raw``; TableFormatError naming ``where`` when it is not one."""
        try:
            data = orjson.loads(raw)
            mode, keys = data["write_mode"], data["record_key_fields"]
            precombine, partitions = data.get("precombine_field"), data.get("kafka_partitions")
            if (mode not in ("insert", "upsert") or not isinstance(keys, list)
                    or not all(isinstance(k, str) and k for k in keys)
                    or not (precombine is None or isinstance(precombine, str))
                    or not (partitions is None or type(partitions) is int)):
                raise ValueError("unexpected values")
        except (orjson.JSONDecodeError, TypeError, KeyError, ValueError) as exc:
            raise TableFormatError(f"{where} is not a table record: {exc}") from None
        return cls(mode, tuple(keys), precombine, partitions)


def _path(base_path: str) -> str:
    return posixpath.join(base_path, layout.SINK_TABLE_FILE)


def read_record(fs: FileSystem, base_path: str) -> TableRecord | None:
    """The table's record; None when it has none (not created, or created before records)."""
    path = _path(base_path)
    try:
        raw = fs.read_bytes(path)
    except FileNotFoundError:
        return None
    return TableRecord.from_json(raw, path)


def record_problems(recorded: TableRecord | None, table: TableConfig,
                    base_path: str) -> list[tuple[str, str]]:
    """Where ``table`` disagrees with what the table at ``base_path`` was created with, each
    ``(key, message)``; ``recorded`` None is an insert-mode table (created before records)."""
    mode = recorded.write_mode if recorded is not None else "insert"
    if mode != table.write_mode:
        return [("table.write_mode", f"the table at {base_path} was created as {mode}; "
                 f"table.write_mode: {table.write_mode} cannot switch it")]
    if recorded is None or mode != "upsert":
        return []  # the record key of any table is checked against hoodie.properties too
    problems: list[tuple[str, str]] = []
    if recorded.record_key_fields != table.record_key_fields:
        problems.append(("table.record_key_field", f"the table at {base_path} was created with "
                         f"record key {','.join(recorded.record_key_fields)}; "
                         f"table.record_key_field: {table.record_key_field} cannot change it"))
    if recorded.precombine_field != table.precombine_field:
        problems.append(("table.precombine_field", f"the table at {base_path} was created with "
                         f"precombine field {recorded.precombine_field}; table.precombine_field: "
                         f"{table.precombine_field} cannot change how its versions are ordered"))
    return problems


def check_table_record(fs: FileSystem, base_path: str, table: TableConfig, *,
                       create: bool, kafka_partitions: int | None = None) -> None:
    """Refuse a config the table was not created for (ConfigError naming each key). With
    ``create`` (the table has no ``hoodie.properties`` yet), write the record first unless one
    exists (a concurrent creator's, or one a crash left): that one is checked instead.
    ``kafka_partitions`` is recorded with a table created here (upsert mode's coordinator)."""
    if create:
        fs.makedirs(posixpath.dirname(_path(base_path)))
        record = TableRecord.of(table, kafka_partitions)
        if fs.create_exclusive(_path(base_path), record.to_json()):
            return
    problems = record_problems(read_record(fs, base_path), table, base_path)
    if problems:
        raise ConfigError(problems[0][1], problems[0][0], problems=problems)


def partitions_changed(base_path: str, topic: str, recorded: int, current: int) -> ConfigError | None:
    """The refusal of a data topic whose partition count is not the one the upsert table at
    ``base_path`` recorded, naming ``kafka.topics``; None when the counts agree."""
    if recorded == current:
        return None
    return ConfigError(
        f"topic {topic!r} has {current} partitions, but the upsert table at {base_path} "
        f"recorded {recorded} ({layout.SINK_TABLE_FILE}): another count maps keys to other "
        f"partitions, so two writers would hold one key; read a topic with {recorded} "
        "partitions, or write this topic into a new table (another table.base_path)",
        "kafka.topics")


def keep_kafka_partitions(fs: FileSystem, base_path: str, topic: str, count: int) -> int:
    """An upsert table's recorded partition count of its data topic ``topic``, which has
    ``count`` now: recorded here when the record holds none yet (an atomic replace keeping the
    other fields), else compared; ConfigError naming ``kafka.topics`` when they differ. Call
    after ``HudiTable.initialize`` (the record exists and matches the config)."""
    path = _path(base_path)
    record = read_record(fs, base_path)
    if record is None or record.write_mode != "upsert":
        raise TableFormatError(f"{path}: no upsert table's record to keep a partition count in")
    if record.kafka_partitions is None:
        fs.write_atomic(path, replace(record, kafka_partitions=count).to_json())
        # Two coordinators starting at once while the count changes each write the count
        # they saw; the file keeps one. The other is refused here when it reads the file back
        # after the winner wrote, else on its next start (a window this narrow is not closed).
        record = read_record(fs, base_path) or record
    recorded = record.kafka_partitions if record.kafka_partitions is not None else count
    refused = partitions_changed(base_path, topic, recorded, count)
    if refused is not None:
        raise refused
    return recorded
