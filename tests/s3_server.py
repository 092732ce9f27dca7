"""A real S3 API server for the tests: moto in server mode, on a free port, in this process.

``MotoS3`` starts one ``ThreadedMotoServer``; tests take a bucket each (``new_bucket``), so
they never see each other's objects. ``S3Proxy`` is an HTTP proxy in front of moto whose
``intercept`` answers chosen requests itself (an S3 error, or no answer at all);
``IgnoringIfNoneMatch`` is one: a store without conditional writes, dropping the
``If-None-Match`` header as an old S3-compatible store or a careless proxy would (the
start-up probe must refuse it).
"""

from __future__ import annotations

import http.client
import logging
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["MotoS3", "S3Proxy", "ProxiedRequest", "IgnoringIfNoneMatch", "DROP", "s3_error",
           "ACCESS_KEY", "SECRET_KEY", "REGION"]

ACCESS_KEY = "testing-access-key"
SECRET_KEY = "testing-secret-key"
REGION = "us-east-1"


class MotoS3:
    """moto's S3 server on 127.0.0.1 (a free port), started and stopped by the caller."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""

    def start(self) -> MotoS3:
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.stop()

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def new_bucket(self) -> str:
        """A fresh bucket (S3 names: lower case, at least 3 characters)."""
        name = f"b{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def storage_options(self, endpoint: str | None = None) -> dict[str, str]:
        """``table.storage_options`` (and hudi-rs options) for this server."""
        return {
            "aws_access_key_id": ACCESS_KEY,
            "aws_secret_access_key": SECRET_KEY,
            "aws_region": REGION,
            "aws_endpoint_url": endpoint or self.endpoint,
            "aws_allow_http": "true",
        }

    def environment(self, endpoint: str | None = None) -> dict[str, str]:
        """The standard AWS variables pointing at this server (AWS_ACCESS_KEY_ID …)."""
        return {key.upper(): value for key, value in self.storage_options(endpoint).items()}

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key under ``prefix`` (listed through boto3, not through the code under test)."""
        found: list[str] = []
        paginator = self.client().get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            found += [item["Key"] for item in page.get("Contents", [])]
        return found


@dataclass
class ProxiedRequest:
    """One request through :class:`S3Proxy`; ``forward`` sends it (or a variant) upstream."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes | None
    forward: Callable[..., tuple[int, list[tuple[str, str]], bytes]]

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


DROP = "drop"
"""An intercept's answer meaning: close the connection without any response (a lost reply)."""

Reply = tuple[int, list[tuple[str, str]], bytes]
Intercept = Callable[[ProxiedRequest], "Reply | str | None"]


def s3_error(status: int, code: str, message: str) -> Reply:
    """An S3 error response as the service spells it (XML body)."""
    body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error>").encode()
    return status, [("Content-Type", "application/xml")], body


class S3Proxy:
    """An S3 endpoint in front of ``upstream`` (moto) that forwards every request, except
    what ``intercept`` answers itself: a :data:`Reply`, or :data:`DROP` to close the
    connection unanswered (after forwarding, if the intercept called ``forward``). It is how
    the tests make S3 behaviours moto does not produce (409 conflicts, lost replies, a copy
    refused for its size) happen on the wire, so the code under test sees them through its
    real client."""

    def __init__(self, upstream: str, intercept: Intercept | None = None) -> None:
        target = upstream.removeprefix("http://")
        host, port = target.rsplit(":", 1)
        self.intercept = intercept
        proxy = self

        def forward(method: str, path: str, headers: dict[str, str], body: bytes | None
                    ) -> Reply:
            connection = http.client.HTTPConnection(host, int(port), timeout=30)
            sent = {k: v for k, v in headers.items() if k.lower() != "content-length"}
            try:
                connection.request(method, path, body=body, headers=sent)
                response = connection.getresponse()
                return response.status, response.getheaders(), response.read()
            finally:
                connection.close()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                request = ProxiedRequest(
                    self.command, self.path, headers, body,
                    lambda m=self.command, p=self.path, h=headers, b=body: forward(m, p, h, b))
                answer = proxy.intercept(request) if proxy.intercept is not None else None
                if answer == DROP:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                status, response_headers, data = (request.forward() if answer is None
                                                  else answer)
                self.send_response(status)
                length = str(len(data))
                for key, value in response_headers:
                    if key.lower() == "content-length" and self.command == "HEAD":
                        length = value  # a HEAD tells the object's size, with no body
                    elif key.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", length)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> S3Proxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class IgnoringIfNoneMatch(S3Proxy):
    """An S3 endpoint that forwards everything to ``upstream`` except ``If-None-Match``."""

    def __init__(self, upstream: str) -> None:
        def drop_header(request: ProxiedRequest) -> Reply:
            headers = {k: v for k, v in request.headers.items() if k.lower() != "if-none-match"}
            return request.forward(request.method, request.path, headers, request.body)

        super().__init__(upstream, drop_header)
