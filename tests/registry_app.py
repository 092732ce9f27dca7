"""A small local schema registry for tests: the documented Confluent endpoint
``GET /schemas/ids/{id}`` → ``{"schema": "<Avro schema JSON text>"}`` (404 with error code 40403
for an unknown id) and ``GET /subjects/{subject}/versions/latest`` (the subject's schema is the
id given for it in ``subjects``), optional HTTP basic auth, a switch that makes it answer 503 as a
registry outage would, redirects (``redirects``: path → ``Location``) and padding that makes an
answer as large as a test needs. No schema registry ships in the package indexes this project can reach,
so the tests serve the endpoint themselves; the framing of values is Confluent's documented
wire format (magic byte 0, 4-byte big-endian id, Avro binary body), encoded with fastavro.
``RawServer`` answers with scripted bytes instead, for replies that are not well-formed HTTP
or that trickle or stall."""

from __future__ import annotations

import base64
import io
import json
import socket
import ssl
import struct
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fastavro import parse_schema, schemaless_writer


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for ``127.0.0.1`` and its key (openssl), for a TLS registry."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def confluent_avro(schema_id: int, schema: dict[str, Any], datum: dict[str, Any]) -> bytes:
    """One value in the Confluent wire format, written by fastavro (independent of the sink)."""
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(schema), datum)
    return struct.pack(">bI", 0, schema_id) + body.getvalue()


class LocalRegistry:
    """``with LocalRegistry({1: schema}) as registry:`` serves on ``registry.url``."""

    def __init__(self, schemas: dict[int, dict[str, Any]], *, user: str | None = None,
                 password: str | None = None, subjects: dict[str, int] | None = None,
                 tls: tuple[str, str] | None = None) -> None:
        """``tls``: (certificate file, key file) to serve https."""
        self.schemas = schemas
        self.subjects = subjects or {}
        self.down = False
        self.requests: list[str] = []
        self.authorizations: list[str | None] = []
        """The ``Authorization`` header of every request (``None``: none was sent)."""
        self.redirects: dict[str, str] = {}
        """Request path → the URL a 302 answer sends the client to."""
        self.padding = 0
        """Characters of filler added to every schema answer."""
        expected = (None if user is None
                    else "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def _answer(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                registry.requests.append(self.path)
                registry.authorizations.append(self.headers.get("Authorization"))
                if self.path in registry.redirects:
                    self.send_response(302)
                    self.send_header("Location", registry.redirects[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                if registry.down:
                    return self._answer(503, {"error_code": 50301, "message": "unavailable"})
                if expected is not None and self.headers.get("Authorization") != expected:
                    return self._answer(401, {"error_code": 40101, "message": "unauthorized"})
                parts = self.path.strip("/").split("/")
                if len(parts) == 3 and parts[:2] == ["schemas", "ids"] and parts[2].isdigit():
                    schema = registry.schemas.get(int(parts[2]))
                    if schema is None:
                        return self._answer(404, {"error_code": 40403, "message": "Schema not found"})
                    padding = {"pad": "x" * registry.padding} if registry.padding else {}
                    return self._answer(200, {"schema": json.dumps(schema), **padding})
                if (len(parts) == 4 and parts[0] == "subjects" and parts[2:] == ["versions", "latest"]
                        and parts[1] in registry.subjects):
                    schema_id = registry.subjects[parts[1]]
                    return self._answer(200, {"subject": parts[1], "version": 1, "id": schema_id,
                                              "schema": json.dumps(registry.schemas[schema_id])})
                return self._answer(404, {"error_code": 40401, "message": "Subject not found"})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> LocalRegistry:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


Step = bytes | threading.Event | float
"""What :class:`RawServer` does next on a connection: send bytes, wait for an event, pause."""


class RawServer:
    """A TCP server answering each connection's request with ``steps`` exactly as scripted,
    then closing it: for replies no HTTP server would send (a bad status line, a body cut
    short, an endless header line) and for a reply that trickles or stalls. A ``float`` step
    is the stand-in's own slowness between bytes (a registry or proxy that is slow), an
    ``Event`` step holds the reply until the test sets it (set by ``__exit__`` at the latest).
    ``requests`` counts the requests read."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.requests = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._closed = threading.Event()

    def __enter__(self) -> RawServer:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._closed.set()
        for step in self.steps:
            if isinstance(step, threading.Event):
                step.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                data = conn.recv(65536)
                if not data:
                    return
                request += data
            self.requests += 1
            try:
                for step in self.steps:
                    if isinstance(step, bytes):
                        conn.sendall(step)
                    elif isinstance(step, threading.Event):
                        step.wait()
                    elif self._closed.wait(step):
                        return
            except OSError:
                return  # the client gave up
