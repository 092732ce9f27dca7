"""The admin surface around the routes (issue 27): the API documentation behind the token, a
token from a Secret file (trailing newline) trimmed, ``HUDI_SINK__ADMIN__TOKEN=null`` and
empty tokens refused naming the key, and requests a browser sent for another web page
(foreign ``Origin``, non-loopback ``Host`` on a loopback port) refused before any route —
the ``hudi-sink dev`` case: a ``text/plain`` POST to ``/transactions/commit``. In process,
on the real coordinator router (a standby: a POST that gets through answers 409)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
import yaml
from test_admin_auth import StandbyCoordinator

from hudi_sink.cli.dev import DEFAULT_DEV_CONFIG, dev_admin
from hudi_sink.cli.main import main
from hudi_sink.services.coordinator.rest import build_router
from hudi_sink.shared.config.settings import SinkConfig, config_from_mapping
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.runtime.admin import create_admin_app
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.runtime.same_origin import browser_problem, is_loopback

TOKEN = "docs-s3cret"
DOCS = ("/openapi.json", "/docs", "/redoc")


def _call(config: SinkConfig, method: str, path: str, headers: dict[str, str] | None = None,
          base_url: str = "http://127.0.0.1:8080", content: bytes | None = None,
          coordinator: StandbyCoordinator | None = None) -> httpx.Response:
    app = create_admin_app("unit", readiness=list, metrics=Metrics("unit"), token=config.admin.token,
                           allow_unauthenticated=config.admin.allow_unauthenticated,
                           bind_host=config.admin.host,
                           routers=[build_router(coordinator or StandbyCoordinator())])

    async def call() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url) as http:
            return await http.request(method, path, headers=headers, content=content)

    return asyncio.run(call())


def _config(**admin: object) -> SinkConfig:
    return config_from_mapping({"admin": {"host": "0.0.0.0", **admin}}, environ={})


def _dev() -> SinkConfig:
    return config_from_mapping({**DEFAULT_DEV_CONFIG, "admin": dev_admin(DEFAULT_DEV_CONFIG["admin"])},
                               environ={})


# --- the API documentation ------------------------------------------------------------------
@pytest.mark.parametrize("path", DOCS)
def test_api_docs_need_the_token_when_one_is_set(path: str) -> None:
    config = _config(token=TOKEN)
    assert _call(config, "GET", path).status_code == 401
    assert _call(config, "GET", path, {"Authorization": "Bearer wrong"}).status_code == 403
    good = _call(config, "GET", path, {"Authorization": f"Bearer {TOKEN}"})
    assert good.status_code == 200
    if path == "/openapi.json":
        assert "/transactions/commit" in good.json()["paths"]
        assert not set(DOCS) & set(good.json()["paths"])  # the pages are not API routes
    else:
        assert "/openapi.json" in good.text


@pytest.mark.parametrize("path", DOCS)
def test_api_docs_are_open_like_other_reads_without_a_token(path: str) -> None:
    assert _call(_config(), "GET", path).status_code == 200


# --- the token's value ----------------------------------------------------------------------
@pytest.mark.parametrize("written", [f"{TOKEN}\n", f"{TOKEN}\r\n", f"  {TOKEN}\t\n"])
def test_a_token_from_a_secret_file_is_trimmed_and_works(tmp_path: Path, written: str) -> None:
    from_env = config_from_mapping({}, environ={"HUDI_SINK__ADMIN__TOKEN": written})
    path = tmp_path / "sink.yaml"
    path.write_text(yaml.safe_dump({"admin": {"token": written}}))
    from_file = config_from_mapping(yaml.safe_load(path.read_text()), environ={})
    for config in (from_env, from_file):
        assert config.admin.token == TOKEN
        assert _call(config, "POST", "/transactions/commit",
                     {"Authorization": f"Bearer {TOKEN}"}).status_code == 409  # handler ran


@pytest.mark.parametrize("value", ["null", " null\n", "", "\n", "   "])
def test_null_or_empty_token_from_the_environment_is_refused_naming_the_key(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping({}, environ={"HUDI_SINK__ADMIN__TOKEN": value})
    assert info.value.key == "admin.token"
    assert "HUDI_SINK__ADMIN__TOKEN" in str(info.value)


def test_null_token_exits_2_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sink.yaml"
    path.write_text("name: orders\n")
    monkeypatch.setenv("HUDI_SINK__ADMIN__TOKEN", "null")
    assert main(["config", "check", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "admin.token" in err and "HUDI_SINK__ADMIN__TOKEN is 'null'" in err


def test_a_null_token_in_the_file_still_means_none() -> None:
    """The documented default (``token: null``) is a file's way to say "no token"."""
    assert config_from_mapping({"admin": {"token": None}}, environ={}).admin.token is None


