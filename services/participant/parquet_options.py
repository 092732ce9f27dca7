"""How the Spark writer asks for Parquet files that every reader reads right and that cost
little to write: the legacy format where Hudi's Java reader needs it, dictionaries only where
they pay."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["LEGACY_FORMAT", "mostly_distinct_columns", "wants_legacy_format"]

LEGACY_FORMAT = "spark.sql.parquet.writeLegacyFormat"
"""Set per write, as a write option: Spark applies a ``spark.sql.*`` write option to that
write's SQL conf only (checked with pyspark 4.3: the file changes, the session's conf stays
false), so concurrent flushes of other tables keep the standard layout."""


def wants_legacy_format(schema: pa.Schema) -> bool:
    """Whether to write with Spark's legacy Parquet format: a DECIMAL of precision <= 18 at
    any depth and no ARRAY at any depth.

    Spark writes such decimals as Parquet INT32/INT64 by default, which Apache Hudi's Avro
    Parquet reader (Hudi's Java client and its Avro-based table services) refuses ("old schema
    type is: int"); the legacy format writes them as FIXED_LEN_BYTE_ARRAY, as Hudi's own Spark
    writer does for that reason. But the legacy format also writes lists as ``bag``/``array``
    groups, and Hudi 1.0.2's Avro reader reads those as null without a word (maps and structs
    read right): a loud refusal is better than silently lost values, so a schema with an ARRAY
    keeps the standard format (Spark-based readers and hudi-rs read both).
    tests/integration/test_spark_decimals.py pins all three cases."""
    def has(kind: pa.DataType, wanted: str) -> bool:
        if wanted == "decimal" and pa.types.is_decimal(kind):
            return bool(kind.precision <= 18)
        if wanted == "list" and (pa.types.is_list(kind) or pa.types.is_large_list(kind)
                                 or pa.types.is_fixed_size_list(kind)):
            return True
        return any(has(kind.field(i).type, wanted) for i in range(kind.num_fields))

    return (any(has(f.type, "decimal") for f in schema)
            and not any(has(f.type, "list") for f in schema))


DICTIONARY_SAMPLE_ROWS = 1000


def mostly_distinct_columns(table: pa.Table, *, skip: str) -> list[str]:
    """Top-level primitive columns whose first rows are mostly distinct values (record keys,
    sequence numbers, free text, measurements): Parquet's dictionary encoding cannot pay for
    them, and parquet-mr would only learn that after hashing a dictionary page's worth of
    values per file. Measured on 1 KB records: dictionary attempts on such columns cost about
    40 % of the flush's CPU. Low-cardinality columns (partition values, meta columns that
    repeat per file) keep their dictionaries. Decided per flush from a small sample, so it
    follows the data without a setting. ``skip``: the job's own file-index column."""
    import pyarrow.compute as pc

    sample = table.slice(0, DICTIONARY_SAMPLE_ROWS)
    if sample.num_rows < 2:
        return []
    chosen = []
    for name, column in zip(sample.column_names, sample.columns, strict=True):
        kind = column.type
        if name == skip or pa.types.is_nested(kind) or pa.types.is_boolean(kind):
            continue
        if pc.count_distinct(column).as_py() * 2 > sample.num_rows:
            chosen.append(name)
    return chosen
