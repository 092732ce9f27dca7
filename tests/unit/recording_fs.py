"""A real LocalFileSystem that records what it is asked to do, for order-of-operations tests.

Only pure order checks use it (which sync happens before which create); every byte still goes
to real files. ``hook`` runs before an operation, so a test can interleave another actor at an
exact point (e.g. a zombie appending between a trimmer's checkpoint and its deletions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from hudi_sink.shared.storage.fs import FileInfo, LocalFileSystem

Op = tuple[str, ...]


class RecordingFileSystem(LocalFileSystem):
    def __init__(self, hook: Callable[[Op], None] | None = None) -> None:
        self.ops: list[Op] = []
        self.hook = hook

    def _record(self, *op: str) -> None:
        if self.hook is not None:
            self.hook(op)
        self.ops.append(op)

    def clear(self) -> None:
        self.ops.clear()

    def named(self, *kinds: str) -> list[Op]:
        return [op for op in self.ops if op[0] in kinds]

    def index(self, op: Op) -> int:
        """Position of the first recorded ``op`` (ValueError when it never happened)."""
        return self.ops.index(op)

    def read_bytes(self, path: str) -> bytes:
        self._record("read_bytes", path)
        return super().read_bytes(path)

    def write_atomic(self, path: str, data: bytes) -> None:
        self._record("write_atomic", path)
        super().write_atomic(path, data)

    def create_exclusive(self, path: str, data: bytes) -> bool:
        self._record("create_exclusive", path)
        return super().create_exclusive(path, data)

    def rename(self, src: str, dst: str) -> None:
        self._record("rename", src, dst)
        super().rename(src, dst)

    def delete(self, path: str) -> bool:
        self._record("delete", path)
        return super().delete(path)

    def list_dir(self, path: str) -> list[FileInfo]:
        self._record("list_dir", path)
        return super().list_dir(path)

    def walk_files(self, path: str) -> Iterator[FileInfo]:
        self._record("walk_files", path)
        return super().walk_files(path)

    def fsync_file(self, path: str) -> None:
        self._record("fsync_file", path)
        super().fsync_file(path)

    def fsync_dir(self, path: str) -> None:
        self._record("fsync_dir", path)
        super().fsync_dir(path)
