"""Kafka client plumbing shared by every service (aiokafka 0.14).

One place decides the client settings so the coordinator, participants and deleter can
never drift apart on things that matter for exactly-once: manual commits only, acks=all,
and no idempotent producer (the development broker cannot serve aiokafka's InitProducerId
v0; Kafka can, but the protocol does not need it: README, "Pointing at a real Kafka").

Topic metadata is always read with an *all topics* Metadata request: naming a topic in
the request lets the broker auto-create it (tansu does, with 4 partitions; Kafka does too
while ``auto.create.topics.enable`` is on, its default), which would turn "is the data topic
there?" into "create a wrong data topic".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, for_code
from aiokafka.helpers import create_ssl_context

from hudi_sink.shared.config.settings import KafkaConfig
from hudi_sink.shared.errors import ConfigError, HudiSinkBug
from hudi_sink.shared.kafka.sasl import sasl_options

__all__ = [
    "TopicAdmin",
    "client_options",
    "consumer_options",
    "producer_options",
    "wait_for_kafka",
]

MIB = 1024 * 1024
_TOPIC_ALREADY_EXISTS = 36
_UNKNOWN_TOPIC = 3
_TRANSIENT_ERRORS = (KafkaError, OSError, TimeoutError)
"""Failures that mean "not reachable yet" (refused, DNS, TLS, timeouts, broker errors)."""


def _servers(kafka: KafkaConfig) -> list[str]:
    return [s.strip() for s in kafka.bootstrap_servers.split(",") if s.strip()]


def client_options(kafka: KafkaConfig, client_id: str | None = None) -> dict[str, Any]:
    """Connection kwargs common to aiokafka consumers, producers and the admin client."""
    options: dict[str, Any] = {
        "bootstrap_servers": _servers(kafka),
        "security_protocol": kafka.security_protocol,
    }
    if client_id:
        options["client_id"] = client_id
    options.update(sasl_options(kafka))
    if kafka.security_protocol in ("SSL", "SASL_SSL"):
        # Built per call (cheap, start-up only) so rotated certificate files are picked up
        # when a service restarts its clients.
        options["ssl_context"] = create_ssl_context(
            cafile=kafka.ssl_cafile,
            certfile=kafka.ssl_certfile,
            keyfile=kafka.ssl_keyfile,
        )
    return options


def _heartbeat_ms(kafka: KafkaConfig) -> int:
    """An explicit setting wins; otherwise a fifth of the session timeout, kept in
    [500, 3000] ms so short test sessions still detect failures fast and long sessions do
    not hammer the coordinator."""
    if kafka.heartbeat_interval_ms is not None:
        return kafka.heartbeat_interval_ms
    return max(500, min(3000, kafka.session_timeout_ms // 5))


def consumer_options(
    kafka: KafkaConfig, group_id: str | None, client_id: str | None = None
) -> dict[str, Any]:
    """Kwargs for ``AIOKafkaConsumer``.

    Offsets are committed by the sink itself, only after the data is durable, so auto
    commit is off. ``kafka.isolation_level`` defaults to read_committed: producers that use
    Kafka transactions (Kafka Streams or Flink exactly-once, Debezium's exactly-once source)
    abort transactions as a matter of course, and those records must never reach the table;
    an open transaction's records (and everything after them in the partition) are withheld
    by the broker until it ends. The sink's own topics are written without transactions, so
    the setting changes nothing for them. Fetch sizes allow the largest accepted record
    (``errors.max_record_bytes`` defaults to 10 MiB) to arrive while keeping one fetch bounded.
    """
    options = client_options(kafka, client_id)
    options.update(
        group_id=group_id,
        session_timeout_ms=kafka.session_timeout_ms,
        heartbeat_interval_ms=_heartbeat_ms(kafka),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=kafka.isolation_level,
        max_partition_fetch_bytes=4 * MIB,
        fetch_max_bytes=16 * MIB,
    )
    return options


def producer_options(kafka: KafkaConfig, client_id: str | None = None) -> dict[str, Any]:
    """Kwargs for ``AIOKafkaProducer``.

    acks=all so an acknowledged control or DLQ message survives a broker failover.
    Idempotence stays off: aiokafka 0.14 only speaks InitProducerId v0, which tansu answers
    with UnknownError (Kafka 4.3.1 serves it); duplicates from retries are handled by the
    sink's protocol instead.
    """
    options = client_options(kafka, client_id)
    options.update(
        acks="all",
        enable_idempotence=False,
        linger_ms=5,
        max_request_size=16 * MIB,
        request_timeout_ms=30000,
    )
    return options


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _probe(kafka: KafkaConfig, timeout_s: float) -> None:
    """Connect, fetch cluster metadata, require at least one broker, disconnect."""
    admin = AIOKafkaAdminClient(
        **client_options(kafka, client_id="hudi-sink-probe"),
        request_timeout_ms=max(1000, int(timeout_s * 1000)),
    )
    try:
        await admin.start()
        cluster = await admin.describe_cluster()
        if not cluster.get("brokers"):
            raise KafkaError("cluster metadata lists no brokers")
    finally:
        await admin.close()


def _raise_if_cancelled() -> None:
    """Re-raise a cancellation that an attempt swallowed. Python 3.11's ``wait_for`` returns
    the inner result (or raises its error) when the cancel lands as the probe finishes (so
    loops that must stop on cancel wait with ``asyncio.timeout`` instead), and a client may
    catch CancelledError itself; the loop would then retry until
    ``startup_timeout_s`` while a SIGTERMed pod should stop (seen once in CI: a coordinator
    still waiting 20 s after SIGTERM, ``test_sigterm_during_startup_stops_promptly``)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def wait_for_kafka(
    kafka: KafkaConfig, on_attempt: Callable[[str], None] | None = None
) -> None:
    """Block (asynchronously) until the cluster answers, for ``kafka.startup_timeout_s``.

    Services start before or together with Kafka (compose, k8s), so a refused connection at
    start is normal and is retried with exponential backoff; ``on_attempt`` receives a
    readable reason after every failure so /ready can say *why* the service is not ready.
    Giving up raises ConfigError because by then a wrong address is the likely cause.
    """
    loop = asyncio.get_running_loop()
    timeout_s = kafka.startup_timeout_s
    deadline = loop.time() + timeout_s
    servers = kafka.bootstrap_servers
    delay = 0.1
    attempt = 0
    while True:
        attempt += 1
        remaining = deadline - loop.time()
        attempt_timeout = min(15.0, max(1.0, remaining))
        try:
            await asyncio.wait_for(_probe(kafka, attempt_timeout), timeout=attempt_timeout)
            return
        except TimeoutError:
            last_error = f"no answer within {attempt_timeout:g} s"
        except _TRANSIENT_ERRORS as exc:
            last_error = _describe(exc)
        _raise_if_cancelled()
        remaining = deadline - loop.time()
        if on_attempt is not None:
            outlook = f"retrying in {min(delay, remaining):.1f} s" if remaining > 0 else "giving up"
            on_attempt(
                f"Kafka not reachable at {servers} (attempt {attempt}, {outlook}): {last_error}"
            )
        if remaining <= 0:
            raise ConfigError(
                f"Kafka not reachable at {servers} after {timeout_s:g} s: {last_error}",
                "kafka.bootstrap_servers",
            )
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, 5.0)


