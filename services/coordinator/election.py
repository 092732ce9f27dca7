"""Leader election through Kafka group membership (Hudi's partition-0 idea).

Every coordinator process joins group ``<name>-coordinator`` subscribed to the 1-partition
control topic; the member assigned partition 0 leads. The partition is paused at once (the
control channel reads the topic; this consumer only holds the lease and heartbeats).

Group membership alone is not fencing: a frozen leader may still believe it leads. The
table-level fence is the sink log (``shared.hudi.sink_log``); this class only decides who *tries*.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.kafka.connection import consumer_options

__all__ = ["LeaderElection", "LeaderStickyAssignor"]

log = logging.getLogger("hudi_sink.election")


class LeaderStickyAssignor(AbstractPartitionAssignor):
    """Keeps partition 0 (the leadership) with the member that leads the newest epoch.

    Range/round-robin would hand it to the smallest member id, so every standby that joins
    could steal leadership and cost an aborted transaction. Each member advertises the epoch
    it leads with (0 when standing by) in its subscription user data; the group leader
    assigns partition 0 to the highest one, and only to the smallest member id when nobody
    leads (first start, or the leader died).
    """

    name = "hudi-sink-leader-sticky"
    version = 0

    def __init__(self, leading_epoch: Callable[[], int]) -> None:
        self._leading_epoch = leading_epoch

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        return ConsumerProtocolMemberMetadata(
            self.version, sorted(topics), str(self._leading_epoch()).encode()
        )

    def assign(
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        def epoch(member: str) -> int:
            try:
                return int(members[member].user_data or b"0")
            except ValueError:
                return 0

        chosen = max(sorted(members), key=epoch) if members else None  # ties: smallest id
        topics = sorted({t for m in members.values() for t in m.subscription})
        result = {}
        for member in members:
            assignment = [(t, [0]) for t in topics if member == chosen]
            result[member] = ConsumerProtocolMemberAssignment(self.version, assignment, b"")
        return result

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        return None


class _Listener(ConsumerRebalanceListener):
    def __init__(self, election: LeaderElection) -> None:
        self._election = election

    async def on_partitions_revoked(self, revoked: Any) -> None:
        # Eager rebalancing revokes everything each time; leadership is decided by the
        # assignment that follows (keeping it if partition 0 comes back to us).
        return None

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self._election._assigned(list(assigned))


class LeaderElection:
    def __init__(
        self, config: SinkConfig, member_id: str, leading_epoch: Callable[[], int] = lambda: 0
    ) -> None:
        self._config = config
        self._assignor = LeaderStickyAssignor(leading_epoch)
        self._member_id = member_id
        self._tp = KafkaTopicPartition(config.control_topic, 0)
        self._consumer: AIOKafkaConsumer | None = None
        self._leader = False
        self.joined = False
        self.generation = 0
        """Counts assignments; a fenced leader waits for a newer one before trying again."""
        self.changed = asyncio.Event()

    @property
    def is_leader(self) -> bool:
        return self._leader

    async def start(self) -> None:
        self._consumer = AIOKafkaConsumer(
            **consumer_options(self._config.kafka, self._config.coordinator_group),
            client_id=f"coordinator-{self._member_id}",
            partition_assignment_strategy=(self._assignor,),
        )
        await self._consumer.start()
        self._consumer.subscribe(topics=[self._config.control_topic], listener=_Listener(self))

    def _assigned(self, assigned: list[KafkaTopicPartition]) -> None:
        self.joined = True
        self.generation += 1
        if self._consumer is not None and assigned:
            self._consumer.pause(*assigned)
        leader = self._tp in assigned
        if leader != self._leader:
            log.info("coordinator %s %s leadership", self._member_id, "won" if leader else "lost")
            self._leader = leader
            self.changed.set()

    async def run(self) -> None:
        """Keep polling so the group membership (the lease) stays alive."""
        assert self._consumer is not None
        while True:
            await self._consumer.getmany(timeout_ms=500)

    async def stop(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            try:
                await consumer.stop()  # leaves the group: a standby takes over at once
            except Exception as exc:  # noqa: BLE001 - shutting down anyway
                log.warning("election consumer stop failed: %s", exc)
        self._leader = False
