"""``hudi-sink`` console script: argument parsing and wiring only.

Exit codes: 0 clean stop, 1 runtime failure, 2 bad config or usage; how a failure is told is
``cli.failures``'.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from hudi_sink.cli.failures import format_even_if_invalid, report_failure
from hudi_sink.shared.config.settings import SinkConfig, load_config
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.runtime.faults import Faults
from hudi_sink.shared.runtime.logs import configure_logging, held_log_lines, set_log_format, set_log_service
from hudi_sink.shared.runtime.runner import serve_service

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors exit 2, as documented
        self.print_usage(sys.stderr)
        print(f"hudi-sink: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _load(path: str | None, admin_port: int | None = None) -> SinkConfig:
    overrides = {"admin": {"port": admin_port}} if admin_port is not None else None
    with held_log_lines(), format_even_if_invalid(path):  # warnings in the configured format
        config = load_config(path, overrides=overrides)
        set_log_format(config.log.format)
    return config


def _service_command(factory: Callable[[SinkConfig], Any]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        config = _load(args.config, args.admin_port)
        service = factory(config)
        return asyncio.run(serve_service(
            service, config.admin.host, config.admin.port,
            shutdown_timeout_s=config.service.shutdown_timeout_ms / 1000))

    return run


def _coordinator(config: SinkConfig) -> Any:
    from hudi_sink.services.coordinator.service import CoordinatorService

    return CoordinatorService(config, admin_url=f"http://{config.admin.host}:{config.admin.port}",
                              faults=Faults.from_environment())


def _participant(config: SinkConfig) -> Any:
    from hudi_sink.services.participant.service import ParticipantService

    return ParticipantService(config, faults=Faults.from_environment())


def _deleter(config: SinkConfig) -> Any:
    from hudi_sink.services.deleter.service import DeleterService

    return DeleterService(config)


def _broker(args: argparse.Namespace) -> int:
    from hudi_sink.cli.broker import run_broker_foreground

    return asyncio.run(run_broker_foreground(args.port))


def _dev(args: argparse.Namespace) -> int:
    from hudi_sink.cli.dev import run_dev

    return run_dev(args.config, args.records, until_done=args.until_done)


def _produce(args: argparse.Namespace) -> int:
    from hudi_sink.cli.produce import KeySpace, run_produce

    keys = None
    if args.delete_ratio is not None and args.key_space is None:
        raise _usage("produce: --delete-ratio needs --key-space (tombstones delete keys)")
    if args.key_space is not None:
        if args.key_space < 1:
            raise _usage(f"produce: --key-space must be at least 1, got {args.key_space}")
        ratio = 0.0 if args.delete_ratio is None else args.delete_ratio
        if not 0.0 <= ratio <= 1.0:
            raise _usage(f"produce: --delete-ratio must be between 0 and 1, got {ratio}")
        keys = KeySpace(args.key_space, ratio)
    config = _load(args.config)
    return asyncio.run(run_produce(config, args.records, args.partitions, args.rate, keys))


def _bench(args: argparse.Namespace) -> int:
    from pathlib import Path

    if args.mode == "upsert":
        return _bench_upsert(args)
    if args.stages and args.anchors:
        raise _usage("bench: --anchors runs with the end-to-end bench, not with --stages")
    records = 1_000_000 if args.records is None else args.records
    if args.stages:
        from hudi_sink.cli.bench.stages import run_stages

        return run_stages(records, args.record_bytes, Path(args.out) if args.out else None)
    if args.out is None:
        raise _usage("bench: --out FILE.json is required (or --stages)")
    from hudi_sink.cli.bench.command import BenchOptions, run_bench

    try:
        participants = tuple(int(p) for p in (args.participants or "1,2").split(",") if p.strip())
        conf = _spark_conf(args)
    except ValueError:
        raise _usage("bench: --participants takes counts like 1,2") from None
    if not participants or min(participants) < 1:
        raise _usage("bench: --participants takes counts like 1,2; --spark-conf KEY=VALUE")
    steady_rps = 5000 if args.steady_rps is None else args.steady_rps
    steady_seconds = 30 if args.steady_seconds is None else args.steady_seconds
    if steady_rps < 0 or steady_seconds < 0:
        raise _usage("bench: --steady-rps and --steady-seconds take numbers >= 0")
    return run_bench(BenchOptions(
        records=records, out=Path(args.out), record_bytes=args.record_bytes,
        participants=participants, interval_ms=args.interval_ms,
        flush_records=args.flush_records, spark_conf=conf,
        work_dir=Path(args.work_dir) if args.work_dir else None, keep=args.keep,
        steady_rps=steady_rps, steady_seconds=steady_seconds, anchors=args.anchors,
        small_file_bytes=args.small_file_bytes))


def _spark_conf(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    conf = tuple(tuple(item.split("=", 1)) for item in args.spark_conf)
    if any(len(c) != 2 for c in conf):
        raise _usage("bench: --spark-conf takes KEY=VALUE")
    return conf


def _bench_upsert(args: argparse.Namespace) -> int:
    """``bench --mode upsert``: insert mode's sizes and phases are refused by name, not ignored."""
    from pathlib import Path

    from hudi_sink.cli.bench.command import BenchOptions, run_bench
    from hudi_sink.cli.bench.upsert import UpsertBench

    given = [name for name, value in (
        ("--records (the table's rows are --upsert-rows)", args.records),
        ("--participants (one participant)", args.participants),
        ("--steady-rps", args.steady_rps), ("--steady-seconds", args.steady_seconds)) if value is not None]
    given += [name for name, on in (("--stages", args.stages), ("--anchors", args.anchors)) if on]
    if given:
        raise _usage(f"bench --mode upsert does not take {', '.join(given)}")
    if args.out is None:
        raise _usage("bench: --out FILE.json is required")
    if args.upsert_rows < 1 or args.update_rps < 0 or args.update_seconds < 0:
        raise _usage("bench: --upsert-rows takes a count >= 1, --update-rps and --update-seconds "
                     "numbers >= 0")
    return run_bench(BenchOptions(
        records=args.upsert_rows, out=Path(args.out), record_bytes=args.record_bytes,
        participants=(1,), interval_ms=args.interval_ms, flush_records=args.flush_records,
        spark_conf=_spark_conf(args), work_dir=Path(args.work_dir) if args.work_dir else None,
        keep=args.keep, mode="upsert",
        upsert=UpsertBench(rows=args.upsert_rows, update_rps=args.update_rps,
                           update_seconds=args.update_seconds,
                           compare_insert=not args.no_compare)))


