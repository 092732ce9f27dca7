"""Authenticity of control messages: an HMAC-SHA256 over every byte of the envelope.

Without it, the sender role and the coordinator epoch of a control message are whatever the
message claims, and one forged "coordinator" message with a huge epoch makes every
participant drop the real coordinator's messages as stale. With ``kafka.control_signing_key``
(or ``kafka.control_signing_key_file``) set, every sender signs and every receiver refuses
what is not signed by a key it holds.

What is signed: the record value exactly as sent (the JSON envelope: protocol version,
type, sink, ``commit_time``, ``coordinator_epoch``, sender role, id and host, payload),
behind a fixed domain prefix so a MAC of this scheme never means anything elsewhere. The
signature travels in the record header ``hudi-sink-sig`` as ``v1:<key id>:<hex MAC>``; the
key id (a hash of the key, not the key) names which key signed, so a receiver checks only
that key and an operator can tell "a key we do not hold" from "a wrong MAC". The record key
and any other header are not signed, and no receiver reads them.

Rotation: several keys may be configured; the first signs, every one verifies. Replays of a
validly signed message are not refused here: the protocol already drops stale epochs and
instants and treats repeats as idempotent (docs/design.md, "Signed control messages").
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from hudi_sink.shared.config.settings import KafkaConfig
from hudi_sink.shared.config.signing_keys import signing_keys
from hudi_sink.shared.errors import ConfigError

__all__ = [
    "SIGNATURE_HEADER",
    "Rejection",
    "ControlKeys",
    "control_keys",
    "RejectionLog",
]

SIGNATURE_HEADER = "hudi-sink-sig"
_VERSION = "v1"
_DOMAIN = b"hudi-sink control message v1\x00"
_KEY_ID_DOMAIN = b"hudi-sink control key id\x00"
_MAC_HEX_LEN = 64

Headers = Sequence[tuple[str, bytes]]


class Rejection(StrEnum):
    """Why a control record was ignored (the ``reason`` label of the rejection metric)."""

    UNSIGNED = "unsigned"
    """No signature header, while this process holds keys."""
    UNKNOWN_KEY = "unknown_key"
    """Signed with a key this process does not hold (a forgery, or a rotation step missed)."""
    BAD_SIGNATURE = "bad_signature"
    """A malformed signature, several of them, or a MAC that does not match the value."""
    UNDECODABLE = "undecodable"
    """Not a control message this version can read (key or not: a record that does not decode
    names no sink, so it is judged before any signature check)."""


def _key_id(key: bytes) -> str:
    return hashlib.sha256(_KEY_ID_DOMAIN + key).hexdigest()[:8]


@dataclass(frozen=True, repr=False)
class ControlKeys:
    """The keys of one process: the first signs, each verifies. Never printed (``repr``
    names only the key ids)."""

    keys: tuple[bytes, ...]
    _by_id: dict[str, list[bytes]] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if not self.keys:
            raise ValueError("ControlKeys needs at least one key")
        by_id: dict[str, list[bytes]] = {}
        for key in self.keys:
            by_id.setdefault(_key_id(key), []).append(key)
        object.__setattr__(self, "_by_id", by_id)

    def __repr__(self) -> str:
        return f"ControlKeys(ids={[_key_id(k) for k in self.keys]})"

    @property
    def signing_key_id(self) -> str:
        return _key_id(self.keys[0])

    def sign(self, value: bytes) -> tuple[str, bytes]:
        """The signature header of ``value``, signed with the first key."""
        key = self.keys[0]
        mac = hmac.new(key, _DOMAIN + value, hashlib.sha256).hexdigest()
        return SIGNATURE_HEADER, f"{_VERSION}:{_key_id(key)}:{mac}".encode("ascii")

    def verify(self, value: bytes, headers: Headers | None) -> Rejection | None:
        """None when ``value`` carries a valid signature by one of our keys; otherwise why not.
        The MAC comparison is constant-time (``hmac.compare_digest``)."""
        signatures = [v for k, v in headers or () if k == SIGNATURE_HEADER]
        if not signatures:
            return Rejection.UNSIGNED
        if len(signatures) > 1:
            return Rejection.BAD_SIGNATURE
        parts = bytes(signatures[0] or b"").split(b":")
        if len(parts) != 3 or parts[0] != _VERSION.encode() or len(parts[2]) != _MAC_HEX_LEN:
            return Rejection.BAD_SIGNATURE
        candidates = self._by_id.get(parts[1].decode("ascii", "replace"))
        if not candidates:
            return Rejection.UNKNOWN_KEY
        for key in candidates:
            expected = hmac.new(key, _DOMAIN + value, hashlib.sha256).hexdigest().encode()
            if hmac.compare_digest(expected, parts[2]):
                return None
        return Rejection.BAD_SIGNATURE


def control_keys(kafka: KafkaConfig) -> ControlKeys | None:
    """This process's keys (``shared.config.signing_keys``); None when none is configured:
    messages are then sent unsigned and accepted unchecked. Raises ConfigError naming the key
    (the file may have changed since the config loaded); never shows a key."""
    try:
        keys = signing_keys(kafka.control_signing_key, kafka.control_signing_key_file)
    except ValueError as exc:
        name, _, problem = str(exc).partition(": ")
        raise ConfigError(problem, f"kafka.{name}") from None
    return ControlKeys(tuple(k.encode("utf-8") for k in keys)) if keys else None


class RejectionLog:
    """Counts every rejected control record and logs a WARNING per reason at most once per
    ``every_s`` (a flood of forgeries must not flood the log), with how many were suppressed."""

    def __init__(self, log: logging.Logger, count: Callable[[str], None] | None = None,
                 *, every_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._log = log
        self._count = count
        self._every_s = every_s
        self._clock = clock
        self._last: dict[Rejection, float] = {}
        self._suppressed: dict[Rejection, int] = {}

    def rejected(self, reason: Rejection, offset: int, detail: str = "") -> None:
        if self._count is not None:
            self._count(reason.value)
        now = self._clock()
        last = self._last.get(reason)
        if last is not None and now - last < self._every_s:
            self._suppressed[reason] = self._suppressed.get(reason, 0) + 1
            return
        self._last[reason] = now
        more = self._suppressed.pop(reason, 0)
        self._log.warning("control record at offset %d ignored (%s)%s%s", offset, reason.value,
                          f": {detail}" if detail else "",
                          f"; {more} more like it since the last such warning"
                          if more else "")
