"""Fault injection for tests: drop control messages, fail flushes — on purpose.

``HUDI_SINK_FAULTS`` is a comma-separated list of items:

- ``drop:<MESSAGE_TYPE>:<n>`` — silently drop this process's first n sends of that type, so a
  test can prove that lost messages heal (re-announce / re-send) long before the timeout;
- ``fail:flush:<n>`` — the n-th flush of this process (counted from 1, once per buffer, not
  per attempt) fails on every attempt, so a test can prove that a flush that fails for good
  never lets the commit's offsets pass its rows.

Unset in production: every check is one dict lookup. Unknown items are refused loudly, so a
typo in a test does not silently test nothing.
"""

from __future__ import annotations

import logging
import os

from hudi_sink.shared.errors import ConfigError

__all__ = ["Faults", "MessageFaults", "ENV"]

ENV = "HUDI_SINK_FAULTS"
log = logging.getLogger("hudi_sink.faults")


class Faults:
    """The parsed fault plan of one process."""

    def __init__(self, spec: str = "") -> None:
        """Parse ``spec``; the empty plan injects nothing. Only the CLI reads the
        environment (:meth:`from_environment`), so no constructor depends on it."""
        self._drops: dict[str, int] = {}
        self._failing_flushes: set[int] = set()
        for item in (part.strip() for part in spec.split(",")):
            if not item:
                continue
            parts = item.split(":")
            if len(parts) == 3 and parts[0] == "drop" and parts[2].isdigit():
                self._drops[parts[1]] = int(parts[2])
            elif len(parts) == 3 and parts[:2] == ["fail", "flush"] and parts[2].isdigit():
                self._failing_flushes.add(int(parts[2]))
            else:
                raise ConfigError(f"{ENV}: unknown fault item {item!r} "
                                  "(expected drop:<TYPE>:<n> or fail:flush:<n>)")
        if self._drops or self._failing_flushes:
            log.warning("fault injection active: drops %s, failing flushes %s",
                        self._drops, sorted(self._failing_flushes))

    @classmethod
    def from_environment(cls) -> Faults:
        """The plan in ``HUDI_SINK_FAULTS`` (empty when unset)."""
        return cls(os.environ.get(ENV, ""))

    def should_drop(self, message_type: str) -> bool:
        remaining = self._drops.get(message_type, 0)
        if remaining <= 0:
            return False
        self._drops[message_type] = remaining - 1
        log.warning("fault injection: dropped a %s", message_type)
        return True

    def flush_fails(self, flush_seq: int) -> bool:
        """Whether the process's ``flush_seq``-th flush (from 1) must fail on every attempt."""
        return flush_seq in self._failing_flushes


#: The name earlier code used; the drop behaviour is unchanged.
MessageFaults = Faults
