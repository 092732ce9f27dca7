"""Explicit state machines: an enum of states plus a table of allowed transitions.

Every change goes through ``StateMachine.transition_to``, which refuses transitions the table
does not list (``IllegalTransition``) and logs old → new, so the state of a coordinator or a
partition is never the accidental sum of scattered flags.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from enum import Enum
from typing import Generic, TypeVar

from hudi_sink.shared.errors import IllegalTransition

__all__ = [
    "StateMachine",
    "ServicePhase",
    "SERVICE_TRANSITIONS",
    "CoordinatorPhase",
    "COORDINATOR_TRANSITIONS",
    "PartitionPhase",
    "PARTITION_TRANSITIONS",
]

S = TypeVar("S", bound=Enum)


class StateMachine(Generic[S]):
    """Current state plus the transition table it must follow."""

    def __init__(
        self,
        name: str,
        initial: S,
        transitions: Mapping[S, frozenset[S]],
        logger: logging.Logger | None = None,
    ) -> None:
        self._name = name
        self._state = initial
        self._transitions = transitions
        self._log = logger or logging.getLogger("hudi_sink.states")

    @property
    def state(self) -> S:
        return self._state

    def can(self, new: S) -> bool:
        return new in self._transitions.get(self._state, frozenset())

    def transition_to(self, new: S, reason: str = "") -> None:
        if not self.can(new):
            raise IllegalTransition(f"{self._name}: {self._state.name} → {new.name} not allowed")
        self._log.debug(
            "%s: %s → %s%s", self._name, self._state.name, new.name, f" ({reason})" if reason else ""
        )
        self._state = new


class ServicePhase(Enum):
    """Life of a service process (every service: coordinator, participant, deleter)."""

    CREATED = "created"
    STARTING = "starting"  # Kafka, topics, clients (and Spark) being brought up
    RUNNING = "running"  # routines run until stop or crash
    STOPPING = "stopping"  # intake stopped, work in hand finished or abandoned, clients closed
    STOPPED = "stopped"


_S = ServicePhase
SERVICE_TRANSITIONS: Mapping[ServicePhase, frozenset[ServicePhase]] = {
    _S.CREATED: frozenset({_S.STARTING}),
    _S.STARTING: frozenset({_S.RUNNING, _S.STOPPING}),
    _S.RUNNING: frozenset({_S.STOPPING}),
    _S.STOPPING: frozenset({_S.STOPPED}),
    _S.STOPPED: frozenset(),
}


class CoordinatorPhase(Enum):
    """Life of the coordinator process (one transaction at a time)."""

    STANDBY = "standby"  # not the elected leader; waits
    RECOVERING = "recovering"  # elected: claims an epoch, rolls the table forward/back
    IDLE = "idle"  # leader, no open instant
    STARTED = "started"  # START_COMMIT sent, participants write
    ENDED = "ended"  # END_COMMIT sent, collecting WRITE_STATUS
    COMMITTING = "committing"  # every partition answered; writing the Hudi commit
    ABORTING = "aborting"  # timeout/forced abort: rolling the instant back
    STOPPED = "stopped"


_C = CoordinatorPhase
COORDINATOR_TRANSITIONS: Mapping[CoordinatorPhase, frozenset[CoordinatorPhase]] = {
    _C.STANDBY: frozenset({_C.RECOVERING, _C.STOPPED}),
    _C.RECOVERING: frozenset({_C.IDLE, _C.STANDBY, _C.STOPPED}),
    _C.IDLE: frozenset({_C.STARTED, _C.STANDBY, _C.STOPPED}),
    _C.STARTED: frozenset({_C.ENDED, _C.ABORTING, _C.STANDBY, _C.STOPPED}),
    _C.ENDED: frozenset({_C.COMMITTING, _C.ABORTING, _C.STANDBY, _C.STOPPED}),
    _C.COMMITTING: frozenset({_C.IDLE, _C.ABORTING, _C.STANDBY, _C.STOPPED}),
    _C.ABORTING: frozenset({_C.IDLE, _C.STANDBY, _C.STOPPED}),
    _C.STOPPED: frozenset(),
}


class PartitionPhase(Enum):
    """Life of one assigned Kafka partition inside a participant."""

    WAITING = "waiting"  # paused; no instant known (or the last one was acked)
    WRITING = "writing"  # consuming and buffering for instant T
    DRAINING = "draining"  # END_COMMIT received: take in what was already fetched, briefly
    ENDING = "ending"  # drained (paused): final flush, dead letters, then WRITE_STATUS
    REPORTED = "reported"  # WRITE_STATUS sent; paused until ACK or a new START
    FAILED = "failed"  # errors.tolerance=fail hit a bad record; stops before it


_P = PartitionPhase
PARTITION_TRANSITIONS: Mapping[PartitionPhase, frozenset[PartitionPhase]] = {
    _P.WAITING: frozenset({_P.WRITING}),
    _P.WRITING: frozenset({_P.WRITING, _P.DRAINING, _P.FAILED}),
    _P.DRAINING: frozenset({_P.ENDING, _P.FAILED, _P.WRITING}),
    _P.ENDING: frozenset({_P.REPORTED, _P.WRITING}),
    _P.REPORTED: frozenset({_P.WAITING, _P.WRITING}),
    _P.FAILED: frozenset({_P.ENDING, _P.WRITING}),
}
