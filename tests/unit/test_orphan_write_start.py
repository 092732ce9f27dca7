"""The orphan age floor where a file's mtime is when its write *started*: S3 stamps a
multipart upload's object with the time the upload began, so a large file uploaded slowly is
"old" the moment it lands. The reconcile scan then counts a file's age from the later of its
mtime and the scan that first listed it; local files keep aging by mtime alone."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

from s3_server import MotoS3
from table_files import FS, abort, complete, write_file

from hudi_sink.services.deleter.context import DeleterContext, Tally
from hudi_sink.services.deleter.reconcile import Reconciler
from hudi_sink.services.deleter.table_state import TableStateCache, load_snapshot, scan_orphans
from hudi_sink.shared.config.settings import DeletionConfig
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.storage.fs import FileInfo, LocalFileSystem
from hudi_sink.shared.storage.object_store import ObjectStoreFileSystem

C1, R = "20250101000000001", "20250101000000003"
HOUR = 3600.0


class StartStampedFileSystem(LocalFileSystem):
    """Real files whose listing says what S3's does: the mtime is the write's start."""

    def walk_files(self, path: str) -> Iterator[FileInfo]:
        for info in super().walk_files(path):
            yield dataclasses.replace(info, mtime_is_write_start=True)


def _table(base: Path) -> tuple[str, str]:
    """A completed commit and a rolled-back instant; returns (orphan, young orphan): files of
    the rolled-back instant that no commit lists, the first last modified two hours ago."""
    table = HudiTable(FS, str(base))
    complete(table, C1, "aaaa-1", age_s=2 * HOUR)
    table.start_instant(R)
    abort(table, R)
    old = write_file(base / f"de/bbbb-1_0-0-1_{R}.parquet", age_s=2 * HOUR)
    young = write_file(base / f"de/cccc-1_0-0-1_{R}.parquet")
    return old, young


def test_a_file_stamped_at_its_upload_start_ages_from_its_first_sighting(tmp_path: Path) -> None:
    """An upload that began two hours ago and just landed is not an orphan for another hour."""
    orphan, young = _table(tmp_path / "t")
    fs = StartStampedFileSystem()
    snapshot = load_snapshot(fs, str(tmp_path / "t"))
    sightings: dict[str, float] = {}
    now = time.time()

    assert scan_orphans(fs, snapshot, now=now, min_age_s=HOUR, first_seen=sightings) == []
    assert sightings[orphan] == now
    assert scan_orphans(fs, snapshot, now=now + HOUR - 1, min_age_s=HOUR,
                        first_seen=sightings) == []
    found = scan_orphans(fs, snapshot, now=now + HOUR, min_age_s=HOUR, first_seen=sightings)
    assert sorted(o.path for o in found) == sorted([orphan, young])
    assert sightings[orphan] == now  # a sighting keeps its first time

    Path(orphan).unlink()
    scan_orphans(fs, snapshot, now=now + 2 * HOUR, min_age_s=HOUR, first_seen=sightings)
    assert orphan not in sightings  # only files listed by the latest scan are remembered
    assert scan_orphans(fs, snapshot, now=now + 9 * HOUR, min_age_s=HOUR) == []  # no memory


async def test_the_reconcile_remembers_sightings_between_its_scans(tmp_path: Path) -> None:
    orphan, young = _table(tmp_path / "t")
    fs = StartStampedFileSystem()
    clock = [time.time()]
    metrics = Metrics("deleter")
    context = DeleterContext(fs=fs, table_path=str(tmp_path / "t"), cache=TableStateCache(fs, 600),
                             clock=lambda: clock[0], metrics=metrics, tally=Tally(metrics))
    reconciler = Reconciler(DeletionConfig(orphan_min_age_s=HOUR), context)
    assert (await reconciler.reconcile(None, dry_run=True)).orphans == []
    clock[0] += HOUR
    report = await reconciler.reconcile(None, dry_run=True)
    assert sorted(o.path for o in report.orphans) == sorted([orphan, young])


def test_local_files_age_by_mtime_alone(tmp_path: Path) -> None:
    orphan, _ = _table(tmp_path / "t")
    snapshot = load_snapshot(FS, str(tmp_path / "t"))
    sightings: dict[str, float] = {}
    found = scan_orphans(FS, snapshot, now=time.time(), min_age_s=HOUR, first_seen=sightings)
    assert [o.path for o in found] == [orphan] and sightings == {}


def test_object_store_listings_say_the_mtime_is_a_write_start(
        moto_s3: MotoS3, s3_bucket: str, tmp_path: Path) -> None:
    base = f"s3://{s3_bucket}/t"
    s3 = ObjectStoreFileSystem(base, moto_s3.storage_options())
    s3.write_atomic(f"{base}/de/a.parquet", b"1")
    listed = [*s3.list_dir(f"{base}/de"), *s3.walk_files(base), s3.file_info(f"{base}/de/a.parquet")]
    assert all(i is not None and i.mtime_is_write_start for i in listed)
    assert not [i for i in s3.list_dir(base) if i.mtime_is_write_start]  # "directories": no mtime
    local = write_file(tmp_path / "a.parquet")
    info = FS.file_info(local)
    assert info is not None and not info.mtime_is_write_start
