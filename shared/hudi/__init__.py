"""Writing Apache Hudi Copy-on-Write tables (v6) from Python: naming, offsets, timeline."""

from shared.hudi.layout import Instant, InstantState
from shared.hudi.naming import (
    HIVE_DEFAULT_PARTITION,
    BaseFileName,
    base_file_name,
    encode_partition_value,
    ensure_inside,
    is_instant_time,
    new_file_id,
    next_instant_time,
    parse_base_file_name,
    parse_instant_time,
    partition_path,
    write_token,
)
from shared.hudi.offsets import (
    KAFKA_COMMIT_OFFSETS_KEY,
    Offsets,
    format_offsets,
    parse_offsets,
)
from shared.hudi.table import HudiTable
from shared.hudi.write_stats import WriteStat, build_commit_metadata

__all__ = [
    "HIVE_DEFAULT_PARTITION",
    "BaseFileName",
    "base_file_name",
    "encode_partition_value",
    "ensure_inside",
    "new_file_id",
    "is_instant_time",
    "next_instant_time",
    "parse_base_file_name",
    "parse_instant_time",
    "partition_path",
    "write_token",
    "KAFKA_COMMIT_OFFSETS_KEY",
    "Offsets",
    "format_offsets",
    "parse_offsets",
    "HudiTable",
    "Instant",
    "InstantState",
    "WriteStat",
    "build_commit_metadata",
]
