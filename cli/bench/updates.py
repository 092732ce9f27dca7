"""Upsert mode's update phase: updates of existing keys at a fixed rate into a caught-up table.

Once an upsert sink has committed its keyed insert-only backlog (every key of
``[0, rows)`` once), its processes keep running and the bench produces later versions of
keys drawn uniformly from the whole key space, keyed like the backlog (the message key is
the record id, the default partitioner places it), at ``rps`` for ``seconds``. Then it
reports, from the timeline's commits of the phase (those after the backlog's covering commit
up to the one covering the last update):

- produce → visible latency of every update (as :mod:`.steady`: mtime of the first commit
  whose ``kafka.commit.offsets`` cover its offset − its Kafka timestamp), and END_COMMIT →
  commit file of the instants that made updates visible;
- ``merge_mb_per_s``: bytes of the new slices written over old ones (``fileSizeInBytes`` of
  the write stats whose ``prevCommit`` is set) per second of the phase's wall time, from the
  first update sent to the commit covering the last;
- ``write_amplification``: rows written (``numWrites``: carried rows included) ÷ updates
  produced. Copy-on-Write rewrites every row of a touched file group, so this says how many
  rows each update cost.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from hudi_sink.cli.bench.data import RecordMaker
from hudi_sink.cli.bench.paced import Message
from hudi_sink.cli.bench.report import percentile
from hudi_sink.cli.bench.steady import SteadySent, produce_paced, rounded, visible_latencies
from hudi_sink.cli.bench.timeline import SeenCommit

__all__ = ["PREBUILT_MAX_BYTES", "UpdateLoad", "UpdateResult", "prepare_updates", "produce_updates",
           "update_result"]


@dataclass(frozen=True)
class UpdateLoad:
    rps: int
    seconds: float
    rows: int
    """The key space: record ``n`` for ``n`` in ``[0, rows)`` already committed."""
    seed: str
    """The backlog's :class:`RecordMaker` seed, so updates carry the same ids."""


@dataclass(frozen=True)
class UpdateResult:
    target_rps: int
    records: int
    sent_rps: float
    """What the producer achieved (below ``target_rps`` if the machine could not keep up)."""
    seconds: float
    """Wall time of the phase: first update sent → mtime of the commit covering the last."""
    commits: int
    visible_p50_s: float | None
    visible_p99_s: float | None
    visible_max_s: float | None
    commit_latencies_s: list[float]
    """END_COMMIT → commit file of the instants that made updates visible."""
    rows_written: int
    update_writes: int
    """``numUpdateWrites``: keys replaced (a key updated twice in one instant counts once)."""
    inserts: int
    """``numInserts``: 0 unless a key was new (every update names a committed key)."""
    bytes_written: int
    rewritten_bytes: int
    merge_mb_per_s: float
    write_amplification: float | None
    uncovered: int
    """Updates no commit covered: always 0 when the run ends normally."""


PREBUILT_MAX_BYTES = 1 << 30
"""Updates are built before the phase while they fit in this much memory (300k updates of
1 KB, the defaults, take about 330 MB); beyond it they are built while they are sent."""


def prepare_updates(load: UpdateLoad, record_bytes: int) -> Callable[[int], Message]:
    """The phase's update ``n`` for n = 0, 1, …: keys uniform over the key space, each keyed
    by its id with no partition (the default partitioner's choice, as the backlog's); update
    ``n`` is version ``n + 1``, so a key's later update carries a later ts.

    Built here, before the sink under test starts, as far as :data:`PREBUILT_MAX_BYTES`
    allows: building a record (its JSON, its ISO timestamp) costs the bench process about
    10 µs, so built while sent, 10,000 updates/s took a tenth of this machine's two cores
    from the sink the phase measures (py-spy of the bench process during the phase)."""
    maker = RecordMaker(record_bytes, load.seed)
    rng = random.Random(f"{load.seed}-updates")

    def update(n: int) -> Message:
        key = rng.randrange(load.rows)
        return maker.key(key), maker.value(key, version=n + 1), None

    count = math.ceil(load.rps * load.seconds) + 1
    if count * (record_bytes + 64) > PREBUILT_MAX_BYTES:
        return update
    built = [update(n) for n in range(count)]  # in order: the same rng draws as unbuilt

    def message(n: int) -> Message:
        return built[n] if n < count else update(n)

    return message


async def produce_updates(bootstrap: str, topic: str, load: UpdateLoad,
                          messages: Callable[[int], Message]) -> SteadySent:
    """Send ``load.rps`` of ``messages`` (:func:`prepare_updates`) a second for
    ``load.seconds``."""
    return await produce_paced(bootstrap, topic, load.rps, load.seconds, messages,
                               "hudi-sink-bench-updates", load.seed)


def update_result(load: UpdateLoad, sent: SteadySent, started: float, topic: str,
                  phase: list[SeenCommit], every: list[SeenCommit],
                  commit_latencies: list[float]) -> UpdateResult:
    """The phase's numbers. ``started``: wall clock when the first update was due;
    ``phase``: the commits after the backlog's covering commit up to the one covering the
    last update, in instant order; ``every``: all commits seen (for produce → visible)."""
    visible = visible_latencies(sent, [(c.mtime, c.offsets.get(topic, {})) for c in every])
    seconds = max(phase[-1].mtime - started, 1e-9) if phase else 0.0
    rows = sum(c.writes.rows for c in phase)
    rewritten = sum(c.writes.rewritten_bytes for c in phase)
    return UpdateResult(
        target_rps=load.rps, records=sent.records,
        sent_rps=round(sent.records / sent.seconds, 1) if sent.seconds > 0 else 0.0,
        seconds=round(seconds, 2), commits=len(phase),
        visible_p50_s=rounded(percentile(visible, 50)),
        visible_p99_s=rounded(percentile(visible, 99)),
        visible_max_s=rounded(max(visible, default=None)),
        commit_latencies_s=[round(x, 3) for x in commit_latencies],
        rows_written=rows,
        update_writes=sum(c.writes.updates for c in phase),
        inserts=sum(c.writes.inserts for c in phase),
        bytes_written=sum(c.writes.bytes for c in phase),
        rewritten_bytes=rewritten,
        merge_mb_per_s=round(rewritten / 2**20 / seconds, 2) if seconds > 0 else 0.0,
        write_amplification=round(rows / sent.records, 2) if sent.records else None,
        uncovered=sent.records - len(visible),
    )

