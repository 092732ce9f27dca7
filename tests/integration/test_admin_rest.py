"""Admin REST through the contract: coordinator, participant and deleter processes with
``admin.token`` set (from ``HUDI_SINK__ADMIN__TOKEN`` ending in a newline, as a Secret file
often does: trimmed) and ``transaction.interval_ms`` 600000, so only a forced commit can land
the 1,000 records in time. Then schemathesis fuzzes each service's OpenAPI (no 5xx,
responses match the schema)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from eventually import eventually
from pipeline import Pipeline, Service

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(600)

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Sink:
    def __init__(self, pipeline: Pipeline, services: dict[str, Service]) -> None:
        self.pipeline = pipeline
        self.services = services


@pytest.fixture(scope="module")
def sink(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sink]:
    tmp = tmp_path_factory.mktemp("rest")
    pipeline = Pipeline(
        tmp, f"rest{uuid.uuid4().hex[:8]}", broker.bootstrap,
        overrides={"admin": {"host": "127.0.0.1", "port": 0},
                   "transaction": {"interval_ms": 600000, "write_status_timeout_ms": 60000,
                                   "flush_records": 100000, "resend_interval_ms": 1000}},
        # As a Kubernetes Secret written with `echo` arrives: with a trailing newline.
        env={"HUDI_SINK__ADMIN__TOKEN": f"{TOKEN}\n"},
    )
    pipeline.produce(0)  # creates the data topic
    services = {role: pipeline.start(role) for role in ("coordinator", "participant", "deleter")}
    try:
        for service in services.values():
            pipeline.wait_ready(service, timeout_s=180)
        yield Sink(pipeline, services)
    finally:
        pipeline.stop_all()
    for role, service in services.items():
        assert service.process.returncode == 0, f"{role} did not stop cleanly:\n{service.log_tail()}"


def test_forced_commit_with_token_lands_all_offsets(sink: Sink) -> None:
    pipeline = sink.pipeline
    coordinator = sink.services["coordinator"].url
    participant = sink.services["participant"].url
    for service in sink.services.values():
        assert httpx.get(f"{service.url}/health").status_code == 200
        metrics = httpx.get(f"{service.url}/metrics")
        assert metrics.status_code == 200 and "hudi_sink_" in metrics.text

    eventually(lambda: httpx.get(f"{coordinator}/transactions/current", headers=AUTH)
               .json()["phase"] == "started", 60, "an open transaction")
    pipeline.produce(1_000)  # and force the commit at once: END drains what was fetched
    before = set(pipeline.completed_commits())

    assert httpx.post(f"{coordinator}/transactions/commit").status_code == 401
    assert httpx.post(f"{coordinator}/transactions/commit",
                      headers={"Authorization": "Bearer wrong"}).status_code == 403
    assert httpx.get(f"{participant}/partitions").status_code == 401
    response = httpx.post(f"{coordinator}/transactions/commit", headers=AUTH)
    assert response.status_code == 202
    forced = response.json()["commit_time"]

    eventually(lambda: pipeline.latest_offsets() == {0: 250, 1: 250, 2: 250, 3: 250}, 20,
               "a commit holding all 1,000 offsets", every_s=0.2)
    new_commits = set(pipeline.completed_commits()) - before
    assert forced in new_commits
    assert pipeline.read().num_rows == 1_000

    history = httpx.get(f"{coordinator}/transactions", params={"limit": 10}, headers=AUTH).json()
    entry = next(h for h in history if h["commit_time"] == forced)
    assert entry["state"] == "committed" and entry["records"] == 1_000
    assert history == sorted(history, key=lambda h: h["commit_time"], reverse=True)

    partitions = httpx.get(f"{participant}/partitions", headers=AUTH).json()
    assert sorted(p["partition"] for p in partitions) == [0, 1, 2, 3]
    stats = httpx.get(f"{sink.services['deleter'].url}/deletions/stats", headers=AUTH)
    assert stats.status_code == 200


def test_forced_abort_rolls_back_and_standby_refuses_posts(sink: Sink) -> None:
    pipeline = sink.pipeline
    coordinator = sink.services["coordinator"].url
    current = eventually(lambda: (c := httpx.get(f"{coordinator}/transactions/current",
                                                 headers=AUTH).json())["phase"] == "started" and c,
                         30, "an open transaction")
    response = httpx.post(f"{coordinator}/transactions/abort", headers=AUTH)
    assert response.status_code == 202
    aborted = current["commit_time"]

    def rolled_back() -> bool:
        history = httpx.get(f"{coordinator}/transactions", headers=AUTH).json()
        return any(h["commit_time"] == aborted and h["state"] == "aborted" for h in history)

    eventually(rolled_back, 20, "the aborted transaction in GET /transactions", every_s=0.2)
    assert aborted not in pipeline.completed_commits()
    assert not (pipeline.timeline / f"{aborted}.inflight").exists()

    standby = pipeline.start("coordinator")
    pipeline.wait_ready(standby)
    refused = httpx.post(f"{standby.url}/transactions/commit", headers=AUTH)
    assert refused.status_code == 409
    assert sink.services["coordinator"].url.rsplit(":", 1)[-1] in refused.json()["detail"] or \
        refused.json()["leader"]
    assert httpx.get(f"{standby.url}/transactions/current", headers=AUTH).json()["role"] == "standby"
    pipeline.kill(standby, sig=15)
    assert standby.process.returncode == 0


SCHEMATHESIS = str(Path(sys.executable).with_name("st"))


@pytest.mark.long  # ~30 s a role; the routes' contracts are unit-tested (test_admin_auth etc.)
@pytest.mark.parametrize("role", ["coordinator", "participant", "deleter"])
def test_openapi_fuzzing_finds_no_server_errors(sink: Sink, role: str, tmp_path: Path) -> None:
    """schemathesis against the live service: no 5xx, responses match the OpenAPI schema.
    Abort/commit POSTs run too: the service must answer them sanely at any moment. It runs
    in a temporary directory: its ``.schemathesis/`` cache must not land in the checkout."""
    url = sink.services[role].url
    result = subprocess.run(
        [SCHEMATHESIS, "run", f"{url}/openapi.json", "--header", f"Authorization: Bearer {TOKEN}",
         "--max-examples", "10", "--checks",
         "not_a_server_error,status_code_conformance,content_type_conformance,"
         "response_schema_conformance",
         "--request-timeout", "30", "--max-time", "30", "--workers", "1"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_openapi_requires_token_where_it_should(sink: Sink) -> None:
    for role, paths in {"coordinator": ["/transactions", "/transactions/current"],
                        "participant": ["/partitions"],
                        "deleter": ["/deletions/stats"]}.items():
        url = sink.services[role].url
        for path in paths:
            assert httpx.get(f"{url}{path}").status_code == 401
            assert httpx.get(f"{url}{path}", headers={"Authorization": "Bearer no"}).status_code == 403
        for open_path in ("/health", "/ready", "/metrics"):
            assert httpx.get(f"{url}{open_path}").status_code == 200
        for docs in ("/openapi.json", "/docs", "/redoc"):  # they map every route: token too
            assert httpx.get(f"{url}{docs}").status_code == 401
            assert httpx.get(f"{url}{docs}", headers={"Authorization": "Bearer no"}).status_code == 403
            assert httpx.get(f"{url}{docs}", headers=AUTH).status_code == 200
