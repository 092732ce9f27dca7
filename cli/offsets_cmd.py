"""``hudi-sink offsets set``: set a partition's committed offset while no sink runs.

The same commit as ``POST /offsets`` (``shared.hudi.offset_change``), made by this process as
a leader of its own: it claims a sink-log epoch first, so the commit is fenced like any
coordinator's. The claim is the safety; the checks before it keep the tool from stalling a
running sink, because a coordinator fenced by it stands by until its group rebalances:

1. an instant pending on the timeline means a coordinator is in a transaction (a running
   leader almost always has one open) or one stopped mid-instant: refused (exit 2);
2. the table is watched for ``quiet_s`` seconds: any new sink-log entry or timeline change
   (a commit, a rolled-back or withdrawn instant) means a coordinator is working: refused;
3. the epoch is claimed — from here on no coordinator can decide anything — and the
   timeline is read again: an instant that appeared between 2 and 3 belongs to a coordinator
   that raced us (and is now fenced): refused, nothing committed.

Only then is the instant started and committed through the sink log. A crash in between
leaves either no decision (the next coordinator rolls the pending instant back: nothing
changed) or a decided COMMIT (it rolls it forward: the change applies once).
"""

from __future__ import annotations

import json
import socket
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hudi_sink.cli.table_cmd import open_table
from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.disposal import DirectDisposal
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.hudi.naming import next_instant_time
from hudi_sink.shared.hudi.offset_change import (
    MAX_OFFSET,
    OffsetChange,
    change_metadata,
    check_reason,
)
from hudi_sink.shared.hudi.offsets import UNQUALIFIED_TOPIC_KEY, Offsets, offsets_from_metadata
from hudi_sink.shared.hudi.sink_log import SinkLog
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.kafka.partition_key import key_text

__all__ = ["OffsetsSet", "set_offset", "run_offsets_set", "DEFAULT_QUIET_S"]

DEFAULT_QUIET_S = 10.0
"""How long the table must stay unchanged before the tool acts (check 2)."""


@dataclass(frozen=True)
class OffsetsSet:
    path: str
    partition: int
    offset: int
    reason: str
    topic: str | None = None
    quiet_s: float = DEFAULT_QUIET_S
    options: Mapping[str, str] | None = None


def _refuse(message: str) -> ConfigError:
    return ConfigError(f"offsets not changed: {message}")


def _activity(table: HudiTable, log: SinkLog) -> tuple[int, frozenset[str]]:
    """What a working coordinator changes: the sink log's last number, the timeline's files."""
    timeline = frozenset(info.name for info in table.fs.list_dir(table.meta_path) if not info.is_dir)
    return log.read_state().last_seq, timeline


def _check_idle(table: HudiTable, log: SinkLog, quiet_s: float) -> None:
    """Checks 1 and 2 of the module docstring."""
    leader = log.read_state().leader
    if pending := table.pending_instants():
        raise _refuse(
            f"instant {pending[0]} is in flight: a coordinator is running (leader "
            f"{json.dumps(leader)}; use POST /offsets on it) or stopped mid-instant (start "
            "the sink once and stop it cleanly: its recovery rolls the instant back)")
    before = _activity(table, log)
    time.sleep(quiet_s)  # an operator's tool, not a test: it waits for the table to be quiet
    if _activity(table, log) != before:
        raise _refuse(f"the table changed within {quiet_s:g} s: a coordinator is running "
                      f"(leader {json.dumps(leader)}); use POST /offsets on it")