class TopicAdmin:
    """Topic inspection and creation, as an async context manager around the admin client.

    All checks go through an all-topics metadata request (see module docstring), so
    looking at a topic never creates it.
    """

    def __init__(
        self,
        kafka: KafkaConfig,
        *,
        client_id: str = "hudi-sink-admin",
        request_timeout_ms: int = 30000,
    ) -> None:
        self._kafka = kafka
        self._client_id = client_id
        self._request_timeout_ms = request_timeout_ms
        self._admin: AIOKafkaAdminClient | None = None

    async def __aenter__(self) -> TopicAdmin:
        admin = AIOKafkaAdminClient(
            **client_options(self._kafka, self._client_id),
            request_timeout_ms=self._request_timeout_ms,
        )
        try:
            await admin.start()
        except BaseException:
            await admin.close()
            raise
        self._admin = admin
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            await admin.close()

    @property
    def admin(self) -> AIOKafkaAdminClient:
        """The underlying started admin client (for calls this class does not wrap)."""
        if self._admin is None:
            raise HudiSinkBug("TopicAdmin used outside 'async with'")
        return self._admin

    async def partition_counts(self, topics: list[str]) -> dict[str, int]:
        """Partition count of each existing topic among ``topics``; missing ones are absent."""
        wanted = set(topics)
        counts: dict[str, int] = {}
        for entry in await self.admin.describe_topics(None):  # None = all topics
            name = entry["topic"]
            if name in wanted and entry["error_code"] != _UNKNOWN_TOPIC and entry["partitions"]:
                counts[name] = len(entry["partitions"])
        return counts

    async def ensure_topic(
        self,
        name: str,
        partitions: int,
        *,
        exact_partitions: bool = False,
        config_key: str = "kafka",
        replication_factor: int | None = None,
    ) -> int:
        """Create ``name`` unless it exists; return its partition count.

        Its replication factor is ``replication_factor`` if given, else
        ``kafka.replication_factor``, or when unset the broker's ``default.replication.factor``:
        -1, which Kafka 4.3.1 and the development broker take as "the default" even in
        aiokafka's CreateTopics v3 (the protocol documents it from v4, Kafka 2.4); a broker
        that refuses it gets an error naming the topic, and the key fixes it.

        Several services start at once and may all try to create the same topic, so
        "already exists" from a concurrent creator counts as success. With
        ``exact_partitions`` an existing topic of another size is a ConfigError, because
        partition counts cannot be changed safely (and tansu cannot add partitions).
        """
        counts = await self.partition_counts([name])
        if name not in counts:
            response = await self.admin.create_topics(
                [self._new_topic(name, partitions, replication_factor)])
            # aiokafka returns per-topic errors in the response instead of raising.
            code, message = _topic_error(response, name)
            if code == 0:
                return partitions
            if code != _TOPIC_ALREADY_EXISTS:
                reason = message or for_code(code).__name__
                raise ConfigError(
                    f"cannot create topic {name!r} with {partitions} partition(s): "
                    f"error {code} ({reason})",
                    config_key,
                )
            counts = await self._wait_visible(name, config_key)
        existing = counts[name]
        if exact_partitions and existing != partitions:
            raise ConfigError(
                f"topic {name!r} has {existing} partitions but must have exactly {partitions}; "
                "delete it (or pick another sink name) and restart",
                config_key,
            )
        return existing

    def _new_topic(self, name: str, partitions: int, factor: int | None) -> NewTopic:
        factor = factor or self._kafka.replication_factor
        if factor is not None:
            return NewTopic(name=name, num_partitions=partitions, replication_factor=factor)
        # aiokafka's NewTopic takes -1 only beside a replica assignment: an empty one is
        # "no assignment" on the wire, so the broker picks the replicas.
        return NewTopic(name=name, num_partitions=partitions, replication_factor=-1,
                        replica_assignments={})

    async def _wait_visible(self, name: str, config_key: str) -> dict[str, int]:
        """After "already exists", wait for the topic to appear in metadata.

        On a real cluster a topic created a moment ago by someone else may not have
        leaders yet; give it a few seconds before calling it broken.
        """
        delay = 0.05
        for _ in range(10):
            counts = await self.partition_counts([name])
            if name in counts:
                return counts
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
        raise ConfigError(
            f"topic {name!r} reported as existing but has no partitions in metadata",
            config_key,
        )

    async def require_topics(self, topics: list[str]) -> dict[str, int]:
        """Partition counts of the data topics; all must already exist.

        The sink never creates data topics: a typo in ``kafka.topics`` must fail at start,
        not silently create an empty topic.
        """
        counts = await self.partition_counts(topics)
        missing = [t for t in topics if t not in counts]
        if missing:
            raise ConfigError(
                f"data topic(s) {', '.join(missing)} do not exist at "
                f"{self._kafka.bootstrap_servers}",
                "kafka.topics",
            )
        return {t: counts[t] for t in topics}

    async def wait_for_topics(
        self,
        topics: list[str],
        timeout_s: float,
        on_attempt: Callable[[str], None] | None = None,
    ) -> dict[str, int]:
        """``require_topics``, retried for ``timeout_s``: services may start before whoever
        creates the data topics; a topic that never appears is still a clear error."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return await self.require_topics(topics)
            except ConfigError as exc:
                if time.monotonic() >= deadline:
                    raise
                if on_attempt is not None:
                    on_attempt(f"waiting for data topic(s): {exc}")
                await asyncio.sleep(1)


def _topic_error(response: Any, name: str) -> tuple[int, str | None]:
    """(error_code, error_message) for ``name`` from any CreateTopicsResponse version."""
    for entry in response.topic_errors:
        if entry[0] == name:
            return int(entry[1]), (entry[2] if len(entry) > 2 else None)
    raise KafkaError(f"CreateTopics response does not mention topic {name!r}")
