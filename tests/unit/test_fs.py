"""LocalFileSystem: atomic writes, exclusive create (fencing), no-clobber rename, listings."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.storage.fs import FileInfo, FileSystem, LocalFileSystem, filesystem_for


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_local_filesystem_satisfies_protocol() -> None:
    assert isinstance(LocalFileSystem(), FileSystem)


def test_write_atomic_creates_parents_and_replaces(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    target = tmp_path / "a" / "b" / "file.json"
    fs.write_atomic(str(target), b"one")
    assert target.read_bytes() == b"one"
    fs.write_atomic(str(target), b"two")
    assert fs.read_bytes(str(target)) == b"two"
    assert _leftovers(target.parent) == []


def test_write_atomic_empty_file(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    target = tmp_path / "empty"
    fs.write_atomic(str(target), b"")
    assert target.exists() and target.stat().st_size == 0


def test_create_exclusive_first_wins(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    target = tmp_path / "x" / "fence"
    assert fs.create_exclusive(str(target), b"first") is True
    assert fs.create_exclusive(str(target), b"second") is False
    assert target.read_bytes() == b"first"
    assert _leftovers(target.parent) == []


def test_create_exclusive_race_has_exactly_one_winner(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    target = str(tmp_path / "race")
    results: list[tuple[int, bool]] = []
    barrier = threading.Barrier(8)

    def contend(index: int) -> None:
        barrier.wait()
        results.append((index, fs.create_exclusive(target, f"writer-{index}".encode() * 1000)))

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [index for index, won in results if won]
    assert len(winners) == 1
    assert Path(target).read_bytes() == f"writer-{winners[0]}".encode() * 1000
    assert _leftovers(tmp_path) == []


def test_rename_moves_and_creates_parents(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    src = tmp_path / "src.bin"
    src.write_bytes(b"data")
    dst = tmp_path / "deep" / "er" / "dst.bin"
    fs.rename(str(src), str(dst))
    assert not src.exists()
    assert dst.read_bytes() == b"data"


def test_rename_never_clobbers_a_different_file(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(b"new")
    dst.write_bytes(b"old")
    with pytest.raises(FileExistsError):
        fs.rename(str(src), str(dst))
    assert src.read_bytes() == b"new"
    assert dst.read_bytes() == b"old"


def test_rename_is_idempotent_after_crash_between_link_and_unlink(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(b"payload")
    os.link(src, dst)  # what a crash right after the link step leaves behind
    fs.rename(str(src), str(dst))
    assert not src.exists()
    assert dst.read_bytes() == b"payload"


def test_rename_missing_source_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        LocalFileSystem().rename(str(tmp_path / "nope"), str(tmp_path / "dst"))


def test_delete_and_delete_tree(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    file = tmp_path / "f"
    file.write_bytes(b"x")
    assert fs.delete(str(file)) is True
    assert fs.delete(str(file)) is False
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "c").write_bytes(b"c")
    fs.delete_tree(str(tree))
    assert not tree.exists()
    fs.delete_tree(str(tree))  # missing is fine
    single = tmp_path / "single"
    single.write_bytes(b"s")
    fs.delete_tree(str(single))
    assert not single.exists()


def test_exists_and_file_info(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    file = tmp_path / "f.txt"
    assert not fs.exists(str(file))
    assert fs.file_info(str(file)) is None
    file.write_bytes(b"12345")
    info = fs.file_info(str(file))
    assert info is not None
    assert (info.name, info.size, info.is_dir) == ("f.txt", 5, False)
    assert info.mtime > 0
    assert fs.exists(str(tmp_path))


def test_list_dir(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    assert fs.list_dir(str(tmp_path / "missing")) == []
    (tmp_path / "b.txt").write_bytes(b"bb")
    (tmp_path / "a.txt").write_bytes(b"a")
    (tmp_path / "sub").mkdir()
    listing = fs.list_dir(str(tmp_path))
    assert [i.name for i in listing] == ["a.txt", "b.txt", "sub"]
    assert [i.is_dir for i in listing] == [False, False, True]
    assert listing[1].size == 2
    assert listing[0].path == os.path.join(str(tmp_path), "a.txt")
    assert isinstance(listing[0], FileInfo)


def test_walk_files_recursive_files_only(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    (tmp_path / "x" / "y").mkdir(parents=True)
    (tmp_path / "top").write_bytes(b"1")
    (tmp_path / "x" / "mid").write_bytes(b"22")
    (tmp_path / "x" / "y" / "deep").write_bytes(b"333")
    (tmp_path / "empty").mkdir()
    found = {os.path.relpath(i.path, tmp_path): i.size for i in fs.walk_files(str(tmp_path))}
    assert found == {"top": 1, os.path.join("x", "mid"): 2, os.path.join("x", "y", "deep"): 3}
    assert list(fs.walk_files(str(tmp_path / "missing"))) == []


def test_makedirs_idempotent(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    fs.makedirs(str(tmp_path / "a" / "b"))
    fs.makedirs(str(tmp_path / "a" / "b"))
    assert (tmp_path / "a" / "b").is_dir()


def test_file_uri_is_taken_literally(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    uri = f"file://{tmp_path}/part%2Fvalue/f"
    fs.write_atomic(uri, b"v")
    # %2F is not decoded into a separator: the directory name keeps it verbatim.
    assert (tmp_path / "part%2Fvalue" / "f").read_bytes() == b"v"
    assert fs.read_bytes(uri) == b"v"
    assert [i.name for i in fs.list_dir(f"file://{tmp_path}")] == ["part%2Fvalue"]


def test_filesystem_for() -> None:
    assert isinstance(filesystem_for("/tmp/table"), LocalFileSystem)
    assert isinstance(filesystem_for("relative/table"), LocalFileSystem)
    assert isinstance(filesystem_for("file:///tmp/table"), LocalFileSystem)
    for bad in ("s3://bucket/table", "gs://b/t", "", "file://host/t"):
        with pytest.raises(ConfigError) as info:
            filesystem_for(bad)
        assert info.value.key == "table.base_path"


# --- durability --------------------------------------------------------------------------------


@pytest.fixture
def syscalls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """fsync/link/replace calls in order, each with the path it acted on (Linux /proc)."""
    calls: list[tuple[str, str]] = []
    real_fsync, real_link, real_replace = os.fsync, os.link, os.replace

    def fsync(fd: int) -> None:
        calls.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def link(src: str, dst: str, **kwargs: bool) -> None:
        calls.append(("link", str(dst)))
        real_link(src, dst, **kwargs)

    def replace(src: str, dst: str) -> None:
        calls.append(("replace", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "replace", replace)
    return calls


def _synced_temp(calls: list[tuple[str, str]], target: Path) -> int:
    """Index of the fsync of ``target``'s temp file (``.<name>.<random>.tmp`` beside it)."""
    return next(i for i, (op, path) in enumerate(calls) if op == "fsync"
                and os.path.basename(path).startswith(f".{target.name}.") and path.endswith(".tmp"))


