"""Spark Connect with a pre-shared token, as the chart runs it: the server reads the token from
``SPARK_CONNECT_AUTHENTICATE_TOKEN`` (``spark.connect.authenticate.token``) and refuses every
RPC without it; a participant with ``spark.connect_token`` gets through over the server's plain
gRPC (PySpark's ``;token=`` would dial TLS and never connect); one without, or with another
token, is refused.

Each client is its own process (a process keeps one Connect session), driving the
participant's own :class:`SparkWriter`: its warm-up runs real jobs that write Parquet through
the server.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from eventually import eventually

from hudi_sink.cli.broker import free_port

pytestmark = pytest.mark.timeout(300)

TOKEN = "5d2c0f8e9a7b41c3b6e1d04f2a9c8e7b"

_CLIENT = """
import json, sys
from hudi_sink.services.participant.spark_writer import SparkWriter
from hudi_sink.shared.config.settings import SparkConfig
from hudi_sink.shared.storage.fs import LocalFileSystem
master, token, warm_dir = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
writer = SparkWriter(SparkConfig(master=master, connect_token=token), LocalFileSystem())
try:
    writer.start(warm_dir)
    print("WROTE")
except Exception as exc:
    print("REFUSED", exc)
"""


@pytest.fixture
def token_server(tmp_path: Path) -> Iterator[str]:
    spark_home = os.path.dirname(pyspark.__file__)
    port = free_port()
    env = {**os.environ, "SPARK_HOME": spark_home, "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_CONNECT_AUTHENTICATE_TOKEN": TOKEN}
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [os.path.join(spark_home, "bin", "spark-submit"),
         "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
         "--master", "local[1]", "--driver-memory", "512m",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
         "--conf", "spark.ui.enabled=false"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)

    def listening() -> bool:
        assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        eventually(listening, timeout_s=180, what="the Spark Connect server listens")
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _client(master: str, token: str | None, warm_dir: Path) -> str:
    result = subprocess.run([sys.executable, "-c", _CLIENT, master, json.dumps(token), str(warm_dir)],
                            capture_output=True, text=True, timeout=180,
                            env={k: v for k, v in os.environ.items()
                                 if k != "SPARK_CONNECT_AUTHENTICATE_TOKEN"})
    return result.stdout.strip() or result.stderr[-2000:]


def test_only_a_participant_with_the_token_runs_jobs(token_server: str, tmp_path: Path) -> None:
    (tmp_path / "warm").mkdir()
    assert _client(token_server, TOKEN + "\n", tmp_path / "warm") == "WROTE"  # a Secret's newline
    without = _client(token_server, None, tmp_path / "warm")
    assert without.startswith("REFUSED") and "No authentication token provided" in without
    wrong = _client(token_server, "0" * 32, tmp_path / "warm")
    assert wrong.startswith("REFUSED") and "Invalid authentication token" in wrong
