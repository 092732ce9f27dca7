"""How a failed ``hudi-sink`` command ends: one clear message and the documented exit code
(2 bad config or usage, 1 runtime failure), written in the process's ``log.format``.

Plain lines on stderr for people; with ``log.format: json`` each line is a JSON log object
instead, so a log pipeline that parses every line as JSON does not drop (or choke on) the one
line that explains why the pod is crash-looping. A config that failed to load cannot say which
format it wanted, so :func:`format_even_if_invalid` reads just that much from the environment
or the file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence

from hudi_sink.shared.config.files import read_config_file
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.redaction import redact_text
from hudi_sink.shared.runtime.logs import log_format, set_log_format
from hudi_sink.shared.storage.object_store import MissingCredentialsError

__all__ = ["format_even_if_invalid", "error_lines", "report_failure"]

log = logging.getLogger("hudi_sink.cli")


@contextlib.contextmanager
def format_even_if_invalid(path: str | None) -> Iterator[None]:
    """On a ConfigError inside, switch to the ``log.format`` the environment
    (``HUDI_SINK__LOG__FORMAT``) or the file asks for, as far as either can be read."""
    try:
        yield
    except ConfigError:
        wanted = os.environ.get("HUDI_SINK__LOG__FORMAT")
        if wanted is None and path is not None:
            with contextlib.suppress(Exception):  # the file may be what is broken
                section = read_config_file(path).data.get("log")
                wanted = section.get("format") if isinstance(section, dict) else None
        if wanted == "json":
            set_log_format("json")
        raise


def error_lines(lines: Sequence[str]) -> None:
    """``lines`` on stderr: plain, or with ``log.format: json`` one JSON log object each;
    credentials masked either way (``shared.redaction``)."""
    if log_format() == "json":
        for line in lines:
            log.error("%s", line.removeprefix("hudi-sink: ").strip())
        return
    for line in lines:  # redacted as log lines are (a bad value may hold a credential)
        sys.stderr.write(f"{redact_text(line)}\n")


def report_failure(exc: Exception) -> int:
    """Say why the command failed; its exit code."""
    if isinstance(exc, ConfigError):
        lines = exc.lines()
        if len(lines) == 1:
            error_lines([f"hudi-sink: configuration error: {exc}"])
        elif log_format() == "json":  # one object per problem, each naming its key
            error_lines([f"configuration error: {line}" for line in lines])
        else:  # every problem, each naming its key, so one run shows all there is to fix
            error_lines([f"hudi-sink: configuration error: {len(lines)} problems",
                         *(f"  {line}" for line in lines)])
        return 2
    if isinstance(exc, MissingCredentialsError):  # one line naming what is missing
        error_lines([f"hudi-sink: error: {exc}"])
        return 2
    log.debug("failure", exc_info=exc)
    error_lines([f"hudi-sink: error: {type(exc).__name__}: {exc}"])
    return 1
