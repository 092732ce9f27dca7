"""The process's log lines: ``log.format: text`` for people, ``json`` for log pipelines.

JSON is one object per line (``time``, ``level``, ``logger``, ``message``, ``exception`` when
there is one): a collector (Fluent Bit, Vector, Loki …) keeps a traceback with its message
instead of splitting it into unrelated lines, and needs no regex per service. Context a
collector would otherwise parse out of the message is a field of its own: ``service`` (the
command the process runs: ``coordinator``, ``participant`` … :func:`set_log_service`) on every
line, and ``partition``/``topic``/``instant`` where the line is about one — given by
:func:`log_context` to everything logged inside it (asyncio tasks and worker threads started
there inherit it), or per call as ``extra={"partition": …}``.

The format is part of the config, which is only known once the file is read; the lines logged
while it is read (a ``.properties`` file's ignored keys) are held and written after, so they
come out in the configured format too (:func:`held_log_lines`).

Both formats pass every line through ``shared.redaction.redact_text``: a URL with a password
or a token (``sc://host:15002/;token=…``, a registry URL with ``user:pass@``), a SAS
signature or a ``password=…`` in a message or a traceback is masked before it is written,
whichever logger (ours, PySpark's, aiokafka's) wrote it.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Literal

from hudi_sink.shared.redaction import redact_text

__all__ = ["JsonFormatter", "TextFormatter", "configure_logging", "set_log_format",
           "held_log_lines", "LogFormat", "log_context", "set_log_service", "log_format",
           "CONTEXT_FIELDS"]

LogFormat = Literal["text", "json"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_HANDLER_NAME = "hudi-sink"

CONTEXT_FIELDS = ("partition", "topic", "instant")
"""Context a line may carry (from :func:`log_context` or ``extra=``), as JSON fields."""

_HELD_CONTEXT = "hudi_sink_held_context"
"""A held record's context, kept from when it was logged (:func:`held_log_lines`)."""
_context: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "hudi_sink_log_context", default=None)
_service = ""


def set_log_service(name: str) -> None:
    """Name the process's service (the command it runs) on every JSON line."""
    global _service
    _service = name


@contextlib.contextmanager
def log_context(**fields: object) -> Iterator[None]:
    """Lines logged inside (and in tasks and threads started inside) carry ``fields``
    (:data:`CONTEXT_FIELDS`, as text) in JSON."""
    unknown = set(fields) - set(CONTEXT_FIELDS)
    if unknown:
        raise ValueError(f"unknown log context field(s): {sorted(unknown)}")
    token = _context.set({**(_context.get() or {}), **{k: str(v) for k, v in fields.items()}})
    try:
        yield
    finally:
        _context.reset(token)


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT``, credentials masked (traceback included)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines in messages are escaped),
    credentials masked in the message and the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, str] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact_text(record.getMessage()),
        }
        if _service:
            entry["service"] = _service
        entry.update(getattr(record, _HELD_CONTEXT, None) or _context.get() or {})
        for name in CONTEXT_FIELDS:  # extra= on the call wins over the surrounding context
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = str(value)
        if record.exc_info:
            entry["exception"] = redact_text(self.formatException(record.exc_info))
        elif record.exc_text:
            entry["exception"] = redact_text(record.exc_text)
        if record.stack_info:
            entry["stack"] = redact_text(self.formatStack(record.stack_info))
        return json.dumps(entry, ensure_ascii=False)


def _formatter(fmt: LogFormat) -> logging.Formatter:
    return JsonFormatter() if fmt == "json" else TextFormatter()


def _ours() -> logging.Handler | None:
    return next((h for h in logging.getLogger().handlers if h.get_name() == _HANDLER_NAME), None)


def configure_logging(level: str = "INFO", fmt: LogFormat = "text") -> None:
    """Log to stderr at ``level`` in ``fmt``. Like ``logging.basicConfig``, it leaves a root
    logger that already has handlers (an embedding application, pytest) alone."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.set_name(_HANDLER_NAME)
        root.addHandler(handler)
        root.setLevel(level)
    set_log_format(fmt)
    for noisy in ("aiokafka", "kafka", "py4j", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def set_log_format(fmt: LogFormat) -> None:
    """Switch the process's log lines to ``fmt`` (once the config says which)."""
    handler = _ours()
    if handler is not None:
        handler.setFormatter(_formatter(fmt))


def log_format() -> LogFormat:
    """The format the process's own handler writes (``text`` when it has none)."""
    handler = _ours()
    return "json" if handler is not None and isinstance(handler.formatter, JsonFormatter) else "text"


@contextlib.contextmanager
def held_log_lines() -> Iterator[None]:
    """Hold what is logged inside (while the config, and so the format, is read) and write it
    on leaving, in the format set by then; on an error too, so no line is lost."""
    handler = _ours()
    if handler is None:
        yield
        return
    held: list[logging.LogRecord] = []

    def hold(record: logging.LogRecord) -> bool:
        setattr(record, _HELD_CONTEXT, _context.get())
        held.append(record)
        return False

    handler.addFilter(hold)
    try:
        yield
    finally:
        handler.removeFilter(hold)
        for record in held:
            handler.handle(record)
