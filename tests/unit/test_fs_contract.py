"""The FileSystem contract, one set of cases run against both implementations: local files
(``LocalFileSystem``) and an S3 API server (``ObjectStoreFileSystem`` on moto)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from s3_server import MotoS3

from hudi_sink.shared.storage.fs import FileSystem, LocalFileSystem
from hudi_sink.shared.storage.object_store import ObjectStoreFileSystem


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[FileSystem, str]]:
    """(filesystem, root path) — a temp directory or a fresh bucket's prefix."""
    if request.param == "local":
        yield LocalFileSystem(), str(tmp_path / "table")
        return
    server: MotoS3 = request.getfixturevalue("moto_s3")
    bucket = server.new_bucket()
    root = f"s3://{bucket}/warehouse/orders"
    yield ObjectStoreFileSystem(root, server.storage_options()), root


def test_satisfies_the_protocol(store: tuple[FileSystem, str]) -> None:
    fs, _ = store
    assert isinstance(fs, FileSystem)


def test_write_atomic_read_and_replace(store: tuple[FileSystem, str]) -> None:
    fs, root = store
    path = f"{root}/.hoodie/hoodie.properties"
    fs.write_atomic(path, b"one")
    assert fs.read_bytes(path) == b"one"
    fs.write_atomic(path, b"two")
    assert fs.read_bytes(path) == b"two"


def test_read_missing_is_file_not_found(store: tuple[FileSystem, str]) -> None:
    fs, root = store
    with pytest.raises(FileNotFoundError):
        fs.read_bytes(f"{root}/nope.json")


def test_create_exclusive_is_the_fence(store: tuple[FileSystem, str]) -> None:
    fs, root = store
    path = f"{root}/.hoodie/.sink/log/000000000001.json"
    assert fs.create_exclusive(path, b"first")
    assert not fs.create_exclusive(path, b"second")
    assert fs.read_bytes(path) == b"first"


def test_exists_file_info_and_directories(store: tuple[FileSystem, str]) -> None:
    fs, root = store
    fs.makedirs(f"{root}/p1")
    fs.write_atomic(f"{root}/p1/a.parquet", b"12345")
    info = fs.file_info(f"{root}/p1/a.parquet")
    assert info is not None and info.size == 5 and not info.is_dir and info.name == "a.parquet"
    assert info.path == f"{root}/p1/a.parquet" and info.mtime > 0
    directory = fs.file_info(f"{root}/p1")
    assert directory is not None and directory.is_dir and directory.name == "p1"
    assert fs.exists(f"{root}/p1") and fs.exists(f"{root}/p1/a.parquet")
    assert not fs.exists(f"{root}/p2") and fs.file_info(f"{root}/p2") is None


def test_list_dir_children_sorted_with_directories(store: tuple[FileSystem, str]) -> None:
    fs, root = store
    for name in ("b.json", "a.json", "sub/x.json", "sub/deeper/y.json", "a%2Fb/z"):
        fs.write_atomic(f"{root}/{name}", b"x")
    listed = fs.list_dir(root)
    assert [(i.name, i.is_dir) for i in listed] == [
        ("a%2Fb", True), ("a.json", False), ("b.json", False), ("sub", True)]
    assert listed[1].path == f"{root}/a.json" and listed[1].size == 1
    assert fs.list_dir(f"{root}/missing") == []


def test_walk_files_recursive_files_only(store: tuple[FileSystem, str]) -> None:
    fs, root = store
    for name in ("p/a.parquet", "p/q/b.parquet", "c.json", "München/d.parquet"):
        fs.write_atomic(f"{root}/{name}", b"xy")
    walked = sorted(i.path for i in fs.walk_files(root))
    assert walked == sorted(f"{root}/{n}" for n in
                            ("p/a.parquet", "p/q/b.parquet", "c.json", "München/d.parquet"))
    assert {i.name for i in fs.walk_files(f"{root}/p")} == {"a.parquet", "b.parquet"}
    assert all(not i.is_dir and i.size == 2 for i in fs.walk_files(root))
    assert list(fs.walk_files(f"{root}/missing")) == []


