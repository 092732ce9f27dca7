"""Where staged files go that no commit will ever list: the committer's ``disposal``,
passed in when it is built (``shared.deletion.sender.KafkaDisposal`` once the service has a producer,
``DirectDisposal`` without a deletion service)."""

from __future__ import annotations

from typing import Protocol

from hudi_sink.shared.storage.fs import FileSystem

__all__ = ["DirectDisposal", "StagedFileDisposal"]


class StagedFileDisposal(Protocol):
    """Where staged files go that no commit will ever list (phase 1 of two-phase deletion
    hands them to phase 2).

    ``before_decision`` runs before the metadata change that makes the files dead and must
    be durable when it returns (e.g. deletion intents acked by the broker) or raise, so the
    change is not made. ``after_decision`` runs once the decision is durable.
    """

    def before_decision(self, instant: str, paths: list[str], reason: str) -> None: ...

    def after_decision(self, instant: str, paths: list[str]) -> None: ...


class DirectDisposal:
    """No deletion service: delete staged files once the decision is durable. Safe because
    staged files live under ``.hoodie/.temp`` where no reader ever looks."""

    def __init__(self, fs: FileSystem) -> None:
        self._fs = fs

    def before_decision(self, instant: str, paths: list[str], reason: str) -> None:
        return None

    def after_decision(self, instant: str, paths: list[str]) -> None:
        for path in paths:
            self._fs.delete(path)