def _topic_of(extra: Mapping[str, Any], wanted: str | None) -> tuple[str, list[str]]:
    """The topic to set and the topic order to store the offsets in (unqualified entries
    stay unqualified: ``shared.hudi.offsets``)."""
    named = extra.get(UNQUALIFIED_TOPIC_KEY)
    raw = str(extra.get("kafka.commit.offsets") or "")
    qualified = sorted({entry.split("=", 1)[0].rpartition(":")[0]
                        for entry in raw.split(",") if ":" in entry.split("=", 1)[0]})
    known = ([named] if isinstance(named, str) else []) + [t for t in qualified if t != named]
    if not known and raw:
        # Offsets written before commits named their topic: a --topic here could not be told
        # from a typo, and a typo would move every partition's offsets to a topic the sink
        # does not read (it would then start that topic from 0).
        raise _refuse("the table's offsets name no topic (written before commits recorded it); "
                      "use POST /offsets on the running coordinator, which knows its topics")
    if wanted is not None and known and wanted not in known:
        raise ConfigError(f"the table's offsets are of {', '.join(known)}, not {wanted!r} (a topic "
                          "the table has no offsets of yet: use POST /offsets on the running "
                          "coordinator, which knows its configured topics)", "--topic")
    topic = wanted or (known[0] if len(known) == 1 else None)
    if topic is None:
        raise ConfigError(f"the table stores offsets of several topics ({', '.join(known)}): "
                          "name one", "--topic")
    order = [named] if isinstance(named, str) else []
    return topic, order + [t for t in sorted({*known, topic}) if t not in order]


def set_offset(request: OffsetsSet) -> dict[str, Any]:
    """Commit the change (module docstring); returns what was committed."""
    if request.partition < 0 or request.offset < 0:
        raise ConfigError("partition and offset must be non-negative integers", "--offset")
    if request.offset > MAX_OFFSET:
        raise ConfigError(f"offset {request.offset} is above Kafka's largest offset ({MAX_OFFSET})",
                          "--offset")
    if request.quiet_s < 0:
        raise ConfigError(f"must be a number of seconds >= 0, got {request.quiet_s:g}",
                          "--quiet-seconds")
    reason = check_reason(request.reason, "--reason")
    table = open_table(request.path, request.options)
    log = SinkLog(table.fs, table.base_path)
    _check_idle(table, log, request.quiet_s)
    committer = TableCommitter(table.fs, table, DirectDisposal(table.fs))
    epoch = committer.claim_epoch({"member_id": f"cli-{uuid.uuid4().hex}",
                                   "host": socket.gethostname(), "tool": "hudi-sink offsets set"})
    if pending := table.pending_instants():  # check 3: a coordinator raced the claim
        raise _refuse(f"a coordinator started instant {pending[0]} meanwhile; it is fenced "
                      f"by epoch {epoch} now and stands by until its group rebalances (restart "
                      "it), nothing was committed")
    latest = table.latest_commit_metadata()
    extra: Mapping[str, Any] = (latest or {}).get("extraMetadata") or {}
    schema = extra.get("schema") or table.read_properties().get("hoodie.table.create.schema")
    if not schema:
        raise _refuse("the table records no schema (no commit and no hoodie.table.create.schema)")
    topic, topics = _topic_of(extra, request.topic)
    committed: Offsets = offsets_from_metadata(extra, [topic]) if latest is not None else {}
    change = OffsetChange(offsets={(topic, request.partition): request.offset}, reason=reason,
                          set_by="cli", request_id=uuid.uuid4().hex)
    instant = next_instant_time(table.latest_instant_time(), datetime.now(UTC))
    committer.start(instant)
    metadata = change_metadata(change, committed, topics=topics, schema_json=str(schema),
                               epoch=epoch, sink_name=str(extra.get("hudi.sink.name", "")),
                               operation=str((latest or {}).get("operationType") or "INSERT"))
    committer.commit(instant, metadata, [])
    key = (topic, request.partition)
    return {"commit_time": instant, "epoch": epoch, "partition": key_text(key),
            "from": committed.get(key), "to": request.offset, "reason": reason}


def run_offsets_set(request: OffsetsSet, *, as_json: bool) -> int:
    done = set_offset(request)
    if as_json:
        sys.stdout.write(json.dumps(done, indent=2) + "\n")
    else:
        was = "-" if done["from"] is None else done["from"]
        sys.stdout.write(f"{done['partition']}: offset {was} -> {done['to']} in commit "
                         f"{done['commit_time']} (sink log epoch {done['epoch']}); reason: "
                         f"{done['reason']}\n")
    return 0
