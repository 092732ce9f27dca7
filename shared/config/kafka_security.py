"""Checks of ``kafka``'s security keys that relate several keys, or a key to this machine.

Made on the merged file and environment before validation (as ``shared.config.keyed`` does),
so each is reported beside the model's own problems, named by its full key
(``kafka.sasl_plain_username``), and ``config check`` lists them all at once:

- a SASL protocol needs a mechanism, and each mechanism its own keys: PLAIN and SCRAM a
  username and a password (without them the broker refuses the login at start, after the
  config looked valid), OAUTHBEARER a token source (a file, or the MSK IAM signer), GSSAPI
  the ``gssapi`` package;
- files the clients will open (CA, certificate, key, the OAuth token file) must exist. In a
  pod they are mounted from Secrets; ``config check --offline`` (a laptop, CI) skips these
  and the package checks, and says which keys it did not check (:func:`offline_notes`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["security_problems", "offline_notes", "FILE_KEYS", "MSK_SIGNER_MODULE",
           "GSSAPI_MODULE"]

FILE_KEYS = ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "sasl_oauth_token_file")
"""``kafka`` keys naming a file the clients read."""
MSK_SIGNER_MODULE = "aws_msk_iam_sasl_signer"
"""Import name of PyPI's ``aws-msk-iam-sasl-signer-python`` (extra ``hudi-sink[msk]``)."""
GSSAPI_MODULE = "gssapi"
"""Import name of PyPI's ``gssapi`` (aiokafka's extra ``aiokafka[gssapi]``); it builds from
source against MIT Kerberos (``libkrb5-dev``): no Linux wheel exists."""

_USER_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _set(kafka: Mapping[str, Any], key: str) -> bool:
    value = kafka.get(key)
    return value is not None and value != ""


def security_problems(data: Mapping[str, Any], *, offline: bool = False) -> list[tuple[str, str]]:
    """``(key, message)`` for each security problem of ``data['kafka']``; ``offline`` skips
    what depends on this machine (files, optional packages)."""
    kafka = data.get("kafka")
    if not isinstance(kafka, Mapping):
        return []
    problems: list[tuple[str, str]] = []
    protocol = str(kafka.get("security_protocol") or "PLAINTEXT")
    mechanism = kafka.get("sasl_mechanism")
    sasl = protocol.startswith("SASL")
    if sasl and mechanism is None:
        problems.append(("kafka.sasl_mechanism", f"required with security_protocol {protocol} "
                         "(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI)"))
    if sasl and mechanism in _USER_MECHANISMS:
        for key in ("sasl_plain_username", "sasl_plain_password"):
            if not _set(kafka, key):
                problems.append((f"kafka.{key}", f"required with sasl_mechanism {mechanism}: "
                                 "the broker refuses a login without it"))
    if sasl and mechanism == "OAUTHBEARER":
        sources = [k for k in ("sasl_oauth_token_file", "sasl_oauth_msk_region") if _set(kafka, k)]
        if len(sources) != 1:
            problems.append(("kafka.sasl_oauth_token_file", "sasl_mechanism OAUTHBEARER needs "
                             "exactly one token source: kafka.sasl_oauth_token_file (a token "
                             "file, re-read at every login) or kafka.sasl_oauth_msk_region "
                             f"(Amazon MSK IAM){'; both are set' if sources else ''}"))
        if "sasl_oauth_msk_region" in sources and not offline and not _installed(MSK_SIGNER_MODULE):
            problems.append(("kafka.sasl_oauth_msk_region", "needs the Python package "
                             "aws-msk-iam-sasl-signer-python (pip install 'hudi-sink[msk]')"))
    if sasl and mechanism == "GSSAPI" and not offline and not _installed(GSSAPI_MODULE):
        problems.append(("kafka.sasl_mechanism", "GSSAPI needs the Python package gssapi "
                         "(pip install 'aiokafka[gssapi]'; it builds against MIT Kerberos, "
                         "libkrb5-dev) and a krb5.conf and keytab on this machine"))
    for key in ("sasl_oauth_token_file", "sasl_oauth_msk_region"):
        if _set(kafka, key) and not (sasl and mechanism == "OAUTHBEARER"):
            problems.append((f"kafka.{key}", "only used with a SASL_* security_protocol and "
                             "sasl_mechanism OAUTHBEARER"))
    if not offline:
        for key in FILE_KEYS:
            path = kafka.get(key)
            if path is not None and not Path(str(path)).is_file():
                problems.append((f"kafka.{key}", f"file not found: {path}"))
    return problems


def offline_notes(data: Mapping[str, Any]) -> list[str]:
    """What ``security_problems(offline=True)`` left unchecked in ``data``, one line each."""
    kafka = data.get("kafka")
    avro = data.get("avro")
    notes = []
    for section, values, keys in (("kafka", kafka, FILE_KEYS),
                                  ("avro", avro, ("registry_ca_file",))):
        if not isinstance(values, Mapping):
            continue
        for key in keys:
            if values.get(key) is not None:
                notes.append(f"{section}.{key}: {values[key]} not checked (--offline: the file "
                             "is read where the sink runs)")
    if isinstance(kafka, Mapping) and kafka.get("sasl_mechanism") == "GSSAPI":
        notes.append("kafka.sasl_mechanism: GSSAPI's package (gssapi) not checked (--offline)")
    if isinstance(kafka, Mapping) and _set(kafka, "sasl_oauth_msk_region"):
        notes.append("kafka.sasl_oauth_msk_region: the MSK IAM signer package not checked "
                     "(--offline)")
    return notes
