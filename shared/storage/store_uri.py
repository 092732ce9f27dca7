"""Object-store locations and options: ``scheme://bucket/prefix`` parsed, and
``table.storage_options`` split into what ``object_store`` takes as store config and as HTTP
client options (:mod:`shared.storage.object_store` opens the store with them).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from obstore.store import from_url

from hudi_sink.shared.storage.credentials import credential_source, resolve_options

__all__ = [
    "OBJECT_STORE_SCHEMES",
    "StoreLocation",
    "is_object_store_uri",
    "open_store",
    "parse_store_uri",
    "split_storage_options",
    "reader_storage_options",
]

_SLASHES = re.compile(r"/{2,}")

log = logging.getLogger("hudi_sink.storage")
_LOGGED: set[tuple[str, str]] = set()
"""(root, source) already logged: a service opens its table's store more than once, and the
start-up line says once where its credentials come from."""

OBJECT_STORE_SCHEMES = ("s3", "gs", "az", "abfs", "abfss")
"""Schemes served by ``shared.storage.object_store.ObjectStoreFileSystem`` (only ``s3`` is tested)."""

_OPTION_PREFIX = {"s3": "aws_", "gs": "google_", "az": "azure_", "abfs": "azure_", "abfss": "azure_"}
_ENV_PREFIX = {"s3": "AWS_", "gs": "GOOGLE_", "az": "AZURE_", "abfs": "AZURE_", "abfss": "AZURE_"}

# object_store's HTTP client keys (ClientConfigKey): passed as client options, not store config
# (the store config refuses them), with or without the scheme's prefix (``aws_allow_http``).
_CLIENT_KEYS = frozenset({
    "allow_http", "allow_invalid_certificates", "connect_timeout", "default_content_type",
    "http1_only", "http2_only", "http2_keep_alive_interval", "http2_keep_alive_timeout",
    "http2_keep_alive_while_idle", "http2_max_frame_size", "pool_idle_timeout",
    "pool_max_idle_per_host", "proxy_url", "proxy_ca_certificate", "proxy_excludes",
    "randomize_addresses", "timeout", "user_agent",
})


@dataclass(frozen=True)
class StoreLocation:
    """``scheme://bucket/prefix`` split up; ``root`` is ``scheme://bucket``."""

    scheme: str
    bucket: str
    prefix: str

    @property
    def root(self) -> str:
        return f"{self.scheme}://{self.bucket}"


def is_object_store_uri(path: str) -> bool:
    return "://" in path and path.split("://", 1)[0].lower() in OBJECT_STORE_SCHEMES


def parse_store_uri(uri: str) -> StoreLocation:
    """ValueError unless ``uri`` is ``scheme://bucket[/prefix]`` with a known scheme."""
    if "://" not in uri:
        raise ValueError(f"not an object-store URI: {uri!r}")
    scheme, rest = uri.split("://", 1)
    scheme = scheme.lower()
    if scheme not in OBJECT_STORE_SCHEMES:
        raise ValueError(f"unsupported storage scheme {scheme!r} (supported: file://, "
                         f"{', '.join(s + '://' for s in OBJECT_STORE_SCHEMES)})")
    bucket, _, prefix = rest.partition("/")
    if not bucket or "\x00" in uri or "\\" in bucket:
        raise ValueError(f"object-store URI needs a bucket: {uri!r}")
    prefix = _SLASHES.sub("/", prefix).strip("/")
    if any(part in (".", "..") for part in prefix.split("/")):
        raise ValueError(f"object-store URI must not hold '.' or '..' segments: {uri!r}")
    return StoreLocation(scheme, bucket, prefix)


def split_storage_options(scheme: str, options: Mapping[str, str]
                          ) -> tuple[dict[str, str], dict[str, str]]:
    """``(store config, client options)`` from ``table.storage_options``.

    Keys are lower-cased; HTTP client keys (``aws_allow_http``, ``timeout``, …) go to the client
    options without their prefix, everything else to the store config, where ``object_store``
    validates the key (an unknown key is an error at start).
    """
    prefix = _OPTION_PREFIX[scheme]
    config: dict[str, str] = {}
    client: dict[str, str] = {}
    for raw_key, value in options.items():
        key = raw_key.lower()
        bare = key.removeprefix(prefix)
        if bare in _CLIENT_KEYS:
            client[bare] = str(value)
        else:
            config[key] = str(value)
    return config, client


def reader_storage_options(scheme: str, options: Mapping[str, str],
                           environ: Mapping[str, str]) -> dict[str, str]:
    """Options for hudi-rs: the scheme's environment variables (lower-cased, as object_store
    reads them) overridden by ``table.storage_options``, then an AWS profile's credentials
    where neither gives any (``shared.storage.credentials``) — what the sink itself uses."""
    env_prefix = _ENV_PREFIX[scheme]
    merged = {k.lower(): v for k, v in environ.items() if k.startswith(env_prefix)}
    merged.update(resolve_options(scheme, options, environ))
    return merged


def open_store(location: StoreLocation, options: Mapping[str, str]) -> Any:
    """The obstore store of ``location``: ``options`` completed with the credentials
    ``shared.storage.credentials`` resolves (object_store reads the environment itself)."""
    source = credential_source(location.scheme, options)
    if (location.root, source) not in _LOGGED:
        _LOGGED.add((location.root, source))
        log.info("%s: %s", location.root, source)
    options = resolve_options(location.scheme, options)
    config, client = split_storage_options(location.scheme, options)
    make: Any = from_url  # its overloads type each scheme's config; ours is checked at runtime
    return make(location.root, config=config or None, client_options=client or None)
