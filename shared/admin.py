"""FastAPI admin surface shared by every service: /health, /ready, /metrics, bearer auth.

``/health`` answers whenever the event loop does (no dependency checks: a liveness probe must
not restart a pod because Kafka is down). ``/ready`` lists the reasons it is not ready.
Every other route needs ``Authorization: Bearer <admin.token>`` when a token is configured.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from shared.metrics import CONTENT_TYPE, Metrics

__all__ = ["create_admin_app", "HealthResponse", "ReadyResponse"]


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


def _bearer_dependency(token: str | None) -> Callable[[Request], None]:
    expected = token.encode() if token else None

    def check(request: Request) -> None:
        if expected is None:
            return
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
) -> FastAPI:
    """Build a service's admin app; ``readiness`` returns the reasons it is *not* ready."""
    app = FastAPI(title=f"hudi-sink {service}", version="0.1.0")

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

    auth = Depends(_bearer_dependency(token))
    for router in routers:
        app.include_router(
            router,
            dependencies=[auth],
            responses={401: {"description": "missing token"}, 403: {"description": "wrong token"}},
        )
    return app
