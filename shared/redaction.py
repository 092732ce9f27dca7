"""What is secret in what the sink prints, decided in one place.

Everything the sink shows a person — ``hudi-sink config check``, every log line (both log
formats), configuration errors, registry errors that land in DLQ headers — passes through
here, so a credential is hidden the same way wherever it would appear:

- **By key.** A value whose key looks like a credential (:func:`is_secret_key`: passwords,
  secrets, tokens, credentials, private keys, access/account/master keys, SSE-C encryption
  keys such as ``fs.s3a.encryption.key``, SAS tokens, JAAS configs, ``basic.auth.user.info``,
  any key ending in ``key``) shows as :data:`REDACTED`. Keys that only *name* where a secret
  is (``…provider``, ``…file``, ``…path``, ``…mechanism``, ``…algorithm`` …) stay visible.
- **Inside URLs.** The password of ``scheme://user:pass@host`` becomes ``***``
  (``https://user:***@registry``); so does the value of a secret parameter in a query or in
  Spark Connect's ``;key=value`` parameters (``sc://host:15002/;token=***``) and of a SAS
  signature (``?sv=…&sig=***``).
- **In free text** (log lines, error messages): every URL as above, and every
  ``key=value`` whose key is secret (``password="…"`` in a JAAS line, ``sig=…``), and the
  credentials of an ``Authorization: Bearer …`` (or ``Basic``) header.

Why patterns and not a list of known fields: ``spark.conf`` and ``table.storage_options``
are free-form maps passed to Spark and object_store, whose credential keys (Hadoop's
``fs.azure.account.key.<account>…``, object_store's ``azure_storage_master_key`` …) cannot be
enumerated; a false positive hides a harmless value, a false negative leaks a credential.
"""

from __future__ import annotations

import re

__all__ = ["REDACTED", "MASK", "is_secret_key", "redact_url", "redact_text", "redact_value"]

REDACTED = "<redacted>"
"""A whole value hidden because of its key."""
MASK = "***"
"""The part of a URL or ``key=value`` that was hidden."""

_SECRET_KEY = re.compile(
    r"password|passwd|passphrase|(^|[._-])pass($|[._-])|pwd|secret|token|credential|jaas|user[._-]?info"
    r"|private[._-]?key|access[._-]?key|account[._-]?key|master[._-]?key|encryption[._-]?key"
    r"|customer[._-]?key|sas[._-]?key|signing[._-]?key|api[._-]?key|proxy[._-]?url"
    r"|(^|[._-])key$|^(sig|signature|x-amz-signature)$",
    re.IGNORECASE,
)
_NAMES_A_PLACE = re.compile(
    r"(^|[._-])(provider|providers|source|file|path|location|mechanism|algorithm|type|enabled)$",
    re.IGNORECASE,
)
_AUTHORIZATION = re.compile(r"(authorization['\"]?\s*[:=]\s*['\"]?(bearer|basic)\s+)[^\s'\",}]+",
                            re.IGNORECASE)
_URL = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
_PAIR = re.compile(r"(?<![A-Za-z0-9_.-])(?P<key>[A-Za-z0-9_.-]+)(?P<eq>\s*=\s*)"
                   r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s&;,'\"<>)\]]+)")


def is_secret_key(key: str) -> bool:
    """Whether the value stored under ``key`` is a credential (see the module docstring)."""
    return bool(_SECRET_KEY.search(key)) and not _NAMES_A_PLACE.search(key)


def _mask_pair(match: re.Match[str]) -> str:
    if not is_secret_key(match["key"]):
        return match[0]
    return f"{match['key']}{match['eq']}{MASK}"


def _mask_userinfo(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = len(rest)
    for stop in "/?#;":
        at = rest.find(stop)
        if at != -1:
            end = min(end, at)
    authority, tail = rest[:end], rest[end:]
    userinfo, at_sign, host = authority.rpartition("@")
    if not at_sign or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:{MASK}@{host}{tail}"


def redact_url(url: str) -> str:
    """``url`` with its password and secret parameters replaced by ``***``; the scheme,
    user, host, port, path and every other parameter stay, so the URL still says where."""
    return _PAIR.sub(_mask_pair, _mask_userinfo(url))


def redact_text(text: str) -> str:
    """Free text (a log line, an error message) with every URL redacted and every secret
    ``key=value`` masked."""
    if "=" not in text and "://" not in text and ":" not in text:
        return text  # the common log line: nothing to look at
    text = _AUTHORIZATION.sub(lambda m: f"{m[1]}{MASK}", text)
    return _PAIR.sub(_mask_pair, _URL.sub(lambda m: _mask_userinfo(m[0]), text))


def redact_value(key: str, value: object) -> object:
    """A config leaf as it may be shown: :data:`REDACTED` under a secret key (``None`` stays
    ``None``, so an operator still sees whether it is set), URLs inside strings redacted."""
    if value is None:
        return None
    if is_secret_key(key):
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    return value
