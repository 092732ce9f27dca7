"""``hudi-sink dev``: the whole pipeline on one machine, for a first look.

Starts the embedded broker (unless ``kafka.bootstrap_servers`` points at a running Kafka),
the coordinator, a participant and the deleter as child processes (the same commands a
deployment runs), produces N demo records and shows live progress of committed records.
Ctrl-C stops everything cleanly; ``--until-done`` exits once all records are committed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from hudi_sink.cli.broker import EmbeddedBroker, free_port, port_is_free
from hudi_sink.shared.config.settings import SinkConfig, load_config
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.hudi import layout

__all__ = ["run_dev", "dev_admin", "DEFAULT_DEV_CONFIG"]

DEV_DIR = Path(".hudi-sink-dev")

DEFAULT_DEV_CONFIG: dict[str, Any] = {
    "name": "demo",
    "kafka": {"bootstrap_servers": "127.0.0.1:9092", "topics": ["demo-orders"],
              "session_timeout_ms": 6000},
    "table": {
        "base_path": str(DEV_DIR / "warehouse" / "orders"),
        "name": "orders",
        "record_key_field": "id",
        "partition_field": "country",
        "schema": "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE, payload STRING",
    },
    "transaction": {"interval_ms": 5000, "write_status_timeout_ms": 60000, "flush_records": 50000},
    "deletion": {"send_delay_s": 5, "reconsume_later_s": 10},
    "admin": {"host": "127.0.0.1", "port": 8080},
    "spark": {"master": "local[2]", "conf": {"spark.driver.memory": "1g"}, "job_timeout_ms": 45000},
}


def _local_free_port(bootstrap: str) -> int | None:
    """The port of a single local bootstrap server nobody listens on (the broker goes there)."""
    if "," in bootstrap:
        return None
    host, _, port = bootstrap.rpartition(":")
    if host not in ("127.0.0.1", "localhost") or not port.isdigit():
        return None
    return int(port) if port_is_free(int(port)) else None


def _fresh_table_for_fresh_broker(base_path: Path, built_in: bool) -> None:
    """The embedded broker keeps topics in memory: a new broker starts at offset 0, while a
    table from an earlier run remembers later offsets and would skip the new records."""
    if not (base_path / layout.METAFOLDER).exists():
        return
    if built_in:
        import shutil

        shutil.rmtree(base_path)
        _say(f"removed the demo table of an earlier run ({base_path}): the new embedded broker "
             "starts with empty topics")
    else:
        _say(f"WARNING: {base_path} holds offsets from an earlier broker; the new embedded broker "
             "starts at offset 0, so records below those offsets are skipped. Use a new base_path.")


def _say(text: str) -> None:
    print(f"[dev] {text}", flush=True)


def _committed(config: SinkConfig) -> tuple[int, int, str]:
    """(records committed, commits, latest offsets) from the table's timeline."""
    from hudi_sink.cli.table_cmd import table_history

    try:
        history = table_history(config.table.base_path)
    except ConfigError:
        return 0, 0, ""
    commits = [h for h in history if h["kind"] == "commit" and h["state"] == "committed"]
    return (sum(c["records"] for c in commits), len(commits),
            commits[0]["offsets"] if commits else "")


def dev_admin(admin: Any) -> dict[str, Any]:
    """The admin section dev runs with. dev runs on one trusted machine, so its admin
    endpoints (POST /transactions/commit …) take requests without a token unless the given
    config says otherwise; a token, when set, is still required. A deployment sets
    admin.token instead (shared/runtime/admin.py refuses unauthenticated POSTs by default).

    They listen on 127.0.0.1 unless the config names a host: open POSTs must not be open to
    the network, and a loopback port also refuses requests for other host names (browser
    pages re-pointing their name at 127.0.0.1, ``shared.runtime.same_origin``)."""
    return {"host": "127.0.0.1", "allow_unauthenticated": True, **dict(admin or {})}


def _stop_on_signals() -> None:
    """Ctrl-C and SIGTERM both stop dev and everything it started (its children run in
    sessions of their own, so nothing else reaches them). Installed explicitly: a shell starts
    a background command with SIGINT ignored, and Python then leaves it ignored, so an
    explicit ``kill -INT`` did nothing; SIGTERM killed dev alone and left its processes
    running."""
    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)


