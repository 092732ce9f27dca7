"""Error hierarchy shared by every service.

Expected outcomes (a duplicate status, a stale epoch) are return values, not exceptions;
exceptions here mean something a caller must react to. Two kinds, in two separate trees:

- runtime failures (:class:`HudiSinkError` and its subclasses): the table, the config, a
  peer or the network is not as expected; callers log, retry, carry or exit with a clear
  message;
- :class:`HudiSinkBug`: our own code broke an invariant (an illegal state transition). It is
  never retried or handled like a runtime failure. It is deliberately *not* a
  ``HudiSinkError``, so no ``except HudiSinkError`` that handles failures can catch it: the
  process stops and the supervisor restarts it from durable state.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "HudiSinkError",
    "HudiSinkBug",
    "ConfigError",
    "ProtocolDecodeError",
    "TableFormatError",
    "FencedError",
    "IllegalTransition",
    "SchemaError",
    "InvalidPartitionValue",
    "SparkHungError",
    "SparkDriverGone",
]


class HudiSinkError(Exception):
    """Root of every runtime failure raised on purpose by hudi-sink (bugs are
    :class:`HudiSinkBug`, outside this tree)."""


class ConfigError(HudiSinkError):
    """Configuration or usage is wrong; the CLI exits with code 2.

    ``key`` is the dotted config key at fault (e.g. ``kafka.topics``) when one is known.
    """

    def __init__(self, message: str, key: str | None = None, *,
                 problems: Sequence[tuple[str | None, str]] | None = None) -> None:
        self.key = key
        self.problems: list[tuple[str | None, str]] = list(problems or [(key, message)])
        """Every problem found, each ``(key, message)``: a config is checked whole, so an
        operator fixes all of it in one go instead of one key per run."""
        super().__init__(f"{key}: {message}" if key else message)

    def lines(self) -> list[str]:
        """One line per problem, each naming its key."""
        return [f"{key}: {message}" if key else message for key, message in self.problems]


class ProtocolDecodeError(HudiSinkError):
    """A control message could not be decoded (bad bytes or unknown type)."""


class TableFormatError(HudiSinkError):
    """The Hudi table on disk is not in a state this writer understands."""


class FencedError(HudiSinkError):
    """A newer coordinator epoch owns the table; this process must stop acting as leader."""


class HudiSinkBug(Exception):
    """An invariant of our own code is broken: stop, never retry. Not a
    :class:`HudiSinkError`, so a handler of runtime failures never swallows it."""


class IllegalTransition(HudiSinkBug):
    """A state machine was asked for a transition its table does not allow."""


class SchemaError(ConfigError):
    """``table.schema`` cannot be parsed or does not fit the table's keys."""


class SparkHungError(HudiSinkError):
    """A Spark job did not return within ``spark.job_timeout_ms``: the driver stopped
    answering. Never retried: no later attempt can get a Spark slot; the participant exits."""


class SparkDriverGone(SparkHungError):
    """The local Spark driver JVM exited (Spark exits it with code 52 when a task runs out of
    heap). PySpark keeps the dead gateway for the life of the process, so every later job
    would fail with "Connection refused": never retried, the participant exits and is
    restarted with a fresh JVM."""


class InvalidPartitionValue(HudiSinkError):
    """A record's partition value cannot name a directory (too long once encoded)."""