# --- requests a browser sent for another page ------------------------------------------------
def test_dev_refuses_a_cross_origin_text_plain_commit() -> None:
    dev = _dev()
    assert dev.admin.allow_unauthenticated and dev.admin.host == "127.0.0.1"
    coordinator = StandbyCoordinator(leader=True)
    forged = _call(dev, "POST", "/transactions/commit", coordinator=coordinator,
                   headers={"Origin": "http://evil.example", "Content-Type": "text/plain"},
                   content=b"x")
    assert forged.status_code == 403 and "cross-origin" in forged.json()["detail"]
    for origin in ("null", "http://127.0.0.1:9999", "http://localhost:8080", "file://"):
        assert _call(dev, "POST", "/transactions/commit", {"Origin": origin},
                     coordinator=coordinator).status_code == 403, origin
    cross_site = _call(dev, "POST", "/transactions/commit", {"Sec-Fetch-Site": "cross-site"},
                       coordinator=coordinator)
    assert cross_site.status_code == 403
    assert coordinator.commands == []  # refused before the handler
    # curl (no Origin) and the page the app serves itself (same origin) get through.
    assert _call(dev, "POST", "/transactions/commit", coordinator=coordinator).status_code == 202
    same = _call(dev, "POST", "/transactions/commit", {"Origin": "http://127.0.0.1:8080",
                                                       "Sec-Fetch-Site": "same-origin"},
                 coordinator=coordinator)
    assert same.status_code == 202 and coordinator.commands == ["commit", "commit"]


def test_a_loopback_port_answers_only_loopback_host_names() -> None:
    """DNS rebinding: evil.example re-pointed at 127.0.0.1 is same-origin to the browser."""
    dev = _dev()
    rebound = _call(dev, "POST", "/transactions/commit", {"Origin": "http://evil.example:8080"},
                    base_url="http://evil.example:8080")
    assert rebound.status_code == 403 and "loopback" in rebound.json()["detail"]
    assert _call(dev, "GET", "/health", base_url="http://evil.example:8080").status_code == 403
    for base in ("http://localhost:8080", "http://127.0.0.1:8080", "http://[::1]:8080"):
        assert _call(dev, "GET", "/health", base_url=base).status_code == 200, base


def test_a_port_on_every_interface_answers_service_names() -> None:
    config = _config(token=TOKEN)
    response = _call(config, "GET", "/health", base_url="http://hudi-sink-coordinator:8080")
    assert response.status_code == 200
    cross = _call(config, "POST", "/transactions/commit",
                  {"Origin": "http://evil.example", "Authorization": f"Bearer {TOKEN}"},
                  base_url="http://hudi-sink-coordinator:8080")
    assert cross.status_code == 403


def test_browser_problem_rules() -> None:
    def problem(headers: dict[str, str], method: str = "POST", bind: str | None = None) -> str | None:
        return browser_problem(method, headers, bind_host=bind, read_only=method == "GET")

    assert problem({"host": "a:8080"}) is None
    assert problem({"host": "a:8080", "origin": "http://a:8080"}) is None
    assert problem({"host": "a", "origin": "http://a"}) is None  # default port both sides
    assert problem({"host": "a:443", "origin": "https://a"}) is None
    assert problem({"host": "a:8080", "origin": "http://b:8080"}) is not None
    assert problem({"host": "a:8080", "origin": "http://a:8080:x"}) is not None  # malformed
    assert problem({"host": "a:8080", "origin": "file://"}) is not None
    assert problem({"host": "a:8080", "sec-fetch-site": "cross-site"}, "GET") is None  # a link
    assert problem({"host": "a:8080", "sec-fetch-site": "same-site"}) is not None
    assert problem({"host": "[::1]:8080", "origin": "http://[::1]:8080"}, bind="::1") is None
    assert problem({"host": "a:8080"}, bind="127.0.0.1") is not None
    assert problem({}, bind="127.0.0.1") is None  # HTTP/1.0 without Host: not a browser
    assert [is_loopback(h) for h in ("localhost", "127.0.0.2", "[::1]", "::1", "app.localhost",
                                     "0.0.0.0", "10.0.0.1", "example")] == [True] * 5 + [False] * 3