def test_create_exclusive_syncs_content_before_the_link_and_the_directory_after(
        tmp_path: Path, syscalls: list[tuple[str, str]]) -> None:
    target = tmp_path / "fence"
    assert LocalFileSystem().create_exclusive(str(target), b"x")
    link = syscalls.index(("link", str(target)))
    assert _synced_temp(syscalls, target) < link < syscalls.index(("fsync", str(tmp_path)))


def test_write_atomic_syncs_content_before_the_replace_and_the_directory_after(
        tmp_path: Path, syscalls: list[tuple[str, str]]) -> None:
    target = tmp_path / "20250101000000001.inflight"
    LocalFileSystem().write_atomic(str(target), b"{}")
    replace = syscalls.index(("replace", str(target)))
    assert _synced_temp(syscalls, target) < replace < syscalls.index(("fsync", str(tmp_path)))


def test_directories_created_for_a_durable_write_are_synced_into_their_parents(
        tmp_path: Path, syscalls: list[tuple[str, str]]) -> None:
    target = tmp_path / "a" / "b" / "entry.json"
    assert LocalFileSystem().create_exclusive(str(target), b"x")
    link = syscalls.index(("link", str(target)))
    assert syscalls.index(("fsync", str(tmp_path))) < link  # holds the new "a"
    assert syscalls.index(("fsync", str(tmp_path / "a"))) < link  # holds the new "b"
    syscalls.clear()
    assert LocalFileSystem().create_exclusive(str(target.with_name("second.json")), b"y")
    assert ("fsync", str(tmp_path)) not in syscalls  # existing parents cost nothing


def test_fsync_file_and_dir(tmp_path: Path, syscalls: list[tuple[str, str]]) -> None:
    fs = LocalFileSystem()
    file = tmp_path / "part.parquet"
    file.write_bytes(b"written by Spark, never synced")
    fs.fsync_file(str(file))
    fs.fsync_dir(str(tmp_path))
    fs.fsync_dir(str(tmp_path / "missing"))  # nothing to persist
    assert syscalls == [("fsync", str(file)), ("fsync", str(tmp_path))]
    with pytest.raises(FileNotFoundError):
        fs.fsync_file(str(tmp_path / "missing.parquet"))


def test_an_io_error_while_syncing_is_raised_and_unsupported_sync_is_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fs = LocalFileSystem()
    file = tmp_path / "f"
    file.write_bytes(b"x")
    failure = [errno.EIO]

    def fsync(fd: int) -> None:
        raise OSError(failure[0], os.strerror(failure[0]))

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="Input/output error"):
        fs.fsync_file(str(file))
    with pytest.raises(OSError, match="Input/output error"):
        fs.fsync_dir(str(tmp_path))
    failure[0] = errno.EINVAL  # a file system that cannot sync this kind of file
    fs.fsync_file(str(file))
    fs.fsync_dir(str(tmp_path))


def test_list_dir_skips_an_entry_deleted_while_listing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file deleted between readdir and stat must not make the whole directory look empty
    (an empty timeline or checkpoint listing would be read as "nothing committed")."""
    for name in ("a", "b", "c"):
        (tmp_path / name).write_bytes(b"x")
    real_scandir = os.scandir

    class Vanished:
        def __init__(self, entry: os.DirEntry[str]) -> None:
            self.name = entry.name

        def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
            raise FileNotFoundError(errno.ENOENT, "deleted meanwhile", self.name)

    class Listing:
        def __init__(self, path: str) -> None:
            self._inner = real_scandir(path)

        def __enter__(self) -> list[object]:
            entries = list(self._inner)
            return [Vanished(e) if e.name == "b" else e for e in entries]

        def __exit__(self, *exc: object) -> None:
            self._inner.close()

    monkeypatch.setattr(os, "scandir", Listing)
    assert [i.name for i in LocalFileSystem().list_dir(str(tmp_path))] == ["a", "c"]
