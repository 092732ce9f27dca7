"""``hudi-sink table show|history|read``: look at a table the way a user would.

``show`` and ``history`` list every kind of instant — ingestion commits, clustering
(replacecommit), cleans and archival — from the timeline, the archive, the clean records and
the sink log (``cli.table_history``); ``read`` goes through hudi-rs, an independent reader,
so what it prints is what any Hudi reader sees. ``read --as-of T`` first checks that the
table still holds ``T``'s history (``shared.hudi.time_travel``): before the cleaner's
retained history it exits 2, where hudi-rs would silently return what is left.

A commit's ``records`` are the records it applied (inserts, updates, deletes); ``rows_written``
counts the rows of the files it wrote, which include the rows a new slice of a file group
carries over from the previous one. A commit that evolved the table's schema lists its
``schema_changes`` (``added coupon STRING``, ``widened qty INT -> BIGINT``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from hudi_sink.cli.table_history import commit_row, history_rows
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.time_travel import AsOf, AsOfError, resolve_as_of
from hudi_sink.shared.storage.backend import filesystem_for
from hudi_sink.shared.storage.credentials import (
    is_credentials_lookup_failure,
    needs_metadata_service,
    no_credentials,
    probe_metadata_service,
)
from hudi_sink.shared.storage.object_store import MissingCredentialsError
from hudi_sink.shared.storage.store_uri import is_object_store_uri, parse_store_uri, reader_storage_options

__all__ = ["run_table", "table_summary", "table_history", "read_rows", "check_as_of", "open_table"]


Options = Mapping[str, str] | None
"""``--storage-option KEY=VALUE`` for an object-store path (over the AWS_* environment)."""


def _open(path: str, options: Options = None) -> HudiTable:
    path = _absolute(path)
    _credentials_or_exit(path, options)
    table = HudiTable(filesystem_for(path, options), path)
    if not table.is_initialized():
        missing = f"{layout.METAFOLDER}/{layout.PROPERTIES_FILE}"
        raise ConfigError(f"no Hudi table at {path} ({missing} missing)", "--path")
    return table


def open_table(path: str, options: Options = None) -> HudiTable:
    """The table at ``path`` for the CLI's other table commands (``offsets set``): the same
    checks (no table, or an ``s3://`` path without credentials: exit 2, one line)."""
    return _open(path, options)


def _credentials_or_exit(path: str, options: Options) -> None:
    """An ``s3://`` table with nothing but the metadata service to give credentials: ask it
    once, briefly, before any client does (object_store would retry it for a minute off
    EC2); MissingCredentialsError (exit 2, one line) when it gives none."""
    if not is_object_store_uri(path):
        return
    scheme = parse_store_uri(path).scheme
    if needs_metadata_service(scheme, options or {}):
        why = probe_metadata_service()
        if why is not None:
            raise MissingCredentialsError(no_credentials(path, options or {}, None, why))


def _absolute(path: str) -> str:
    return path if "://" in path else os.path.abspath(path)


def table_history(path: str, options: Options = None, limit: int | None = None
                  ) -> list[dict[str, Any]]:
    """Every instant of the table by kind (``cli.table_history``), newest first."""
    return history_rows(_open(path, options), limit)


def table_summary(path: str, limit: int = 20, options: Options = None) -> dict[str, Any]:
    """The table's properties, its ingestion commits on the active timeline (count, records,
    latest offsets) and the ``limit`` newest history rows of every kind."""
    table = _open(path, options)
    props = table.read_properties()
    commits = [commit_row(table.read_commit_metadata(t)) | {"commit_time": t}
               for t in reversed(table.completed_commits())]
    archived = sum(1 for i in ReplaceTimeline(table).archived() if i.action == layout.COMMIT_ACTION)
    return {
        "base_path": path,
        "table_name": props.get("hoodie.table.name"),
        "table_type": props.get("hoodie.table.type"),
        "table_version": props.get("hoodie.table.version"),
        "record_key": props.get("hoodie.table.recordkey.fields"),
        "partition_fields": props.get("hoodie.table.partition.fields", ""),
        "commits": len(commits),
        "archived_commits": archived,
        "total_records": sum(c["records"] for c in commits),
        "latest_commit": commits[0]["commit_time"] if commits else None,
        "latest_offsets": commits[0]["offsets"] if commits else "",
        "recent": history_rows(table, limit),
    }


def check_as_of(table: HudiTable, as_of: str) -> AsOf:
    """Where ``as_of`` stands in the table's history; ConfigError (exit 2) naming ``--as-of``
    when hudi-rs cannot read it or the table no longer holds it."""
    try:
        when = resolve_as_of(table, as_of)
    except AsOfError as exc:
        raise ConfigError(str(exc), "--as-of") from None
    if when.too_old:
        raise ConfigError(
            f"{as_of} (instant {when.instant}) is older than the retained history: clean "
            f"{when.clean} kept every instant from {when.retained_from} on and deleted older "
            "file slices, so that read would silently miss rows", "--as-of")
    return when


def read_rows(path: str, as_of: str | None = None, options: Options = None) -> Any:
    """All rows visible to hudi-rs (a pyarrow Table), optionally as of an instant (checked
    first: :func:`check_as_of`); on an object store hudi-rs gets the sink's options
    (environment, then ``options``)."""
    table = _open(path, options)
    if as_of:
        check_as_of(table, as_of)
    return _read(path, as_of, options)


def _read(path: str, as_of: str | None, options: Options) -> Any:
    import pyarrow as pa
    from hudi import HudiReadOptions, HudiTableBuilder

    builder = HudiTableBuilder.from_base_uri(_absolute(path))
    _credentials_or_exit(path, options)
    if is_object_store_uri(path):
        scheme = parse_store_uri(path).scheme
        builder = builder.with_storage_options(reader_storage_options(scheme, options or {}, os.environ))
    read_options = HudiReadOptions()
    if as_of:
        read_options = read_options.with_as_of_timestamp(as_of)
    try:
        batches = builder.build().read(read_options)
    except Exception as exc:  # noqa: BLE001 - hudi-rs raises its own types, with a debug dump
        if is_credentials_lookup_failure(str(exc)):
            raise MissingCredentialsError(no_credentials(
                _absolute(path), options or {}, None, str(exc))) from exc
        raise
    if not batches:
        return pa.table({})
    return pa.Table.from_batches(batches)


def _print(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def run_table(action: str, path: str, *, as_json: bool, limit: int, as_of: str | None,
              options: Options = None) -> int:
    if action == "show":
        summary = table_summary(path, limit, options)
        if as_json:
            _print(summary)
            return 0
        print(f"table {summary['table_name']} ({summary['table_type']}, v{summary['table_version']})"
              f" at {path}")
        print(f"record key {summary['record_key']}; partitioned by "
              f"{summary['partition_fields'] or '(none)'}")
        archived = (f" (and {summary['archived_commits']} archived)"
                    if summary["archived_commits"] else "")
        print(f"{summary['commits']} commits{archived}, {summary['total_records']} records; "
              f"latest {summary['latest_commit']} offsets {summary['latest_offsets'] or '-'}")
        _print_history(summary["recent"])
        return 0
    if action == "history":
        history = table_history(path, options, limit)
        if as_json:
            _print(history)
        else:
            _print_history(history)
        return 0
    when = check_as_of(_open(path, options), as_of) if as_of else None
    rows = _read(path, as_of, options)
    key_col = "_hoodie_record_key"
    distinct = len(set(rows.column(key_col).to_pylist())) if rows.num_rows else 0
    sample = rows.slice(0, limit).to_pylist() if rows.num_rows else []
    note = None
    if when is not None and when.before_first_commit:
        note = (f"instant {when.instant} is before the table's first commit "
                f"{when.first_commit}: the table was empty then" if when.first_commit
                else f"the table has no commit yet (as of instant {when.instant})")
    if as_json:
        _print({"rows": rows.num_rows, "distinct_keys": distinct, "as_of": as_of,
                "as_of_instant": when.instant if when else None, "note": note, "sample": sample})
        return 0
    print(f"{rows.num_rows} rows, {distinct} distinct record keys"
          + (f" as of {as_of} (instant {when.instant})" if when else ""))
    if note:
        print(note)
    for row in sample:
        print({k: v for k, v in row.items() if not k.startswith("_hoodie") or k == key_col})
    return 0


def _print_history(history: list[dict[str, Any]]) -> None:
    """As Hudi's ``commits show``: every kind of instant, its action in the ``kind`` column."""
    print(f"{'commit_time':<18} {'kind':<13} {'state':<12} {'records':>9} {'files':>6}  "
          "offsets / detail")
    for h in history:
        print(f"{h['commit_time']:<18} {h['kind']:<13} {h['state']:<12} "
              f"{h.get('records', ''):>9} {h.get('files', ''):>6}  "
              f"{h.get('offsets') or h.get('detail') or h.get('reason', '')}")
        if h.get("schema_changes"):
            print(f"{'':<18} schema: {'; '.join(h['schema_changes'])}")
        if "offsets_set" in h:  # an operator's offset change: what and why
            changed = ", ".join(f"{key} {span['from'] if span['from'] is not None else '-'} -> "
                                f"{span['to']}" for key, span in h["offsets_set"].items())
            print(f"{'':<18} offsets set by {h['set_by']}: {changed}; reason: {h['reason']}")
