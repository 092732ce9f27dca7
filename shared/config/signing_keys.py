"""Where the control-message signing keys come from: ``kafka.control_signing_key`` (one key,
or a list for rotation) or the file ``kafka.control_signing_key_file`` names (a mounted
Secret, one key per line). The first key signs, every key verifies (``shared.kafka.signing``).

A key given inline is checked while the config loads (a weak key fails at start and in
``config check``, naming the key); the file is read only by the services that sign and verify
(the coordinator and the participants, when their control channel starts: a missing or empty
file is exit 2 naming the key), so the deleter, which never touches the control topic, needs
no access to it. No message ever shows a key.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["MIN_KEY_CHARS", "keys_from_text", "signing_keys"]

MIN_KEY_CHARS = 16
"""Shorter keys are refused: an HMAC key should carry at least 128 bits."""


def keys_from_text(text: str) -> list[str]:
    """The keys of a key file: one per line, surrounding whitespace and empty lines dropped
    (a Secret written with a trailing newline holds the same key as one without)."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def signing_keys(key: str | list[str] | None, key_file: str | None, *,
                 read_file: bool = True) -> list[str]:
    """The configured keys, first the signing one; empty when none is configured (or only a
    file is, and ``read_file`` is False). Raises ValueError starting with the name of the key
    at fault."""
    if key is not None and key_file is not None:
        raise ValueError("control_signing_key_file: set it or control_signing_key, not both")
    name = "control_signing_key"
    if key_file is not None and not read_file:
        return []
    if key_file is not None:
        name = "control_signing_key_file"
        path = Path(key_file)
        try:
            keys = keys_from_text(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{name}: cannot read {path} ({type(exc).__name__})") from None
        if not keys:
            raise ValueError(f"{name}: {path} holds no key")
    elif isinstance(key, str):
        keys = [key.strip()]
    else:
        keys = [k.strip() for k in key or ()]
        if key is not None and not keys:
            raise ValueError(f"{name}: an empty list (leave the key unset to sign nothing)")
    for n, text in enumerate(keys, 1):
        if len(text) < MIN_KEY_CHARS:
            which = f"key #{n}" if len(keys) > 1 else "the key"
            raise ValueError(f"{name}: {which} is shorter than {MIN_KEY_CHARS} characters "
                             "(make one with `openssl rand -hex 32`)")
    if len(set(keys)) != len(keys):
        raise ValueError(f"{name}: the same key is listed twice")
    return keys
