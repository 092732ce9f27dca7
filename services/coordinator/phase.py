"""The coordinator's phase, carrying the open transaction in the phases that have one.

STARTED, ENDED, COMMITTING and ABORTING are :class:`Open`: they hold their instant's
:class:`CommitState`. STANDBY, RECOVERING, IDLE and STOPPED are :class:`Closed`: they hold
none. Opening an instant takes its state, closing one drops it, and moving between open
phases keeps it, so "an instant is open but there is no state for it" (or a state left over
in IDLE) cannot be written down. Code that needs the open transaction gets it from the phase
(``advance`` returns it), never from a separate Optional beside a flag. Every change still
goes through ``COORDINATOR_TRANSITIONS`` (``IllegalTransition`` otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass

from hudi_sink.services.coordinator.commit_state import CommitState
from hudi_sink.shared.errors import IllegalTransition
from hudi_sink.shared.runtime.states import COORDINATOR_TRANSITIONS, CoordinatorPhase, StateMachine

__all__ = ["Open", "Closed", "Phase", "PhaseMachine", "OPEN_PHASES", "UNDECIDED_PHASES"]

_C = CoordinatorPhase
OPEN_PHASES = frozenset({_C.STARTED, _C.ENDED, _C.COMMITTING, _C.ABORTING})
UNDECIDED_PHASES = frozenset({_C.STARTED, _C.ENDED})
"""Open phases before any decision was asked for: an abort still applies to them."""


@dataclass(frozen=True)
class Open:
    """A phase of an open transaction, and that transaction."""

    name: CoordinatorPhase
    txn: CommitState

    def __post_init__(self) -> None:
        if self.name not in OPEN_PHASES:
            raise IllegalTransition(f"coordinator: {self.name.name} has no open transaction")


@dataclass(frozen=True)
class Closed:
    """A phase without an open transaction."""

    name: CoordinatorPhase

    def __post_init__(self) -> None:
        if self.name in OPEN_PHASES:
            raise IllegalTransition(f"coordinator: {self.name.name} needs its open transaction")


Phase = Open | Closed


class PhaseMachine:
    """The coordinator's current :data:`Phase` and the transition table it follows."""

    def __init__(self) -> None:
        self._machine = StateMachine("coordinator", _C.STANDBY, COORDINATOR_TRANSITIONS)
        self._now: Phase = Closed(_C.STANDBY)

    @property
    def now(self) -> Phase:
        return self._now

    @property
    def state(self) -> CoordinatorPhase:
        return self._now.name

    @property
    def txn(self) -> CommitState | None:
        """The open transaction, in an open phase (for readers: REST, instant reservation)."""
        return self._now.txn if isinstance(self._now, Open) else None

    def can(self, new: CoordinatorPhase) -> bool:
        return self._machine.can(new)

    def open(self, txn: CommitState) -> None:
        """IDLE → STARTED with the instant just started."""
        self._enter(Open(_C.STARTED, txn), txn.instant)

    def advance(self, new: CoordinatorPhase, reason: str | None = None) -> CommitState:
        """From the open transaction's phase to another phase of it; returns the transaction
        (``reason`` defaults to its instant). IllegalTransition when none is open."""
        if not isinstance(self._now, Open):
            raise IllegalTransition(f"coordinator: {self._now.name.name} → {new.name} not allowed: "
                                    "no open transaction")
        txn = self._now.txn
        self._enter(Open(new, txn), txn.instant if reason is None else reason)
        return txn

    def close(self, new: CoordinatorPhase, reason: str) -> None:
        """To a phase without an open transaction (the open one, if any, is dropped)."""
        self._enter(Closed(new), reason)

    def _enter(self, phase: Phase, reason: str) -> None:
        self._machine.transition_to(phase.name, reason)
        self._now = phase
