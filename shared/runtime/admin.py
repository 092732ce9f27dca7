"""FastAPI admin surface shared by every service: /health, /ready, /metrics, bearer auth.

``/health`` answers whenever the event loop does (no dependency checks: a liveness probe must
not restart a pod because Kafka is down). ``/ready`` lists the reasons it is not ready.

Access to the service routes and the API documentation (``/openapi.json``, ``/docs``,
``/redoc``) — everything but the probes and ``/metrics``:

- ``admin.token`` set: every route needs ``Authorization: Bearer <token>`` (401 without a
  bearer token, 403 with a wrong one), reads included.
- no token (the default): secure by default. Mutating requests (any method but GET, HEAD,
  OPTIONS: force or abort a transaction, replay the deletion DLQ, enqueue orphan deletions)
  are refused with 403 naming ``admin.token`` and ``admin.allow_unauthenticated``; read-only
  GETs stay open, because they show state (transactions, partitions, deletion counters), never
  records or secrets, and an operator needs them to diagnose a sink that was started without
  a token. Anyone who can reach a pod must never be able to change what the sink commits.
- no token and ``admin.allow_unauthenticated: true`` (``hudi-sink dev``, tests): everything
  is open, and a warning says so at start.

The API documentation follows the same rule as a read-only route: with a token it needs the
token (it maps every route an attacker could try), without one it is open like the other
GETs. Whatever the token, requests a browser sent for another web page (a foreign
``Origin``, or a non-loopback ``Host`` on a loopback port) are refused with 403 before any
route runs (``shared.runtime.same_origin``).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Sequence

from fastapi import APIRouter, Depends, FastAPI, Request, params
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel
from starlette.middleware.base import RequestResponseEndpoint

from hudi_sink.shared.runtime.metrics import CONTENT_TYPE, Metrics
from hudi_sink.shared.runtime.same_origin import browser_problem

__all__ = ["create_admin_app", "HealthResponse", "ReadyResponse", "READ_ONLY_METHODS",
           "WRITE_REFUSED_MESSAGE"]

log = logging.getLogger("hudi_sink.admin")

READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that cannot change the sink; the only ones served without a token by default."""

WRITE_REFUSED_MESSAGE = (
    "refused: no admin.token is configured, so requests that change the sink are not accepted "
    "from anyone. Set admin.token (or HUDI_SINK__ADMIN__TOKEN) and send "
    "'Authorization: Bearer <token>', or set admin.allow_unauthenticated: true on a trusted "
    "development machine"
)


class HealthResponse(BaseModel):
    status: str
    service: str


class ReadyResponse(BaseModel):
    ready: bool
    service: str
    reasons: list[str]


class _AuthError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail


def _bearer_dependency(token: str | None, allow_unauthenticated: bool) -> Callable[[Request], None]:
    """The check every service route runs before its handler (see the module docstring)."""
    expected = token.encode() if token else None

    def check(request: Request) -> None:
        if expected is None:
            if allow_unauthenticated or request.method in READ_ONLY_METHODS:
                return
            raise _AuthError(403, WRITE_REFUSED_MESSAGE)
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if not header or scheme.lower() != "bearer" or not given:
            raise _AuthError(401, "missing bearer token")
        if not hmac.compare_digest(given.strip().encode(), expected):
            raise _AuthError(403, "wrong bearer token")

    return check


def create_admin_app(
    service: str,
    *,
    readiness: Callable[[], list[str]],
    metrics: Metrics,
    token: str | None,
    routers: Sequence[APIRouter] = (),
    allow_unauthenticated: bool = False,
    bind_host: str | None = None,
) -> FastAPI:
    """Build a service's admin app; ``readiness`` returns the reasons it is *not* ready.

    ``token`` and ``allow_unauthenticated`` are ``admin.token`` and
    ``admin.allow_unauthenticated``; a caller that does not pass the latter gets the secure
    default (mutations refused without a token). ``bind_host`` is ``admin.host``: bound to a
    loopback address, the app answers only requests for a loopback host name.
    """
    app = FastAPI(title=f"hudi-sink {service}", version="0.1.0",
                  docs_url=None, redoc_url=None, openapi_url=None)  # served below, behind auth
    if not token:
        if allow_unauthenticated:
            log.warning("%s admin: no admin.token and admin.allow_unauthenticated is true: anyone "
                        "who reaches this port can commit, abort, replay and delete", service)
        else:
            log.info("%s admin: no admin.token: read-only routes are open, requests that change "
                     "the sink are refused (403)", service)

    @app.middleware("http")
    async def _browsers(request: Request, call_next: RequestResponseEndpoint) -> Response:
        problem = browser_problem(request.method, request.headers, bind_host=bind_host,
                                  read_only=request.method in READ_ONLY_METHODS)
        if problem is not None:
            return JSONResponse({"detail": problem}, status_code=403)
        return await call_next(request)

    @app.exception_handler(_AuthError)
    async def _auth_error(_: Request, exc: _AuthError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse({"detail": exc.detail}, status_code=exc.status, headers=headers)

    @app.get("/health", response_model=HealthResponse, tags=["probes"])
    async def health() -> HealthResponse:
        return HealthResponse(status="ok", service=service)

    @app.get(
        "/ready",
        response_model=ReadyResponse,
        responses={503: {"model": ReadyResponse}},
        tags=["probes"],
    )
    async def ready() -> JSONResponse:
        reasons = readiness()
        body = ReadyResponse(ready=not reasons, service=service, reasons=reasons)
        return JSONResponse(body.model_dump(), status_code=200 if not reasons else 503)

    @app.get("/metrics", tags=["probes"], response_class=Response)
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    auth = Depends(_bearer_dependency(token, allow_unauthenticated))
    _api_docs(app, auth)
    for router in routers:
        app.include_router(
            router,
            dependencies=[auth],
            responses={401: {"description": "missing token"},
                       403: {"description": "wrong token, or no admin.token configured"}},
        )
    return app


def _api_docs(app: FastAPI, auth: params.Depends) -> None:
    """``/openapi.json``, ``/docs`` and ``/redoc`` behind the same check as the routes."""
    title = app.title

    @app.get("/openapi.json", include_in_schema=False, dependencies=[auth])
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=[auth])
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{title} - docs")

    @app.get("/redoc", include_in_schema=False, dependencies=[auth])
    async def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url="/openapi.json", title=f"{title} - ReDoc")
