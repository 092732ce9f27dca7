"""Shared pytest fixtures.

One embedded tansu broker serves the whole session: it starts in ~10 ms but every test
uses its own topic names (``unique_name``), so tests never see each other's data and the
order of tests does not matter. Tests that need Apache Kafka itself (marker ``kafka``) ask for
``kafka_broker``: one KRaft node for the session, started the first time a test asks.
``HUDI_SINK_TEST_BROKER=kafka`` makes ``broker`` that Kafka node too, so the whole suite can
be pointed at real Kafka.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import spark_cds
from kafka_cluster import KafkaCluster
from s3_server import MotoS3

from hudi_sink.cli.broker import EmbeddedBroker

TEST_BROKERS = ("embedded", "kafka")


TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
"""Every JVM a test starts (the services' Spark drivers, Apache Kafka, Hudi's Java reader)
compiles with C1 only. Why: a test's JVM lives seconds to a minute on small data, and C2's
compiler threads cost more CPU than its faster code saves: measured with a cgroup's CPU
counter, ``test_spark_writer.py`` 17.5/21.6 -> 11.5/15.8 CPU-s. The suite is CPU-bound on 2
cores, so CPU saved is wall time saved. Product runs keep the JVM's defaults; a value set
by the caller wins."""


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("JAVA_TOOL_OPTIONS", TEST_JVM_OPTIONS)
    if "SPARK_SUBMIT_OPTS" not in os.environ:  # workers inherit the controller's value
        os.environ["SPARK_SUBMIT_OPTS"] = spark_cds.driver_options()
    config.addinivalue_line(
        "markers", "kafka: runs against Apache Kafka (KRaft, from Maven Central), not the "
        "embedded broker")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: absent with -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``-n N`` without ``--dist`` (or ``--dist load``): test by test, whole files only where
    they share a fixture (``tests/worker_scheduling.py``); other ``--dist`` modes as xdist has
    them."""
    if config.getoption("dist") != "load":
        return None
    from worker_scheduling import PerTestScheduling

    return PerTestScheduling(config, log)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Apache Kafka, one KRaft node (broker + controller), for the session; its log and data
    are kept in the pytest temp dir. Same ``bootstrap`` as the embedded broker."""
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka"), nodes=1).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedBroker | KafkaCluster]:
    """A running broker for the session; its log is kept in the pytest temp dir. The embedded
    broker, or the session's Kafka node when ``HUDI_SINK_TEST_BROKER=kafka``."""
    kind = os.environ.get("HUDI_SINK_TEST_BROKER", "embedded")
    if kind not in TEST_BROKERS:
        raise pytest.UsageError(f"HUDI_SINK_TEST_BROKER={kind!r}: expected one of {TEST_BROKERS}")
    if kind == "kafka":
        yield request.getfixturevalue("kafka_broker")
        return
    log_path = tmp_path_factory.mktemp("tansu") / "broker.log"
    embedded = EmbeddedBroker(log_path=log_path)
    embedded.start()
    try:
        yield embedded
    finally:
        embedded.stop()


@pytest.fixture
def unique_name() -> str:
    """A short name unique to this test (``t`` + 8 hex), to build topic and sink names."""
    return f"t{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    """moto's S3 API server for the session (tests take a bucket each: ``s3_bucket``)."""
    server = MotoS3().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(moto_s3: MotoS3) -> str:
    """A fresh bucket on the session's S3 server."""
    return moto_s3.new_bucket()
