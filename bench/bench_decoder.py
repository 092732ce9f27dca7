"""Micro-benchmark of RecordDecoder on typical order records.

Run from the repository root: ``.venv/bin/python bench/bench_decoder.py [count]``.
Prints decode records/s and, separately, rows_to_arrow rows/s for the decoded rows.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import orjson

# Allow running as a plain script from anywhere: the project root holds the packages.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hudi_sink.services.participant.decoder import RecordDecoder, Row, rows_to_arrow  # noqa: E402
from hudi_sink.shared.config.settings import TableConfig  # noqa: E402
from hudi_sink.shared.schema.table_schema import TableSchema  # noqa: E402

DDL = "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE, qty BIGINT, ok BOOLEAN, payload STRING"


def typical_records(count: int) -> list[bytes]:
    """Order-like JSON values, ~200 bytes, half ISO timestamps and half epoch millis."""
    countries = ["DE", "FR", "US", "JP", "BR"]
    records = []
    for i in range(count):
        ts: object = (
            f"2024-03-{1 + i % 28:02d}T12:{i % 60:02d}:{(i * 7) % 60:02d}.{i % 1000:03d}Z"
            if i % 2
            else 1_709_296_200_000 + i
        )
        records.append(
            orjson.dumps(
                {
                    "id": f"order-{i:08d}",
                    "ts": ts,
                    "country": countries[i % 5],
                    "amount": round(i * 0.37, 2),
                    "qty": i % 17,
                    "ok": i % 3 != 0,
                    "payload": f"note {i} lorem ipsum dolor sit amet",
                }
            )
        )
    return records


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    schema = TableSchema.from_config(
        TableConfig(schema=DDL, record_key_field="id", partition_field="country")
    )
    decoder = RecordDecoder(schema, 10 * 1024 * 1024)
    values = typical_records(count)
    for value in values[:1000]:  # warm-up
        decoder.decode(value)

    # Best of 3 by CPU time of this process (time.process_time): on a shared machine the
    # wall clock also counts other processes' turns; the wall time is printed alongside.
    best_cpu = best_wall = float("inf")
    rows: list[Row] = []
    for _ in range(3):
        cpu, wall = time.process_time(), time.perf_counter()
        decoded = [decoder.decode(value) for value in values]
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
        rows = [r for r in decoded if isinstance(r, Row)]
    assert len(rows) == count, "every typical record must decode"
    print(  # noqa: T201
        f"decode: {count} records, {count / best_cpu:,.0f} records/s per CPU-second "
        f"({count / best_wall:,.0f}/s wall; avg {sum(map(len, values)) / count:.0f} "
        "bytes/record; best of 3)"
    )

    best_cpu = best_wall = float("inf")
    for _ in range(3):
        cpu, wall = time.process_time(), time.perf_counter()
        table = rows_to_arrow(rows, schema)
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
    assert table.num_rows == count
    print(  # noqa: T201
        f"rows_to_arrow: {count} rows, {count / best_cpu:,.0f} rows/s per CPU-second "
        f"({count / best_wall:,.0f}/s wall; best of 3)"
    )


if __name__ == "__main__":
    main()
