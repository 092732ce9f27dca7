"""The Spark Connect URL a participant dials: ``spark.master`` plus, with
``spark.connect_token``, the token as an ``authorization`` parameter.

Why not PySpark's ``;token=``: with a token PySpark dials TLS to any host but ``localhost``,
and the Spark Connect server (4.x) serves plain gRPC only — the handshake fails
(``WRONG_VERSION_NUMBER``). Every other ``;key=value`` of the URL is sent as gRPC metadata on
each RPC, and the server's pre-shared-key check (``spark.connect.authenticate.token``) reads
exactly ``authorization: Bearer <token>``. The token never enters ``spark.master``, so the
master can be logged and shown as it is.
"""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["connect_url"]


def connect_url(master: str, token: str | None) -> str:
    """``master`` with the token appended as a URL parameter (percent-encoded: PySpark splits
    parameters on ``;`` and ``=`` and unquotes each value). A token read from a Secret file
    with a trailing newline is the same token."""
    if token is None:
        return master
    separator = ";" if "/;" in master else ("" if master.endswith("/") else "/") + ";"
    return f"{master}{separator}authorization={quote('Bearer ' + token.strip(), safe='')}"
