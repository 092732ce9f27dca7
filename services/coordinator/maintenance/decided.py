"""The frame of a maintenance action decided through the sink log with no files to place
(archival, cleaning).

Each is decided by a COMMIT entry carrying the action's name (``TableCommitter.decide``: the
fence), whose metadata holds the decision's detail under that same name. After a crash the
committer rolls a decided entry forward through ``forward``, and trims one that looks
unfinished once ``done`` finds its effect in place. Registering both in the one constructor
keeps an action from being decided without its roll-forward.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.hudi.sink_log_state import LogEntry

__all__ = ["LoggedAction"]


class LoggedAction(ABC):
    """One such action: a subclass names it (``action``) and says how to redo and check it."""

    action: ClassVar[str]
    """The COMMIT entry's action, and the metadata key of the decision's detail."""

    def __init__(self, committer: TableCommitter, timeline: ReplaceTimeline) -> None:
        self._committer = committer
        self._timeline = timeline
        committer.forward_actions[self.action] = self.forward
        committer.done_checks[self.action] = self.done

    def _decide(self, instant: str, detail: Any, complete: Callable[[], None],
                epoch: int | None) -> None:
        """Decide ``instant`` with ``detail`` (refused once ``epoch`` ended), then ``complete``
        (blocking: worker thread)."""
        self._committer.decide(instant, self.action,
                               {"partitionToWriteStats": {}, self.action: detail}, [],
                               complete, epoch=epoch)

    def _detail(self, entry: LogEntry) -> Any:
        """The detail a decided entry of this action holds."""
        assert entry.metadata is not None
        return entry.metadata[self.action]

    @abstractmethod
    def forward(self, entry: LogEntry) -> None:
        """Carry out a decided entry again (after a crash); doing it twice changes nothing."""

    @abstractmethod
    def done(self, entry: LogEntry) -> bool:
        """Whether a decided entry's effect is in place (the log may then be trimmed past it)."""
