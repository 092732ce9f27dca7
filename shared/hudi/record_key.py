"""``_hoodie_record_key``: which fields make a table's record key, and the key's text.

``table.record_key_field`` names one field (``id``) or several, comma-separated (``a,b``), as
Hudi's ``hoodie.table.recordkey.fields`` holds them. The key's text follows Hudi's key
generators (``KeyGenerator.constructRecordKey``, ``KeyGenUtils.getRecordKey``), so a Java Hudi
writer and the sink spell a row's key alike and an upsert finds the row a former write stored:

- one field (``SimpleKeyGenerator``): the value's text; a null or empty value is no key;
- several fields (``ComplexKeyGenerator``, and ``NonpartitionedKeyGenerator`` given several):
  ``a:1,b:2`` in the configured order, a null value written ``__null__`` and an empty string
  ``__empty__``; a key whose values are all null or empty is no key (Hudi throws
  ``HoodieKeyException``; the sink dead-letters the record as ``MissingRecordKey``).

A value's text is Java's ``toString`` where it matters for key columns: strings as they are,
integers in decimal, booleans ``true``/``false`` (Python would say ``True``). Floats keep
Python's spelling, which differs from Java's for exponents: a float is a poor key.

Every path that spells a key (the decoder, a tombstone's Kafka key, a Debezium ``before``)
goes through this module, or an update would not find the row it replaces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

__all__ = ["NULL_PLACEHOLDER", "EMPTY_PLACEHOLDER", "split_key_fields", "key_text",
           "record_key_string"]

NULL_PLACEHOLDER: Final = "__null__"
"""A null value in a composite key (Hudi's ``NULL_RECORDKEY_PLACEHOLDER``)."""
EMPTY_PLACEHOLDER: Final = "__empty__"
"""An empty string in a composite key (Hudi's ``EMPTY_RECORDKEY_PLACEHOLDER``)."""


def split_key_fields(text: str) -> tuple[str, ...]:
    """``"a, b"`` → ``("a", "b")``: whitespace around names ignored. ValueError for an empty
    name (``a,,b``, a trailing comma, nothing at all) or a name given twice: a typo must not
    quietly make another key than the one meant."""
    fields = tuple(name.strip() for name in text.split(","))
    if any(not name for name in fields):
        raise ValueError("an empty field name (expected one field, or several separated by "
                         "commas: a,b)")
    doubled = sorted({name for name in fields if fields.count(name) > 1})
    if doubled:
        raise ValueError(f"names {', '.join(doubled)} more than once")
    return fields


def key_text(value: object) -> str | None:
    """One key value's text as Hudi's key generators write it; None for null."""
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def record_key_string(values: Mapping[str, object], fields: Sequence[str]) -> str | None:
    """The record key of ``values`` for the key ``fields``; None when it has none (its one
    field null, absent or empty; every one of several fields so). An absent field counts as
    null, as an Avro record's missing field does for Hudi."""
    if not fields:
        raise ValueError("a record key needs at least one field")
    if len(fields) == 1:
        return key_text(values.get(fields[0])) or None
    parts = []
    keyed = False
    for name in fields:
        text = key_text(values.get(name))
        if text is None:
            text = NULL_PLACEHOLDER
        elif not text:  # the value, not its text, decides: a string "__null__" is a value
            text = EMPTY_PLACEHOLDER
        else:
            keyed = True
        parts.append(f"{name}:{text}")
    return ",".join(parts) if keyed else None
