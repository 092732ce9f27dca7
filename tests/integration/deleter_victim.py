"""A deleter process for crash tests: the real ``DeleterService`` on the real broker and real
files, brought to a halt at one exact point so the test can SIGKILL it there.

    python deleter_victim.py CONFIG_JSON MODE MARKER

``MODE``:
- ``after-delete``: the first offset commit halts, after its batch's deletes were done;
- ``mid-batch:N``: the delete after the N-th halts, in the middle of the batch.

At the halt it writes MARKER (JSON: files deleted so far) and waits to be killed; the event
loop keeps running, so the member stays in its group exactly as a slow pod would. Scheduled
work is off: the test is about intents.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer
from deleter_harness import NO_SCHEDULED_WORK

from hudi_sink.services.deleter.service import DeleterService
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.kafka.clients import KafkaClientFactory
from hudi_sink.shared.kafka.connection import consumer_options
from hudi_sink.shared.storage.fs import LocalFileSystem


class Halt:
    """Writes the marker once and then never returns."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker
        self.deleted: list[str] = []

    def reached(self, where: str) -> None:
        tmp = self.marker.with_suffix(".tmp")
        tmp.write_text(json.dumps({"at": where, "deleted": self.deleted}))
        tmp.rename(self.marker)


class GatedFileSystem(LocalFileSystem):
    """Deletes ``allowed`` files, then halts the next delete (and every one after it)."""

    def __init__(self, halt: Halt, allowed: int | None) -> None:
        self._halt = halt
        self._allowed = allowed
        self._lock = threading.Lock()

    def delete(self, path: str) -> bool:
        with self._lock:
            if self._allowed is not None and len(self._halt.deleted) >= self._allowed:
                self._halt.reached("delete")
                threading.Event().wait()  # until SIGKILL
            removed = super().delete(path)
            if removed:
                self._halt.deleted.append(path)
            return removed


class HaltingConsumer(AIOKafkaConsumer):
    """Halts at its first offset commit."""

    halt: Halt

    async def commit(self, offsets: Any = None) -> None:
        self.halt.reached("commit")
        await asyncio.Event().wait()  # until SIGKILL


class HaltingClients(KafkaClientFactory):
    """The deleter's clients, with a group consumer that halts at its first commit."""

    def __init__(self, config: SinkConfig, halt: Halt) -> None:
        super().__init__(config)
        self.halt = halt

    async def consumer(self, group: str | None, client_id: str | None = None) -> AIOKafkaConsumer:
        consumer = HaltingConsumer(**consumer_options(self.config.kafka, group, client_id))
        consumer.halt = self.halt
        await consumer.start()
        return consumer


def main() -> None:
    config = SinkConfig.model_validate_json(Path(sys.argv[1]).read_text())
    mode, marker = sys.argv[2], Path(sys.argv[3])
    halt = Halt(marker)
    if mode == "after-delete":
        service = DeleterService(config, fs=GatedFileSystem(halt, None), schedule=NO_SCHEDULED_WORK,
                                 clients=HaltingClients(config, halt))
    elif mode.startswith("mid-batch:"):
        allowed = int(mode.split(":", 1)[1])
        service = DeleterService(config, fs=GatedFileSystem(halt, allowed), schedule=NO_SCHEDULED_WORK)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    asyncio.run(service.run())


if __name__ == "__main__":
    main()
