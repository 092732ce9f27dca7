"""``config check``'s look at the table a config names, read-only: a config the table was not
created for fails here (exit 2, each problem naming its key), not at the first start of a pod.

It checks what every service checks when it opens the table (``HudiTable.initialize``): the
table's ``hoodie.properties`` against ``table.*`` (name, record key, partitioning) and the
sink's record of how the table was created (``shared.hudi.table_record``: write mode, and in
upsert mode the record key and precombine field).

Only a local table is read: an object store is left to the services (its credentials and
endpoint may be the pod's only, and an unreachable one would hang the check in retries), and
so is a local path that cannot be read (permissions). Nothing is written.
"""

from __future__ import annotations

from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.errors import ConfigError, TableFormatError
from hudi_sink.shared.hudi.properties import validate_properties
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.table_record import read_record, record_problems
from hudi_sink.shared.storage.backend import filesystem_for, is_object_store

__all__ = ["check_table"]

Problem = tuple[str | None, str]


def check_table(config: SinkConfig) -> tuple[list[Problem], str]:
    """The problems of ``config`` against its table, and one line saying
    what was found."""
    problems: list[Problem] = []
    base, table_config = config.table.base_path, config.table
    if is_object_store(base):
        return problems, f"{base} not read (an object store: each service checks it at start)"
    fs = filesystem_for(base, table_config.storage_options)
    table = HudiTable(fs, base)
    try:
        props = table.read_properties() if table.is_initialized() else None
        record = read_record(fs, base)
    except TableFormatError as exc:
        return [*problems, ("table.base_path", f"the table at {base} cannot be read: {exc}")], ""
    except OSError as exc:
        return problems, f"{base} not read ({type(exc).__name__}: {exc})"
    found: list[Problem] = []
    if props is not None:
        try:
            validate_properties(props, table_config)
        except ConfigError as exc:
            found += exc.problems
        except TableFormatError as exc:
            found.append(("table.base_path", f"the table at {base} cannot be kept: {exc}"))
    named = {key for key, _ in found}  # a key hoodie.properties already refused, said once
    if props is not None or record is not None:  # no table yet: nothing was created as anything
        problems += found + [p for p in record_problems(record, table_config, base)
                             if p[0] not in named]
    if props is None and record is None:
        return problems, (f"{base} does not exist yet: the first service to start creates it "
                          f"({table_config.write_mode}, record key {table_config.record_key_field})")
    mode = record.write_mode if record is not None else "insert"
    keys = (props.get("hoodie.table.recordkey.fields") if props is not None
            else ",".join(record.record_key_fields) if record is not None else None)
    return problems, f"{base} exists, created as {mode} (record key {keys})"
