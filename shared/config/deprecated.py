"""Configuration keys that were renamed or split, still accepted, and what replaces them.

``transaction.flush_bytes`` meant two things: the value bytes at which a partition's buffer
flushes and the Arrow bytes one shared Spark job may hold. It is now ``transaction.buffer_bytes``
and ``spark.job_bytes``. The old key is read as ``buffer_bytes`` (``TransactionConfig``), and
``spark.job_bytes`` left unset follows ``buffer_bytes``, so a config that sets only the old key
runs exactly as before. Setting it beside ``buffer_bytes`` is an error (which one was meant?).
Every load logs a note per old key (``shared.config.settings.config_from_mapping``) and ``hudi-sink
config check`` lists them, so an operator learns the new names before the old ones go.
"""

from __future__ import annotations

__all__ = ["DEPRECATED_KEYS", "deprecations"]

DEPRECATED_KEYS: dict[str, tuple[str, str]] = {
    "transaction.flush_bytes": (
        "transaction.buffer_bytes",
        "its other meaning, the bound of a Spark job, is spark.job_bytes (unset: the same value)"),
}
"""Old dotted key → (the key it is read as, what else to know)."""


def deprecations(config: object) -> list[str]:
    """One note per deprecated key ``config`` (a ``SinkConfig``) was given, naming what
    replaces it. A deprecated field is ``None`` unless it was set."""
    notes = []
    for old, (new, detail) in DEPRECATED_KEYS.items():
        section, key = old.split(".")
        if getattr(getattr(config, section), key) is not None:
            notes.append(f"{old} is deprecated: read as {new}; {detail}. Rename it.")
    return notes
