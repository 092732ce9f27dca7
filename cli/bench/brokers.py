"""The broker a bench runs on: the embedded development broker, or Apache Kafka for anchors.

The anchors are Kafka Connect sinks, and Connect needs what the development broker lacks
(Iceberg's sink reads its control topic ``read_committed`` behind transactional producers and
asks the group coordinator who holds partition 0). So with ``--anchors`` the whole bench —
baselines, the sink's runs and the anchors — runs on one Apache Kafka 4.3.1 node in KRaft
mode: every figure from the same broker. It is the node the tests start
(``tests/kafka_cluster.py``, jars from ``tests/java/kafka`` via ``scripts/resolve-java.sh``),
loaded from the source checkout like the anchors' poms. If it cannot start, the bench runs on
the embedded broker as without ``--anchors`` and the anchors report why they did not run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hudi_sink.cli.bench.connect import ROOT
from hudi_sink.cli.broker import EmbeddedBroker

__all__ = ["BenchBroker", "bench_broker"]

log = logging.getLogger("hudi_sink.bench")

EMBEDDED = "embedded development broker (hudi-sink broker)"


@dataclass(frozen=True)
class BenchBroker:
    bootstrap: str
    pid: int | None
    """The broker process, for its CPU per record."""
    name: str
    unavailable: str | None = None
    """Why Apache Kafka was asked for and not started (then this is the embedded broker)."""


def _kafka_cluster_module() -> Any:
    """tests/kafka_cluster.py of the checkout, imported by path (it is no package module)."""
    path = ROOT / "tests" / "kafka_cluster.py"
    if not path.is_file():
        raise RuntimeError(f"needs the source checkout ({path} not found)")
    name = "hudi_sink_bench_kafka_cluster"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


def _start_kafka(directory: Path) -> Any:
    cluster = _kafka_cluster_module().KafkaCluster(directory, nodes=1, heap_mb=768)
    return cluster.start()


@asynccontextmanager
async def bench_broker(kafka: bool, work: Path) -> AsyncIterator[BenchBroker]:
    """Apache Kafka (one KRaft node) when ``kafka``, else the embedded broker; stopped on exit."""
    unavailable = None
    if kafka:
        try:
            cluster = await asyncio.to_thread(_start_kafka, work / "kafka")
        except Exception as exc:  # noqa: BLE001 - any failure to start it falls back, with its reason
            unavailable = f"Apache Kafka did not start: {type(exc).__name__}: {str(exc)[:1500]}"
            log.warning("%s; running on the embedded broker", unavailable)
        else:
            module = sys.modules["hudi_sink_bench_kafka_cluster"]
            try:
                process = cluster.nodes[0].process
                yield BenchBroker(cluster.bootstrap, process.pid if process else None,
                                  f"Apache Kafka {module.KAFKA_VERSION} (KRaft, 1 node)")
            finally:
                await asyncio.to_thread(cluster.stop)
            return
    with EmbeddedBroker(log_path=work / "broker.log") as broker:
        yield BenchBroker(broker.bootstrap, broker.pid, EMBEDDED, unavailable)
