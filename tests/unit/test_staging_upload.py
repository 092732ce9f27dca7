"""Uploading flushed files into an object-store table's staging: parallel, retried, checked by
size, multipart (bounded memory) for large files; which writer a participant gets."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import obstore
import pytest
from s3_server import MotoS3
from tenacity import wait_none

from hudi_sink.services.participant import staging_upload
from hudi_sink.services.participant.spark_writer import SparkWriter
from hudi_sink.services.participant.staging_upload import UploadingSparkWriter, upload_files, writer_for
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.storage import object_store
from hudi_sink.shared.storage.fs import LocalFileSystem
from hudi_sink.shared.storage.object_store import ObjectStoreFileSystem


@pytest.fixture
def store(moto_s3: MotoS3, s3_bucket: str) -> ObjectStoreFileSystem:
    return ObjectStoreFileSystem(f"s3://{s3_bucket}/t", moto_s3.storage_options())


def test_files_small_and_multipart_arrive_whole(tmp_path: Path, store: ObjectStoreFileSystem,
                                                moto_s3: MotoS3) -> None:
    small, large = tmp_path / "small.parquet", tmp_path / "large.parquet"
    small.write_bytes(b"PAR1" * 10)
    large.write_bytes(os.urandom(object_store.PART_BYTES * 2 + 12345))  # three parts
    root = f"s3://{store.location.bucket}/t/.hoodie/.temp/20260101000000000"
    upload_files(store, [(str(small), f"{root}/p/a.parquet"), (str(large), f"{root}/b.parquet")])
    assert store.read_bytes(f"{root}/p/a.parquet") == small.read_bytes()
    assert store.read_bytes(f"{root}/b.parquet") == large.read_bytes()
    assert sorted(moto_s3.keys(store.location.bucket)) == [
        "t/.hoodie/.temp/20260101000000000/b.parquet", "t/.hoodie/.temp/20260101000000000/p/a.parquet"]


def test_a_failing_upload_is_retried(tmp_path: Path, store: ObjectStoreFileSystem,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    local = tmp_path / "f.parquet"
    local.write_bytes(b"data")
    calls: list[str] = []
    real_put = obstore.put

    def flaky_put(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[1])
        if len(calls) < 3:
            raise OSError("connection reset")
        return real_put(*args, **kwargs)

    monkeypatch.setattr(object_store.obstore, "put", flaky_put)
    monkeypatch.setattr(staging_upload._upload_one.retry, "wait", wait_none())  # type: ignore[attr-defined]
    target = f"s3://{store.location.bucket}/t/x.parquet"
    upload_files(store, [(str(local), target)])
    assert len(calls) == 3 and store.read_bytes(target) == b"data"


def test_a_failure_for_good_is_raised(tmp_path: Path, store: ObjectStoreFileSystem,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    local = tmp_path / "f.parquet"
    local.write_bytes(b"data")
    monkeypatch.setattr(object_store.obstore, "put", lambda *a, **k: (_ for _ in ()).throw(
        OSError("store down")))
    monkeypatch.setattr(staging_upload._upload_one.retry, "wait", wait_none())  # type: ignore[attr-defined]
    with pytest.raises(OSError, match="store down"):
        upload_files(store, [(str(local), f"s3://{store.location.bucket}/t/x.parquet")])
    with pytest.raises(FileNotFoundError):  # a missing local file is not retried
        upload_files(store, [(str(tmp_path / "gone"), f"s3://{store.location.bucket}/t/y")])


def test_writer_for_picks_the_uploading_writer_for_a_local_spark_only(
        store: ObjectStoreFileSystem) -> None:
    config = SinkConfig()
    assert isinstance(writer_for(config, store), UploadingSparkWriter)
    assert type(writer_for(config, LocalFileSystem())) is SparkWriter
    connect = config.model_copy(update={"spark": config.spark.model_copy(
        update={"master": "sc://spark:15002"})})
    assert type(writer_for(connect, store)) is SparkWriter  # the Connect server writes itself
