"""The table's schema as the coordinator holds it: the latest commit's, evolved in commits.

Where it is decided: in the commit itself, never in a side file. Every commit's
``extraMetadata`` carries the table schema as Avro (``schema``, what Hudi's readers and hudi-rs
take) and as the sink's DDL (:data:`DDL_KEY`, which keeps NOT NULL and is what participants
decode with), plus the changes it made (:data:`CHANGES_KEY`). The table's schema is the
latest commit's, so a leader that takes over (after a crash right after the first evolved
commit, say) reads it back with the offsets: both come from the same file.

How it moves: each START carries the instant's schema; a participant whose records need an
allowed change (``shared.schema.evolution``) stops before them and proposes the evolved
schema in its WriteStatus; the commit merges every proposal into the instant's schema (one
that conflicts with another is left out: its records are judged again next instant, and
refused there). A ``table.schema`` edited in the config is merged the same way when a leader
takes over: an allowed change is carried by the next commit, a refused one is a ConfigError
naming the column (exit 2) — for ``schema_source: registry`` (whose config schema is the
subject's latest version) a refused one is only logged: the data's writer schemas decide.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.errors import ConfigError, SchemaError
from hudi_sink.shared.kafka.protocol import WriteStatus
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.schema.evolution import (
    ALLOWED,
    CHANGES_KEY,
    DDL_KEY,
    Evolution,
    IncompatibleChange,
    columns_ddl,
    evolve,
)
from hudi_sink.shared.schema.table_schema import TableSchema, parse_ddl

__all__ = ["TableSchemas"]

log = logging.getLogger("hudi_sink.coordinator")



class TableSchemas:
    """The current table schema (the latest commit's, or the config's before any) and the
    changes the next commit carries."""

    def __init__(self, config: SinkConfig, schema: TableSchema, metrics: Metrics) -> None:
        self._config = config
        self._metrics = metrics
        self.current = schema
        self.pending: tuple[str, ...] = ()
        """Changes from the config not yet in a commit."""
        self.changed_at: str | None = None
        """The instant of the last schema change this process committed."""

    @property
    def source(self) -> str:
        return self._config.table.schema_source

    @property
    def follow(self) -> bool:
        """Whether writer schemas evolve the table (what a START tells every participant)."""
        return self.source == "registry"

    @property
    def ddl(self) -> str:
        """The current schema's value columns (what a START carries)."""
        return columns_ddl(self.current.value_columns)

    def adopt(self, extra: Mapping[str, Any] | None) -> None:
        """The latest commit's schema (its ``extraMetadata``; None: no commit yet) followed by
        the config's. Raises ConfigError naming the column for a refused ``table.schema``."""
        config = self._config.table.table_schema()
        committed = extra.get(DDL_KEY) if extra else None
        base = config.value_columns if not isinstance(committed, str) else tuple(parse_ddl(committed))
        try:
            evolution = evolve(base, config.value_columns)
        except IncompatibleChange as exc:
            if self.source == "ddl":
                raise ConfigError(f"column {exc.field!r} cannot change from {exc.table_type} (the "
                                  f"table's) to {exc.writer_type} (allowed: {ALLOWED})",
                                  "table.schema") from None
            log.error("the registry subject's latest schema is not the table's: %s; the table "
                      "keeps its schema", exc)
            evolution = Evolution(base, ())
        self.current = self._config.table.table_schema(columns_ddl(evolution.columns))
        self.pending = evolution.changes
        if evolution.changes:
            log.info("table.schema changes the table at the next commit: %s",
                     "; ".join(evolution.changes))

    def plan(self, statuses: Iterable[WriteStatus]) -> Evolution:
        """The schema of the commit of ``statuses``: the current one, the config's pending
        changes and every proposal that fits."""
        columns, changes = self.current.value_columns, list(self.pending)
        for status in statuses:
            if status.table_schema is None:
                continue
            try:
                evolution = evolve(columns, parse_ddl(status.table_schema))
                self._config.table.table_schema(columns_ddl(evolution.columns))  # keys still fit
            except (IncompatibleChange, SchemaError) as exc:
                log.warning("schema proposed by %s-%d left out (its records are judged again "
                            "next instant): %s", status.topic, status.partition, exc)
                continue
            columns = evolution.columns
            changes += [c for c in evolution.changes if c not in changes]
        return Evolution(columns, tuple(changes))

    def metadata(self, evolution: Evolution) -> dict[str, str]:
        """The commit's ``extraMetadata`` entries for its schema."""
        schema = self._config.table.table_schema(columns_ddl(evolution.columns))
        entries = {"schema": schema.avro_schema_json(), DDL_KEY: columns_ddl(evolution.columns)}
        if evolution.changes:
            entries[CHANGES_KEY] = "; ".join(evolution.changes)
        return entries

    def committed(self, evolution: Evolution, instant: str) -> None:
        """The commit carrying ``evolution`` is durable: it is the table's schema now."""
        if not evolution.changes:
            return
        self.current = self._config.table.table_schema(columns_ddl(evolution.columns))
        self.pending = ()
        self.changed_at = instant
        self._metrics.schema_changes(len(evolution.changes))
        log.info("%s evolved the table schema: %s", instant, "; ".join(evolution.changes))
