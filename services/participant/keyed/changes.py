"""One Kafka record → one change of its key (upsert mode), or the reason it is a bad record.

The value decoder (``services.participant.decoder``) still turns a row dict into a table row;
this layer says which row dict a record carries and what it means (``keyed.envelope``:
Debezium envelopes, tombstones, soft deletes) and checks that the record's key belongs in the
partition it was read from (``keyed.partitioners``: a key must live in one partition, or two
participants would write it into two file groups).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from hudi_sink.services.participant.decoded import Deferred, Rejected, Row, Skipped
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.keyed.envelope import (
    TOMBSTONE,
    KeyDelete,
    KeyedSpec,
    RowChange,
    message_key_delete,
    read_change,
)
from hudi_sink.services.participant.keyed.fold import Change
from hudi_sink.services.participant.keyed.partitioners import partition_mismatch
from hudi_sink.shared.hudi.record_key import key_text

__all__ = ["KeyedDecoder", "KeyedResult", "KeyParser"]

KeyedResult = Change | Rejected | Deferred
KeyParser = Callable[[bytes], "dict[str, Any] | Rejected | Deferred | None"]
"""A message key's decoder (the Avro value reader's ``parse``)."""
"""A change of a key, a bad record, or a record to retry later (a registry out of reach)."""


class KeyedDecoder:
    """Per partition (the message key of the record being decoded is state here: intake
    decodes one record at a time, on the event loop)."""

    def __init__(self, spec: KeyedSpec, *, partitioner: str, precombine_field: str | None,
                 partitions_of_topic: Callable[[], int | None],
                 key_parser: KeyParser | None = None) -> None:
        self._spec = spec
        self._key_parser = key_parser
        """Avro message keys (``upsert.kafka_key_format: avro``): decoded to their struct and
        read as a JSON key (``spec`` then says ``json``)."""
        self._partitioner = partitioner
        self._precombine = precombine_field
        self._partitions_of_topic = partitions_of_topic
        self._message_key: bytes | None = None

    def unwrap(self, value: dict[str, Any]) -> dict[str, Any] | KeyDelete | Rejected:
        """The decoder's hook: the row dict a parsed value carries (a soft delete is told
        apart after conversion, :meth:`change`), or what the value means instead."""
        meaning = read_change(value, self._message_key, self._spec)
        return meaning.row if isinstance(meaning, RowChange) else meaning

    def change(self, decoder: RecordDecoder, value: bytes | None,
               message_key: bytes | None, partition: int, offset: int) -> KeyedResult:
        """Decode one record (``decoder`` is the partition's value decoder, built with
        :meth:`unwrap`) into a change of its key."""
        partitions = self._partitions_of_topic()
        if partitions is not None:
            mismatch = partition_mismatch(self._partitioner, message_key, partition, partitions)
            if mismatch is not None:
                return mismatch
        if self._key_parser is not None and message_key is not None:
            decoded = self._key_parser(message_key)
            if isinstance(decoded, Deferred):
                return decoded
            if isinstance(decoded, dict):
                message_key = orjson.dumps(decoded, default=str)
        self._message_key = message_key
        try:
            result = decoder.decode(value)
        finally:
            self._message_key = None
        if isinstance(result, Row):
            values = result.values
            ordering = values.get(self._precombine) if self._precombine else None
            field = self._spec.delete_field
            deleted = field is not None and key_text(values.get(field)) == self._spec.delete_marker
            return Change(result.record_key, offset, result, ordering, result.partition_value,
                          deleted)
        if isinstance(result, Skipped):  # a null value, or a Connect envelope's null payload
            result = message_key_delete(message_key, self._spec, TOMBSTONE,
                                        "a tombstone (null value)")
        if isinstance(result, KeyDelete):
            key = result.record_key
            if result.values is not None:  # spelt from converted values, as a row's key is
                spelt = decoder.record_key_of(result.values)
                if isinstance(spelt, Rejected):
                    return spelt
                key = spelt
            return Change(key, offset, None, None, None, True)
        if isinstance(result, (Rejected, Deferred)):
            return result
        raise TypeError(f"unexpected decoder outcome {type(result).__name__}")
