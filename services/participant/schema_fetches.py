"""Writer schemas fetched off the event loop.

The participant decodes fetched records on its event loop (``TransactionParticipant.accept``
in the intake). A registry lookup made there — blocking ``urllib`` — stopped the whole loop
for as long as the registry took: the timeout for every deferred partition on each retry
while connections were dropped, far longer for a reply that trickles; meanwhile no heartbeat
and no control message, and the group evicted the consumer. :class:`BackgroundSchemas` never
blocks: ``get`` answers from what is known, or has the schema fetched in a worker thread and
raises :class:`SchemaPending` — a ``RegistryUnavailable``, so the record is ``Deferred`` and
its partition paused. The intake resumes the partitions it paused as soon as a fetch settles
(:attr:`BackgroundSchemas.settled` changes), without waiting out their pause.

- A fetch still running ``deadline_s`` after it started answers ``RegistryUnavailable`` (the
  partition waits as in an outage); its thread is left to end (the client's own deadline
  bounds it), and no second fetch of that id starts meanwhile.
- A failed fetch's answer (``RegistryUnavailable``, or ``UnknownSchemaId``: a bad record)
  stands for ``retry_s``, then the next ``get`` asks again: a registry that refuses at once
  is asked once per ``retry_s``, not on every turn of the loop, and a stream of records of an
  unknown id is rejected without a request each.
- At most :data:`MAX_FETCHES` fetches run at once (each of another id): records naming ever
  new ids cannot start a thread each.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hudi_sink.shared.errors import HudiSinkError
from hudi_sink.shared.schema.registry import RegistryUnavailable, UnknownSchemaId, WriterSchemas

__all__ = ["BackgroundSchemas", "SchemaPending", "MAX_FETCHES"]

MAX_FETCHES = 4


class SchemaPending(RegistryUnavailable):
    """The schema is being fetched (or waits for a free fetch): ask again shortly."""


@dataclass
class _Fetch:
    started: float
    error: HudiSinkError | None = None
    """Set when the fetch failed; it stands until ``settled_at + retry_s``."""
    settled_at: float | None = None


class BackgroundSchemas:
    """``inner``'s schemas, its blocking lookups made in worker threads (see the module
    docstring). ``clock``: monotonic seconds, injectable for tests."""

    def __init__(self, inner: WriterSchemas, *, deadline_s: float, retry_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._inner = inner
        self._deadline_s = deadline_s
        self._retry_s = retry_s
        self._clock = clock
        self._known: dict[int, dict[str, Any]] = {}
        self._fetches: dict[int, _Fetch] = {}
        self._lock = threading.Lock()
        self.settled = 0
        """How many fetches ended (either way); a change wakes the partitions waiting."""

    @property
    def fetching(self) -> int:
        """Fetches running now."""
        with self._lock:
            return self._running()

    def _running(self) -> int:  # the caller holds the lock
        return sum(1 for f in self._fetches.values() if f.settled_at is None)

    def cached(self, schema_id: int) -> dict[str, Any] | None:
        return self._known.get(schema_id) or self._inner.cached(schema_id)

    def get(self, schema_id: int) -> dict[str, Any]:
        schema = self.cached(schema_id)
        if schema is not None:
            return schema
        with self._lock:
            now = self._clock()
            fetch = self._fetches.get(schema_id)
            if fetch is not None and fetch.settled_at is not None:
                if fetch.error is not None and now < fetch.settled_at + self._retry_s:
                    raise type(fetch.error)(str(fetch.error))  # its answer, for now
                del self._fetches[schema_id]  # time to ask again
                fetch = None
            if fetch is None:
                running = self._running()
                if running >= MAX_FETCHES:
                    raise SchemaPending(f"schema id {schema_id}: waiting for one of the "
                                        f"{running} registry fetches running to end")
                fetch = self._fetches[schema_id] = _Fetch(started=now)
                threading.Thread(target=self._fetch, args=(schema_id, fetch), daemon=True,
                                 name=f"schema-fetch-{schema_id}").start()
            elif now - fetch.started > self._deadline_s:
                raise RegistryUnavailable(f"schema id {schema_id}: no answer from the registry "
                                          f"within {self._deadline_s:g} s")
        raise SchemaPending(f"schema id {schema_id}: being fetched from the registry")

    def _fetch(self, schema_id: int, fetch: _Fetch) -> None:
        """The worker thread: one lookup, its outcome kept."""
        error: HudiSinkError | None = None
        schema = None
        try:
            schema = self._inner.get(schema_id)
        except (UnknownSchemaId, RegistryUnavailable) as exc:
            error = exc
        except Exception as exc:  # noqa: BLE001 - any other failure is no verdict on the record
            error = RegistryUnavailable(f"schema id {schema_id}: lookup failed: "
                                        f"{type(exc).__name__}: {exc}")
        with self._lock:
            fetch.error, fetch.settled_at = error, self._clock()
            if schema is not None:
                self._known[schema_id] = schema
                self._fetches.pop(schema_id, None)
            self.settled += 1