def test_rename_moves_and_never_clobbers(store: tuple[FileSystem, str]) -> None:
    fs, root = store
    staged, final = f"{root}/.hoodie/.temp/1/p/f.parquet", f"{root}/p/f.parquet"
    fs.write_atomic(staged, b"data")
    fs.rename(staged, final)
    assert fs.read_bytes(final) == b"data" and not fs.exists(staged)
    with pytest.raises(FileNotFoundError):
        fs.rename(staged, final)
    fs.write_atomic(staged, b"other content")
    with pytest.raises(FileExistsError):
        fs.rename(staged, final)
    assert fs.read_bytes(final) == b"data"


def test_open_read_seeks_and_reads_in_parts(store: tuple[FileSystem, str]) -> None:
    fs, root = store
    data = bytes(range(256)) * 4096  # 1 MiB
    fs.write_atomic(f"{root}/p/f.parquet", data)
    with fs.open_read(f"{root}/p/f.parquet") as handle:
        assert handle.seekable() and handle.seek(-8, 2) == len(data) - 8
        assert handle.read(8) == data[-8:] and handle.read(8) == b""
        handle.seek(1000)
        assert handle.read(10) == data[1000:1010] and handle.tell() == 1010
        handle.seek(0)
        assert handle.read() == data
    with pytest.raises(FileNotFoundError):
        fs.open_read(f"{root}/p/missing.parquet")


def test_write_file_puts_a_local_file_in_place(store: tuple[FileSystem, str],
                                               tmp_path: Path) -> None:
    fs, root = store
    local = tmp_path / "scratch.parquet"
    local.write_bytes(b"z" * (9 * 1024 * 1024 + 7))  # over one part of a multipart upload
    fs.write_file(f"{root}/.hoodie/.temp/1/p/f.parquet", str(local))
    assert fs.read_bytes(f"{root}/.hoodie/.temp/1/p/f.parquet") == local.read_bytes()
    local.write_bytes(b"second")
    fs.write_file(f"{root}/.hoodie/.temp/1/p/f.parquet", str(local))  # replaces, like write_atomic
    assert fs.read_bytes(f"{root}/.hoodie/.temp/1/p/f.parquet") == b"second"
    assert [i.name for i in fs.list_dir(f"{root}/.hoodie/.temp/1/p")] == ["f.parquet"]


def test_delete_and_delete_tree(store: tuple[FileSystem, str]) -> None:
    fs, root = store
    fs.write_atomic(f"{root}/t/a", b"1")
    fs.write_atomic(f"{root}/t/u/b", b"2")
    fs.write_atomic(f"{root}/keep", b"3")
    assert fs.delete(f"{root}/t/a")
    assert not fs.delete(f"{root}/t/a")
    fs.delete_tree(f"{root}/t")
    fs.delete_tree(f"{root}/t")  # missing is fine
    assert not fs.exists(f"{root}/t") and fs.read_bytes(f"{root}/keep") == b"3"


def test_fsync_file_missing_raises_and_dirs_are_fine(store: tuple[FileSystem, str]) -> None:
    fs, root = store
    fs.write_atomic(f"{root}/d/f", b"1")
    fs.fsync_file(f"{root}/d/f")
    fs.fsync_dir(f"{root}/d")
    fs.fsync_dir(f"{root}/missing")
    with pytest.raises(FileNotFoundError):
        fs.fsync_file(f"{root}/d/missing")


def test_s3_create_whose_response_was_lost_is_still_a_win(moto_s3: MotoS3) -> None:
    """obstore retries a PUT whose response was lost; the retry reads 'already exists'
    although the first attempt created the object. The object holding our bytes is a win;
    different bytes (a rival's entry) are a lost race."""
    root = f"s3://{moto_s3.new_bucket()}/t"
    fs = ObjectStoreFileSystem(root, moto_s3.storage_options())
    path = f"{root}/.hoodie/.sink/log/000000000007.json"
    fs.write_atomic(path, b"ours")  # what the lost first attempt left behind
    assert fs.create_exclusive(path, b"ours")
    assert not fs.create_exclusive(path, b"theirs")
    assert fs.read_bytes(path) == b"ours"


def test_s3_failures_are_os_errors(moto_s3: MotoS3) -> None:
    """A store failure (here: the bucket does not exist) is an OSError like a disk error, so
    every caller's I/O handling applies — never mistaken for a bug in our code."""
    root = "s3://no-such-bucket-here/t"
    fs = ObjectStoreFileSystem(root, moto_s3.storage_options())
    with pytest.raises(OSError):
        fs.write_atomic(f"{root}/x.json", b"x")
    with pytest.raises(OSError):
        list(fs.walk_files(root))
