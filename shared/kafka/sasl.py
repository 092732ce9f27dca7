"""SASL settings of every Kafka client: PLAIN/SCRAM, OAUTHBEARER (a token file or Amazon MSK
IAM), GSSAPI.

aiokafka asks an OAUTHBEARER token provider for a token at every login (each new broker
connection), and never re-authenticates a connection that stays open. So:

- :class:`FileTokenProvider` reads the file at every login: a sidecar, the Strimzi OAuth
  operator or a projected service-account token can rotate it, and the next connection uses
  the new token without a restart. The file is read in a worker thread (a mounted volume may
  be slow); an empty or unreadable file fails that login naming it (:class:`OAuthTokenUnavailable`),
  not with an empty token the broker refuses with a vaguer message.
- :class:`MskIamTokenProvider` signs a token with the Amazon MSK IAM signer
  (``aws-msk-iam-sasl-signer-python``, optional extra ``hudi-sink[msk]``) from the standard
  AWS credential chain (environment, ``AWS_PROFILE``, web identity / IRSA, instance role),
  reused until a minute before it expires.

GSSAPI goes to aiokafka as it is; it needs the ``gssapi`` package (checked with the config,
``shared.config.kafka_security``).
"""

from __future__ import annotations

import asyncio
import importlib
import time
from pathlib import Path
from typing import Any

from aiokafka.abc import AbstractTokenProvider
from aiokafka.errors import KafkaError

from hudi_sink.shared.config.kafka_security import MSK_SIGNER_MODULE
from hudi_sink.shared.config.settings import KafkaConfig
from hudi_sink.shared.errors import HudiSinkBug

__all__ = ["FileTokenProvider", "MskIamTokenProvider", "OAuthTokenUnavailable", "sasl_options"]

_MSK_REFRESH_MARGIN_S = 60.0
"""A signed MSK token is replaced this long before it expires (they last 15 minutes)."""


class OAuthTokenUnavailable(KafkaError):
    """No token now: the token file cannot be read or is empty, or the MSK signer failed.

    A KafkaError on purpose: aiokafka treats it as a failed connection and tries again later
    (a rotation in progress heals), and at start ``wait_for_kafka`` retries it until
    ``kafka.startup_timeout_s``, then exits 2 with it as the reason. Any other exception would
    escape aiokafka's connection handling and break the client for good."""


class FileTokenProvider(AbstractTokenProvider):
    """The OAUTHBEARER token held in a file, read afresh at every login."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _read(self) -> str:
        try:
            token = Path(self.path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise OAuthTokenUnavailable(f"kafka.sasl_oauth_token_file: cannot read {self.path}: "
                                        f"{exc}") from exc
        if not token:
            raise OAuthTokenUnavailable(f"kafka.sasl_oauth_token_file: {self.path} is empty")
        return token

    async def token(self) -> str:
        return await asyncio.to_thread(self._read)


class MskIamTokenProvider(AbstractTokenProvider):
    """Amazon MSK IAM tokens for ``region``, signed with the default AWS credentials."""

    def __init__(self, region: str) -> None:
        self.region = region
        self._token: str | None = None
        self._expires_at = 0.0  # time.time() seconds
        self._lock = asyncio.Lock()  # one signing for the logins of a reconnect burst

    def _sign(self) -> tuple[str, float]:
        signer = importlib.import_module(f"{MSK_SIGNER_MODULE}.MSKAuthTokenProvider")
        try:
            token, expiry_ms = signer.generate_auth_token(self.region)
        except Exception as exc:  # botocore's: no credentials, an expired web identity token …
            raise OAuthTokenUnavailable(f"kafka.sasl_oauth_msk_region: cannot sign an MSK IAM "
                                        f"token for {self.region}: {exc!r}") from exc
        return str(token), float(expiry_ms) / 1000

    async def token(self) -> str:
        async with self._lock:
            if self._token is not None and time.time() < self._expires_at - _MSK_REFRESH_MARGIN_S:
                return self._token
            token, self._expires_at = await asyncio.to_thread(self._sign)
            self._token = token
            return token


def sasl_options(kafka: KafkaConfig) -> dict[str, Any]:
    """aiokafka's SASL kwargs for ``kafka`` (empty unless the protocol is ``SASL_*``)."""
    if not kafka.security_protocol.startswith("SASL"):
        return {}
    mechanism = kafka.sasl_mechanism
    options: dict[str, Any] = {"sasl_mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        if kafka.sasl_oauth_token_file is not None:
            options["sasl_oauth_token_provider"] = FileTokenProvider(kafka.sasl_oauth_token_file)
        elif kafka.sasl_oauth_msk_region is not None:
            options["sasl_oauth_token_provider"] = MskIamTokenProvider(kafka.sasl_oauth_msk_region)
        else:  # the config's checks require one of them
            raise HudiSinkBug("OAUTHBEARER without a token source passed the config checks")
    elif mechanism == "GSSAPI":
        options["sasl_kerberos_service_name"] = kafka.sasl_kerberos_service_name
        options["sasl_kerberos_domain_name"] = kafka.sasl_kerberos_domain_name
    else:
        options["sasl_plain_username"] = kafka.sasl_plain_username
        options["sasl_plain_password"] = kafka.sasl_plain_password
    return options
