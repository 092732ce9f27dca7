"""How planned files are dealt into the tasks of a job that carries old rows: every file in
exactly one bucket, buckets about equally heavy, never more buckets than files or asked. And
the empty slices of groups whose every row is gone, written side by side: each a Parquet file
of the table's schema without the job's file index, and a failed one fails the write."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_sink.services.participant.carried_rows import deal_buckets, write_empty_slices
from hudi_sink.shared.storage.fs import LocalFileSystem


def test_each_file_goes_to_exactly_one_bucket_and_the_loads_even_out() -> None:
    weights = {i: 10_000 for i in range(100)} | {100: 600, 101: 25_000}
    dealt = deal_buckets(weights, 4)
    assert len(dealt) == 4
    assert sorted(i for bucket in dealt for i in bucket) == sorted(weights)
    loads = [sum(weights[i] for i in bucket) for bucket in dealt]
    assert max(loads) - min(loads) <= 10_000


def test_never_more_buckets_than_files_and_at_least_one() -> None:
    assert deal_buckets({7: 5, 3: 1}, 8) == [[7], [3]]
    assert deal_buckets({7: 5}, 0) == [[7]]
    assert deal_buckets({}, 4) == []


def test_one_heavy_file_keeps_a_bucket_to_itself() -> None:
    dealt = deal_buckets({0: 1_000_000, 1: 10, 2: 10, 3: 10}, 2)
    assert [0] in dealt
    assert sorted(next(b for b in dealt if 0 not in b)) == [1, 2, 3]


def test_the_slice_lookup_is_sql_only_for_plain_names() -> None:
    from hudi_sink.services.participant.carried_rows import _by_source, _quoted

    assert _quoted("a`b.c") == "`a``b.c`"
    assert _by_source({"g1_1-0-1_2026.parquet": 3, "g2.parquet": 4}) == (
        "map('g1_1-0-1_2026.parquet', 3, 'g2.parquet', 4)[`__hs_source`]")
    assert _by_source({"g1.parquet": "n1_2-0-1_2026.parquet"}) == (
        "map('g1.parquet', 'n1_2-0-1_2026.parquet')[`__hs_source`]")
    # Names SQL would have to escape (their reading depends on the session's parser).
    assert _by_source({"it's.parquet": 3}) is None
    assert _by_source({"g1.parquet": "a\\b.parquet"}) is None


def test_empty_slices_are_written_side_by_side_each_with_the_schema_and_no_row(
        tmp_path: Path) -> None:
    schema = pa.schema([("_hoodie_file_name", pa.string()), ("amount", pa.float64()),
                        ("__hs_part", pa.int32())])
    paths = [str(tmp_path / f"p{n % 3}" / f"f{n}.parquet") for n in range(20)]
    size = write_empty_slices(LocalFileSystem(), paths, schema, "__hs_part")
    for path in paths:
        footer = pq.ParquetFile(path)
        assert footer.metadata.num_rows == 0 and Path(path).stat().st_size == size
        assert footer.schema_arrow.names == ["_hoodie_file_name", "amount"]  # no file index
    assert write_empty_slices(LocalFileSystem(), [], schema, "__hs_part") == size  # none: fine


def test_a_failed_empty_slice_fails_the_write(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file where a directory must go")
    schema = pa.schema([("amount", pa.float64())])
    with pytest.raises(OSError):
        write_empty_slices(LocalFileSystem(), [str(tmp_path / "ok.parquet"),
                                               str(tmp_path / "taken" / "f.parquet")],
                           schema, "__hs_part")
