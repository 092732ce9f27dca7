"""Every problem of a config, each naming its key, in one error.

pydantic reports all of a config's problems at once; reporting only the first made an operator
fix a file one key per run (each run of a pod a restart). Each problem names its dotted key,
suggests the closest valid key for an unknown one (a typo is the usual cause), and names the
environment variable a bad value came from, since the file then looks right and the cause is
in the pod spec.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from hudi_sink.shared.errors import ConfigError

__all__ = ["validation_problems", "env_variable", "ENV_PREFIX"]

ENV_PREFIX = "HUDI_SINK__"

_ALIASES = {"table.schema_ddl": "table.schema"}
"""Field names whose YAML key is an alias: errors name the key the user writes."""

_SECRET_WORDS = ("password", "token", "storage_options", "signing_key")


def env_variable(environ: Mapping[str, str], key: str) -> str | None:
    """The ``HUDI_SINK__…`` variable that set ``key`` (or a section holding it, as JSON)."""
    parts = key.split(".")
    best: str | None = None
    for name in environ:
        if not name.startswith(ENV_PREFIX):
            continue
        set_path = [p.lower() for p in name[len(ENV_PREFIX):].split("__") if p]
        if set_path and set_path == parts[:len(set_path)]:
            if best is None or len(name) > len(best):  # the most specific one wins, as in merging
                best = name
    return best


def _valid_keys(model: type[BaseModel], loc: tuple[str, ...]) -> list[str]:
    """The keys the section at ``loc`` accepts (empty when ``loc`` is not a section)."""
    for part in loc:
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        field = fields.get(part) or model.model_fields.get(part)
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return [f.alias or n for n, f in model.model_fields.items()]


def _problem(error: Any, model: type[BaseModel], environ: Mapping[str, str]) -> tuple[str, str]:
    loc = tuple(str(p) for p in error["loc"])
    key = ".".join(loc) or "<root>"
    key = _ALIASES.get(key, key)
    kind = error["type"]
    if kind == "extra_forbidden":
        message = "unknown key"
        close = difflib.get_close_matches(loc[-1], _valid_keys(model, loc[:-1]), n=1)
        if close:
            message += f"; did you mean {'.'.join((*loc[:-1], close[0]))!r}?"
    elif kind == "missing":
        message = "required key is missing"
    else:
        given = error.get("input")
        secret = any(word in key for word in _SECRET_WORDS)
        shown = "" if secret or isinstance(given, (dict, list)) else f" (got {given!r})"
        message = f"{error['msg']}{shown}"
    variable = env_variable(environ, key) if loc else None
    if variable is not None:
        message += f" (set by environment variable {variable})"
    return key, message


def validation_problems(exc: ValidationError, model: type[BaseModel],
                        environ: Mapping[str, str],
                        also: Sequence[tuple[str, str]] = ()) -> ConfigError:
    """One ``ConfigError`` holding every problem pydantic found (``.problems``) and ``also``
    (checks across keys made beside the model's); its key and first line are the first
    problem's, as before, with the count of the others."""
    problems = [_problem(error, model, environ) for error in exc.errors()]
    problems += [problem for problem in also if problem not in problems]
    key, message = problems[0]
    others = len(problems) - 1
    if others:
        message += f" (and {others} more problem{'s' if others > 1 else ''})"
    return ConfigError(message, key, problems=problems)
