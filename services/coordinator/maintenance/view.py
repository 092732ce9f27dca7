"""The table as a reader sees it, for maintenance: committed base files per file group.

Like hudi-rs and Java: a base file counts when its instant is completed on the
active timeline or older than the active timeline (archived); files of pending or unknown
newer instants do not. A file group (partition, file id) may have several committed slices (a
Copy-on-Write update or small-file packing writes the same file id at a newer instant); a
snapshot reads the latest, so only that one is live, the older ones are superseded (kept for
time travel until the cleaner's retention lets them go). Replaced file groups (completed
replacecommits) are reported apart, every slice of them.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from hudi_sink.services.coordinator.maintenance.plan import BaseFile, cleanable_slices
from hudi_sink.shared.hudi.layout import InstantState
from hudi_sink.shared.hudi.naming import instant_key, parse_base_file_name
from hudi_sink.shared.hudi.replace import ReplaceTimeline

__all__ = ["TableView", "load_view"]


@dataclass
class TableView:
    completed: list[str]
    """Completed commit and replacecommit instants of the active timeline, oldest first."""
    pending: set[str]
    replaced_by: dict[tuple[str, str], str]
    live: list[BaseFile] = field(default_factory=list)
    """The latest committed slice of each file group not replaced (one per group)."""
    superseded: list[BaseFile] = field(default_factory=list)
    """Older committed slices still on disk of file groups not replaced."""
    replaced_files: list[BaseFile] = field(default_factory=list)
    """Base files still on disk of replaced file groups (every slice)."""

    def files_per_partition(self) -> dict[str, int]:
        """Live file groups per table partition (what a snapshot reads)."""
        out: dict[str, int] = {}
        for f in self.live:
            out[f.partition] = out.get(f.partition, 0) + 1
        return out

    def cleanable_slices(self, retained_from: str | None) -> list[tuple[BaseFile, str]]:
        """Slices of every file group on disk (replaced ones too) that no instant from
        ``retained_from`` on reads, each with the slice superseding it: what cleaning hands
        to deletion, and what archival keeps on the active timeline until then (only its
        completed instants count as superseding: ``plan.cleanable_slices``)."""
        return cleanable_slices([*self.live, *self.superseded, *self.replaced_files],
                                retained_from, set(self.completed))


def load_view(timeline: ReplaceTimeline) -> TableView:
    """List the timeline, then the partition directories (blocking I/O)."""
    table = timeline.table
    instants = table.list_instants()
    completed = sorted({i.time for i in instants if i.state is InstantState.COMPLETED},
                       key=instant_key)
    pending = {i.time for i in instants} - set(completed)
    view = TableView(completed, pending, timeline.replaced_by())
    done = set(completed)
    earliest = instant_key(completed[0]) if completed else None
    base = table.base_path
    groups: dict[tuple[str, str], list[BaseFile]] = {}
    for info in table.fs.walk_files(base):
        relative = posixpath.relpath(info.path, base)
        if relative.split("/", 1)[0].startswith("."):
            continue  # .hoodie (timeline, staging, sink state)
        parsed = parse_base_file_name(info.name)
        if parsed is None:
            continue
        committed = parsed.instant in done or (
            earliest is not None and instant_key(parsed.instant) < earliest
            and parsed.instant not in pending)
        if not committed:
            continue
        partition = posixpath.dirname(relative)
        f = BaseFile(relative, partition, parsed.file_id, parsed.instant, info.size)
        if (partition, parsed.file_id) in view.replaced_by:
            view.replaced_files.append(f)
        else:
            groups.setdefault((partition, parsed.file_id), []).append(f)
    for slices in groups.values():
        latest = max(instant_key(f.instant) for f in slices)
        for f in slices:
            (view.live if instant_key(f.instant) == latest else view.superseded).append(f)
    view.live.sort(key=lambda f: f.path)
    view.superseded.sort(key=lambda f: f.path)
    return view
