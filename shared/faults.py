"""Fault injection for tests: drop control messages on purpose.

``HUDI_SINK_FAULTS="drop:START_COMMIT:1,drop:WRITE_STATUS:2"`` makes this process silently
drop its first 1 START_COMMIT and first 2 WRITE_STATUS sends, so a test can prove that lost
messages heal (re-announce / re-send) long before the write-status timeout. Unset in
production: every check is one dict lookup.
"""

from __future__ import annotations

import logging
import os

__all__ = ["MessageFaults"]

ENV = "HUDI_SINK_FAULTS"
log = logging.getLogger("hudi_sink.faults")


class MessageFaults:
    def __init__(self, spec: str | None = None) -> None:
        self._drops: dict[str, int] = {}
        for item in (spec if spec is not None else os.environ.get(ENV, "")).split(","):
            parts = item.strip().split(":")
            if len(parts) == 3 and parts[0] == "drop" and parts[2].isdigit():
                self._drops[parts[1]] = int(parts[2])
        if self._drops:
            log.warning("fault injection active: dropping %s", self._drops)

    def should_drop(self, message_type: str) -> bool:
        remaining = self._drops.get(message_type, 0)
        if remaining <= 0:
            return False
        self._drops[message_type] = remaining - 1
        log.warning("fault injection: dropped a %s", message_type)
        return True
