"""Which requests a browser may have sent on someone else's behalf: refused by the admin app.

Without a token (``hudi-sink dev``: ``admin.allow_unauthenticated``) anything that can reach
the port can change the sink, and a web page open in the developer's browser can reach
``127.0.0.1``: a ``text/plain`` form POST to ``/transactions/commit`` is a "simple request"
the browser sends without asking first. Two checks close that, for every service and
every route (they cost nothing to a client that is not a browser):

- **Origin.** A browser names the page that made a cross-origin request in ``Origin`` (and
  on every POST); a request whose ``Origin`` is not this server (scheme-less
  ``host:port`` of the ``Host`` header), or is ``null``, is refused. curl, probes,
  Prometheus and the CLI send no ``Origin`` and pass; the OpenAPI page served by the app
  itself is same-origin and passes. A request that changes something and says
  ``Sec-Fetch-Site: cross-site`` (or ``same-site``: another port is another origin) is
  refused too, even without ``Origin``.
- **Host, on a loopback port.** A page can point its own host name at 127.0.0.1 (DNS
  rebinding): its requests are then same-origin by the browser's rules, but carry the
  page's host name. An admin port bound to a loopback address therefore answers only
  requests for a loopback name (``localhost``, ``127.x.x.x``, ``[::1]``). A port bound to
  every interface (pods: ``0.0.0.0``) is reached by Service and pod names, so no Host check.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = ["browser_problem", "is_loopback"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_MUTATING_FETCH_SITES = frozenset({"cross-site", "same-site"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this machine
    only."""
    name = host.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _split_host(host_header: str) -> tuple[str, int | None]:
    """``Host`` header → (host name, port or None); IPv6 in brackets."""
    if host_header.startswith("["):
        name, _, rest = host_header[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        name, _, port = host_header.rpartition(":") if ":" in host_header else (host_header, "", "")
    return name.lower(), int(port) if port.isdigit() else None


def _same_origin(origin: str, host_header: str) -> bool:
    parts = urlsplit(origin)
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return False
    try:
        origin_port = parts.port or _DEFAULT_PORTS[parts.scheme]
    except ValueError:
        return False
    name, port = _split_host(host_header)
    return parts.hostname.lower() == name and origin_port == (port or _DEFAULT_PORTS[parts.scheme])


def browser_problem(method: str, headers: Mapping[str, str], *, bind_host: str | None,
                    read_only: bool) -> str | None:
    """Why this request is refused (403), or None. ``headers`` lower-case names;
    ``read_only``: the method cannot change the sink."""
    host = headers.get("host", "")
    rebound = host and not is_loopback(_split_host(host)[0])  # no Host (HTTP/1.0): no browser
    if bind_host is not None and is_loopback(bind_host) and rebound:
        return (f"refused: Host {host!r} is not a loopback name, and this admin port is bound to "
                f"{bind_host} (a browser page re-pointing its own name here: DNS rebinding). "
                "Use http://127.0.0.1:<port> or http://localhost:<port>")
    origin = headers.get("origin")
    if origin is not None and not _same_origin(origin, host):
        return (f"refused: cross-origin request (Origin {origin!r}, Host {host!r}); the admin "
                "REST takes no requests from web pages of other origins")
    fetch_site = headers.get("sec-fetch-site", "").lower()
    if not read_only and fetch_site in _MUTATING_FETCH_SITES:
        return (f"refused: {method} from another site (Sec-Fetch-Site: {fetch_site}); the admin "
                "REST takes no requests from web pages of other origins")
    return None