def _usage(message: str) -> SystemExit:
    print(f"hudi-sink: error: {message}", file=sys.stderr)
    return SystemExit(2)


def _storage_options(args: argparse.Namespace) -> dict[str, str] | None:
    options: dict[str, str] = {}
    for item in args.storage_option or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"wants KEY=VALUE, got {item!r}", "--storage-option")
        options[key] = value
    return options or None


def _table(args: argparse.Namespace) -> int:
    from hudi_sink.cli.table_cmd import run_table

    return run_table(args.action, args.path, as_json=args.json, limit=args.limit,
                     as_of=args.as_of, options=_storage_options(args))


def _offsets(args: argparse.Namespace) -> int:
    from hudi_sink.cli.offsets_cmd import OffsetsSet, run_offsets_set

    return run_offsets_set(OffsetsSet(
        path=args.path, partition=args.partition, offset=args.offset, reason=args.reason,
        topic=args.topic, quiet_s=args.quiet_seconds, options=_storage_options(args)),
        as_json=args.json)


def _config_check(args: argparse.Namespace) -> int:
    """Validate as a service would (same loader, same exit 2 naming the key) and show the
    resolved settings with secrets redacted, so a deployment can be checked before it runs."""
    from hudi_sink.cli.config_check import check_config, render_json, render_yaml

    with held_log_lines(), format_even_if_invalid(args.config):
        checked = check_config(args.config, offline=args.offline)
        set_log_format(checked.config.log.format)
    shown = render_json(checked) if args.json else render_yaml(checked, args.config)
    print(shown.rstrip("\n"))
    return 0