def run_dev(config_path: str | None, records: int, until_done: bool = False) -> int:
    _stop_on_signals()
    DEV_DIR.mkdir(exist_ok=True)
    if config_path is not None:
        raw = yaml.safe_load(Path(config_path).read_text()) or {}
        base_dir = Path(config_path).resolve().parent
    else:
        raw, base_dir = DEFAULT_DEV_CONFIG, Path.cwd()
    raw = dict(raw)
    table = dict(raw.get("table", {}))
    if "base_path" in table and not Path(table["base_path"]).is_absolute():
        table["base_path"] = str((base_dir / table["base_path"]).resolve())
    raw["table"] = table
    raw["admin"] = dev_admin(raw.get("admin"))
    probe = load_config(None, overrides=raw)  # validates early, names the bad key
    broker: EmbeddedBroker | None = None
    children: list[tuple[str, subprocess.Popen[bytes]]] = []
    broker_port = _local_free_port(probe.kafka.bootstrap_servers)
    try:
        if broker_port is not None:
            _fresh_table_for_fresh_broker(Path(probe.table.base_path), config_path is None)
            broker = EmbeddedBroker(port=broker_port, log_path=DEV_DIR / "broker.log")
            broker.start()
            _say(f"embedded broker ready at {broker.bootstrap}")
        else:
            _say(f"using Kafka at {probe.kafka.bootstrap_servers}")
        admin = dict(raw.get("admin", {}))
        host = admin.get("host", "127.0.0.1")
        base_port = int(admin.get("port", 8080))
        effective = Path(tempfile.mkstemp(prefix="dev-", suffix=".yaml", dir=DEV_DIR)[1])
        effective.write_text(yaml.safe_dump(raw))
        config = load_config(effective)
        roles = ["coordinator", "participant"]
        if importlib.util.find_spec("hudi_sink.services.deleter.service") is not None:
            roles.append("deleter")
        for offset, role in enumerate(roles):
            port = base_port + offset if port_is_free(base_port + offset, host) else free_port()
            log_path = DEV_DIR / f"{role}.log"
            with log_path.open("wb") as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", "hudi_sink.cli.main", role, "--config", str(effective),
                     "--admin-port", str(port)],
                    stdout=log, stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    start_new_session=True,
                )
            children.append((role, process))
            _say(f"{role} started (admin http://{host}:{port}, log {log_path})")
        _produce(config, records)
        return _watch(config, records, children, until_done)
    except KeyboardInterrupt:
        _say("Ctrl-C: stopping")
        return 0
    finally:
        _stop(children)
        if broker is not None:
            broker.stop()
            _say("broker stopped")


def _produce(config: SinkConfig, records: int) -> None:
    import asyncio

    from hudi_sink.cli.produce import produce_records
    from hudi_sink.shared.kafka.connection import wait_for_kafka

    asyncio.run(wait_for_kafka(config.kafka))
    _say(f"producing {records} demo records to {config.kafka.topics[0]}")
    sent = asyncio.run(produce_records(config, records, 4))
    _say(f"produced {sent} records; waiting for the sink to commit them "
         "(the first commit waits for Spark to start)")


def _watch(config: SinkConfig, records: int, children: list[tuple[str, subprocess.Popen[bytes]]],
           until_done: bool) -> int:
    last = -1
    done_reported = False
    while True:
        for role, process in children:
            if process.poll() is not None:
                _say(f"{role} exited with code {process.returncode}; see {DEV_DIR / (role + '.log')}")
                return 1
        committed, commits, offsets = _committed(config)
        if committed != last:
            _say(f"committed {committed}/{records} records in {commits} commits "
                 f"(offsets {offsets or '-'})")
            last = committed
        if committed >= records and not done_reported:
            done_reported = True
            _say(f"all {records} records committed. Inspect: hudi-sink table show --path "
                 f"{config.table.base_path}")
            if until_done:
                return 0
            _say("Ctrl-C to stop")
        time.sleep(2)


def _stop(children: list[tuple[str, subprocess.Popen[bytes]]]) -> None:
    """The coordinator first, alone: while the participants still run it ends the open
    instant and commits what they report (a leader's drain), so the stop leaves no
    inflight instant and no rolled-back one; then the others."""
    first = [child for child in children if child[0] == "coordinator"]
    for group in (first, [child for child in children if child[0] != "coordinator"]):
        for _, process in group:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
        for role, process in group:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            _say(f"{role} stopped (exit {process.returncode})")
