"""The registry client keeps its credentials where they were configured, and reads bounded.

urllib sends a request's ``Authorization`` header on to wherever a redirect points, another
host or plain http included. Two local registries on 127.0.0.1 (different ports: different
host:port): with credentials, a redirect to the other is refused naming both URLs and the
other never sees the password; without credentials, or on the same host:port, a redirect is
followed. An answer over 8 MiB is refused instead of being read whole."""

from __future__ import annotations

from typing import Any

import pytest
from registry_app import LocalRegistry, confluent_avro

from hudi_sink.services.participant.avro_format import AvroValues
from hudi_sink.services.participant.decoded import Deferred
from hudi_sink.shared.config.sections import AvroConfig
from hudi_sink.shared.schema.registry import (
    MAX_ANSWER_BYTES,
    RegistrySchemas,
    RegistryUnavailable,
    _same_origin,
    fetch_json,
)

SCHEMA: dict[str, Any] = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
PATH = "/schemas/ids/1"


def _client(url: str, user: str | None = "sink") -> RegistrySchemas:
    return RegistrySchemas(AvroConfig(registry_url=url, registry_username=user,
                                      registry_password="s3cret" if user else None))


def test_credentials_never_follow_a_redirect_to_another_host_port() -> None:
    with LocalRegistry({1: SCHEMA}, user="sink", password="s3cret") as registry, \
            LocalRegistry({1: SCHEMA}) as elsewhere:
        registry.redirects[PATH] = elsewhere.url + PATH
        with pytest.raises(RegistryUnavailable) as refused:
            _client(registry.url).get(1)
        assert registry.url + PATH in str(refused.value) and elsewhere.url + PATH in str(refused.value)
        assert elsewhere.requests == []  # the old code: sent it "Basic c2luazpzM2NyZXQ="
        # A participant waits (Deferred) rather than dead-lettering a good record.
        values = AvroValues(_client(registry.url))
        assert isinstance(values.parse(confluent_avro(1, SCHEMA, {"id": "a"})), Deferred)
        # Without credentials there is nothing to leak: followed.
        assert _client(registry.url, user=None).get(1)["name"] == "Order"
        assert elsewhere.authorizations == [None]


def test_a_redirect_on_the_same_host_port_keeps_working_with_credentials() -> None:
    with LocalRegistry({1: SCHEMA, 2: SCHEMA}, user="sink", password="s3cret") as registry:
        registry.redirects[PATH] = registry.url + "/schemas/ids/2"
        assert _client(registry.url).get(1)["name"] == "Order"
        assert registry.requests == [PATH, "/schemas/ids/2"]


@pytest.mark.parametrize(("old", "new", "allowed"), [
    ("https://reg:8081/a", "http://reg:8081/b", False),      # downgrade, same host:port
    ("https://reg/a", "http://reg:443/b", False),
    ("http://reg:8081/a", "http://other:8081/b", False),
    ("http://reg:8081/a", "http://reg:8082/b", False),
    ("https://reg/a", "https://reg:443/b", True),            # the default port spelled out
    ("http://reg:8081/a", "https://reg:8081/b", True),       # upgrade, same host:port
])
def test_which_redirects_credentials_may_follow(old: str, new: str, allowed: bool) -> None:
    assert _same_origin(old, new) is allowed


def test_an_oversized_answer_is_refused() -> None:
    with LocalRegistry({1: SCHEMA}) as registry:
        registry.padding = MAX_ANSWER_BYTES + 1
        with pytest.raises(RegistryUnavailable, match=f"over {MAX_ANSWER_BYTES} bytes"):
            fetch_json(registry.url + PATH, AvroConfig(registry_url=registry.url))
        registry.padding = MAX_ANSWER_BYTES - 1000  # just under: read whole
        assert "schema" in fetch_json(registry.url + PATH, AvroConfig(registry_url=registry.url))