def package_version() -> str:
    """The installed distribution's version, so ``--version`` names what was deployed; from a
    source checkout that is not installed, pyproject.toml's (the same number a build would get)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hudi-sink")
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="hudi-sink", description="Exactly-once Kafka → Apache Hudi sink")
    parser.add_argument("--version", action="version", version=f"hudi-sink {package_version()}")
    parser.add_argument("--log-level", default="INFO",
                        help="DEBUG, INFO, WARNING, ERROR or CRITICAL (any case)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, factory, text in (
        ("coordinator", _coordinator, "run the transaction coordinator"),
        ("participant", _participant, "run a participant (consumes data topics, writes files)"),
        ("deleter", _deleter, "run the two-phase file deleter"),
    ):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--config", required=True, help="YAML, .toml or .properties config file")
        cmd.add_argument("--admin-port", type=int, default=None, help="overrides admin.port")
        cmd.set_defaults(func=_service_command(factory))
    broker = sub.add_parser("broker", help="embedded development broker (tansu) in the foreground")
    broker.add_argument("--port", type=int, default=9092)
    broker.set_defaults(func=_broker)
    dev = sub.add_parser("dev", help="broker, all services and a demo producer on this machine")
    dev.add_argument("--config", default=None, help="YAML config (default: built-in demo config)")
    dev.add_argument("--records", type=int, default=10000, help="demo records to produce")
    dev.add_argument("--until-done", action="store_true",
                     help="exit once every produced record is committed (for scripts)")
    dev.set_defaults(func=_dev)
    produce = sub.add_parser("produce", help="produce synthetic records built from table.schema")
    produce.add_argument("--config", required=True)
    produce.add_argument("--records", type=int, required=True)
    produce.add_argument("--partitions", type=int, default=None,
                         help="partitions when the topic is created (default 4)")
    produce.add_argument("--rate", type=float, default=None, help="records per second (max)")
    produce.add_argument("--key-space", type=int, default=None, metavar="K",
                         help="keyed records: keys drawn from [0, K), sent as the message key "
                              "(default partitioner, murmur2)")
    produce.add_argument("--delete-ratio", type=float, default=None, metavar="R",
                         help="with --key-space: this fraction of records are tombstones")
    produce.set_defaults(func=_produce)
    check = _command_group(sub, "config", "configuration tools").add_parser(
        "check", help="validate a config as the services would, and against the table it names "
                      "(write mode, record key); print it resolved, secrets redacted")
    check.add_argument("--config", required=True, help="YAML, .toml or .properties config file")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.add_argument("--offline", action="store_true",
                       help="skip what only the machine the sink runs on has (TLS and token "
                            "files, optional packages), listing what was not checked")
    check.set_defaults(func=_config_check)
    _add_bench(sub)
    table = sub.add_parser("table", help="inspect a Hudi table (read with hudi-rs)")
    table.add_argument("action", choices=["show", "history", "read"])
    _add_table_location(table)
    table.add_argument("--limit", type=int, default=20, help="rows (read) or instants (history)")
    table.add_argument("--as-of", default=None, help="read: time travel to this instant")
    table.set_defaults(func=_table)
    offsets = _command_group(sub, "offsets", "committed Kafka offsets (README: Skipping a poison "
                             "record)")
    set_cmd = offsets.add_parser(
        "set", help="set one partition's offset while no coordinator runs (a fenced commit "
                    "recording --reason; refused, exit 2, while a coordinator is active)")
    _add_table_location(set_cmd)
    set_cmd.add_argument("--partition", type=int, required=True)
    set_cmd.add_argument("--offset", type=int, required=True, help="next offset to consume")
    set_cmd.add_argument("--reason", required=True, help="recorded in the table's history")
    set_cmd.add_argument("--topic", default=None, help="needed when the table has several topics")
    set_cmd.add_argument("--quiet-seconds", type=float, default=10.0,
                         help="how long the table must stay unchanged first (default 10)")
    set_cmd.set_defaults(func=_offsets)
    return parser


def _command_group(sub: Any, name: str, help_text: str) -> Any:
    """A command with actions of its own (``config check``, ``offsets set``): their parsers'
    group."""
    group = sub.add_parser(name, help=help_text)
    return group.add_subparsers(dest="action", required=True, parser_class=_Parser)


def _add_table_location(command: argparse.ArgumentParser) -> None:
    """The table commands' common arguments: where the table is, how to reach it, JSON."""
    command.add_argument("--path", required=True, help="table base path")
    command.add_argument("--json", action="store_true", help="machine-readable output")
    command.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                         help="object-store option for s3:// paths (as table.storage_options)")


