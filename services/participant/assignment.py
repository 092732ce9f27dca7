"""Which partitions this participant owns, across rebalances — bookkeeping only, no I/O.

The development broker (and Kafka's eager protocol) revokes every partition on each
rebalance and then assigns the new set. A partition that comes back to the same member keeps
its state (its open instant, buffered rows, staged files), so a rebalance costs no aborted
transaction; a partition that went to another member is *abandoned*: its running flushes
must not write any more, and nothing of its instant is reported from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from aiokafka import TopicPartition as KafkaTopicPartition

from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.shared.kafka.partition_key import PartitionKey

__all__ = ["PartitionRegistry", "AppliedAssignment"]

Key = PartitionKey


@dataclass
class AppliedAssignment:
    owned: list[tuple[KafkaTopicPartition, TransactionParticipant]] = field(default_factory=list)
    """Every assigned partition with its (kept or new) state."""
    abandoned: list[TransactionParticipant] = field(default_factory=list)
    """States of partitions that moved to another member."""


class PartitionRegistry:
    def __init__(self, new_state: Callable[[str, int], TransactionParticipant]) -> None:
        self._new_state = new_state
        self.active: dict[Key, TransactionParticipant] = {}
        self._parked: dict[Key, TransactionParticipant] = {}
        self._pending: list[KafkaTopicPartition] | None = None
        self.joined = False
        """Whether the group assigned us anything yet (readiness)."""

    def revoked(self, revoked: list[KafkaTopicPartition]) -> None:
        """Park the states: they come back if the partition returns to this member."""
        for ktp in revoked:
            state = self.active.pop((ktp.topic, ktp.partition), None)
            if state is not None:
                self._parked[state.key] = state

    def assigned(self, assigned: list[KafkaTopicPartition]) -> None:
        """Record an assignment; the data routine applies it at the top of its loop."""
        self._pending = assigned
        self.joined = True

    @property
    def has_pending(self) -> bool:
        return self._pending is not None

    def apply(self) -> AppliedAssignment | None:
        assigned, self._pending = self._pending, None
        if assigned is None:
            return None
        result = AppliedAssignment()
        for ktp in assigned:
            key = (ktp.topic, ktp.partition)
            state = self._parked.pop(key, None) or self.active.get(key)
            if state is None:
                state = self._new_state(ktp.topic, ktp.partition)
            self.active[key] = state
            result.owned.append((ktp, state))
        for state in self._parked.values():
            state.abandoned = True
            result.abandoned.append(state)
        self._parked.clear()
        return result
