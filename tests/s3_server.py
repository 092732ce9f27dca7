"""A real S3 API server for the tests: moto in server mode, on a free port, in this process.

``MotoS3`` starts one ``ThreadedMotoServer``; tests take a bucket each (``new_bucket``), so
they never see each other's objects. ``IgnoringIfNoneMatch`` is a store without conditional
writes: an HTTP proxy in front of moto that drops the ``If-None-Match`` header, as an old
S3-compatible store or a careless proxy would (the start-up probe must refuse it).
"""

from __future__ import annotations

import http.client
import logging
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["MotoS3", "IgnoringIfNoneMatch", "ACCESS_KEY", "SECRET_KEY", "REGION"]

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


class IgnoringIfNoneMatch:
    """An S3 endpoint that forwards everything to ``upstream`` except ``If-None-Match``."""

    def __init__(self, upstream: str) -> None:
        target = upstream.removeprefix("http://")
        host, port = target.rsplit(":", 1)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("if-none-match", "host")}
                connection = http.client.HTTPConnection(host, int(port), timeout=30)
                try:
                    connection.request(self.command, self.path, body=body, headers=headers)
                    response = connection.getresponse()
                    data = response.read()
                finally:
                    connection.close()
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> IgnoringIfNoneMatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