def _add_bench(sub: Any) -> None:
    bench = sub.add_parser("bench", help="throughput, commit latency and memory (docs/performance.md)")
    bench.add_argument("--mode", choices=["insert", "upsert"], default="insert",
                       help="insert: throughput and latency of appends (the default); upsert: keyed "
                            "writes (upsert_rps_1, merge_mb_per_s, write_amplification)")
    bench.add_argument("--records", type=int, default=None, help="insert mode (default 1,000,000)")
    bench.add_argument("--out", default=None, help="results JSON file")
    bench.add_argument("--record-bytes", type=int, default=1024, help="JSON value size")
    bench.add_argument("--participants", default=None, help="participant counts to run (default 1,2)")
    bench.add_argument("--interval-ms", type=int, default=2000, help="transaction.interval_ms")
    bench.add_argument("--flush-records", type=int, default=None,
                       help="transaction.flush_records (default: the sink's default)")
    bench.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                       help="extra spark.conf for the participants")
    bench.add_argument("--steady-rps", type=int, default=None,
                       help="records/s of the steady-rate phase (latency once caught up; default 5000)")
    bench.add_argument("--steady-seconds", type=float, default=None,
                       help="length of the steady-rate phase (default 30); 0 skips it")
    bench.add_argument("--upsert-rows", type=int, default=1_000_000,
                       help="upsert mode: keys of the table (the keyed insert-only workload)")
    bench.add_argument("--update-rps", type=int, default=10_000,
                       help="upsert mode: updates/s of the update phase")
    bench.add_argument("--update-seconds", type=float, default=30,
                       help="upsert mode: length of the update phase; 0 skips it")
    bench.add_argument("--no-compare", action="store_true",
                       help="upsert mode: skip the insert-mode run on the same keyed records")
    bench.add_argument("--work-dir", default=None, help="parent of the scratch directory")
    bench.add_argument("--keep", action="store_true", help="keep tables and logs")
    bench.add_argument("--small-file-bytes", type=int, default=None,
                       help="insert mode: table.small_file_bytes of the sink runs (0: no "
                            "write-time file sizing)")
    bench.add_argument("--stages", action="store_true",
                       help="per-stage micro-benchmarks (decode, Arrow build, Spark flush, commit)")
    bench.add_argument("--anchors", action="store_true",
                       help="run on Apache Kafka and measure Apache Iceberg's and Apache Hudi's Kafka "
                            "Connect sinks beside the sink (needs a source checkout, Maven, Java 17)")
    bench.set_defaults(func=_bench)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = args.log_level.upper()
    if level not in LOG_LEVELS:  # a usage error (exit 2, one line), not logging's ValueError
        raise _usage(f"--log-level: unknown level {args.log_level!r}; "
                     f"valid levels: {', '.join(LOG_LEVELS)} (any case)")
    # HUDI_SINK__LOG__FORMAT applies from the first line, also to commands without a config
    # (table, broker); a config file's log.format takes over once it is read.
    configure_logging(level, "json" if os.environ.get("HUDI_SINK__LOG__FORMAT") == "json" else "text")
    set_log_service(args.command)
    try:
        code = int(args.func(args))
    except KeyboardInterrupt:
        code = 0
    except Exception as exc:  # noqa: BLE001 - every failure ends as one clear message and a code
        code = report_failure(exc)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
