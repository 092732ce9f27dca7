"""State machines: only the transitions of the table are allowed; everything else raises."""

from __future__ import annotations

import logging
from enum import Enum

import pytest

from hudi_sink.shared.errors import IllegalTransition
from hudi_sink.shared.runtime.states import (
    COORDINATOR_TRANSITIONS,
    PARTITION_TRANSITIONS,
    CoordinatorPhase,
    PartitionPhase,
    StateMachine,
)

C = CoordinatorPhase
P = PartitionPhase

COORDINATOR_ALLOWED = {
    (C.STANDBY, C.RECOVERING), (C.STANDBY, C.STOPPED),
    (C.RECOVERING, C.IDLE), (C.RECOVERING, C.STANDBY), (C.RECOVERING, C.STOPPED),
    (C.IDLE, C.STARTED), (C.IDLE, C.STANDBY), (C.IDLE, C.STOPPED),
    (C.STARTED, C.ENDED), (C.STARTED, C.ABORTING), (C.STARTED, C.STANDBY), (C.STARTED, C.STOPPED),
    (C.ENDED, C.COMMITTING), (C.ENDED, C.ABORTING), (C.ENDED, C.STANDBY), (C.ENDED, C.STOPPED),
    (C.COMMITTING, C.IDLE), (C.COMMITTING, C.ABORTING), (C.COMMITTING, C.STANDBY),
    (C.COMMITTING, C.STOPPED),
    (C.ABORTING, C.IDLE), (C.ABORTING, C.STANDBY), (C.ABORTING, C.STOPPED),
}

PARTITION_ALLOWED = {
    (P.WAITING, P.WRITING),
    (P.WRITING, P.WRITING), (P.WRITING, P.DRAINING), (P.WRITING, P.FAILED),
    (P.DRAINING, P.ENDING), (P.DRAINING, P.FAILED), (P.DRAINING, P.WRITING),
    (P.ENDING, P.REPORTED), (P.ENDING, P.WRITING),
    (P.REPORTED, P.WAITING), (P.REPORTED, P.WRITING),
    (P.FAILED, P.ENDING), (P.FAILED, P.WRITING),
}


def _pairs(phases: type[Enum]) -> list[tuple[Enum, Enum]]:
    return [(a, b) for a in phases for b in phases]


@pytest.mark.parametrize(("old", "new"), _pairs(CoordinatorPhase), ids=lambda p: p.name)
def test_coordinator_transition(old: CoordinatorPhase, new: CoordinatorPhase) -> None:
    machine = StateMachine("coordinator", old, COORDINATOR_TRANSITIONS)
    if (old, new) in COORDINATOR_ALLOWED:
        assert machine.can(new)
        machine.transition_to(new, "test")
        assert machine.state is new
    else:
        assert not machine.can(new)
        with pytest.raises(IllegalTransition, match=f"{old.name} → {new.name}"):
            machine.transition_to(new)
        assert machine.state is old  # a refused transition changes nothing


@pytest.mark.parametrize(("old", "new"), _pairs(PartitionPhase), ids=lambda p: p.name)
def test_partition_transition(old: PartitionPhase, new: PartitionPhase) -> None:
    machine = StateMachine("orders-0", old, PARTITION_TRANSITIONS)
    if (old, new) in PARTITION_ALLOWED:
        assert machine.can(new)
        machine.transition_to(new)
        assert machine.state is new
    else:
        assert not machine.can(new)
        with pytest.raises(IllegalTransition, match="orders-0"):
            machine.transition_to(new)
        assert machine.state is old


def test_every_state_has_a_row() -> None:
    assert set(COORDINATOR_TRANSITIONS) == set(CoordinatorPhase)
    assert set(PARTITION_TRANSITIONS) == set(PartitionPhase)


def test_stopped_is_terminal() -> None:
    assert COORDINATOR_TRANSITIONS[C.STOPPED] == frozenset()
    assert all(C.STOPPED in COORDINATOR_TRANSITIONS[s] for s in CoordinatorPhase if s is not C.STOPPED)


def test_coordinator_happy_path_and_abort() -> None:
    machine = StateMachine("coordinator", C.STANDBY, COORDINATOR_TRANSITIONS)
    for phase in (C.RECOVERING, C.IDLE, C.STARTED, C.ENDED, C.COMMITTING, C.IDLE,
                  C.STARTED, C.ENDED, C.ABORTING, C.IDLE, C.STANDBY, C.STOPPED):
        machine.transition_to(phase)
    assert machine.state is C.STOPPED
    with pytest.raises(IllegalTransition):
        machine.transition_to(C.STANDBY)


def test_partition_cannot_report_without_ending() -> None:
    machine = StateMachine("orders-0", P.WAITING, PARTITION_TRANSITIONS)
    with pytest.raises(IllegalTransition):
        machine.transition_to(P.REPORTED)
    machine.transition_to(P.WRITING)
    with pytest.raises(IllegalTransition):
        machine.transition_to(P.REPORTED)
    with pytest.raises(IllegalTransition):
        machine.transition_to(P.WAITING)  # only an ACK after a report ends the instant
    machine.transition_to(P.DRAINING)
    machine.transition_to(P.ENDING)
    machine.transition_to(P.REPORTED)
    machine.transition_to(P.WAITING)


def test_transition_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test_states")
    machine = StateMachine("orders-3", P.WAITING, PARTITION_TRANSITIONS, logger=logger)
    with caplog.at_level(logging.DEBUG, logger="test_states"):
        machine.transition_to(P.WRITING, "start T1")
    assert any(
        "orders-3" in r.getMessage() and "WAITING" in r.getMessage() and "WRITING" in r.getMessage()
        and "start T1" in r.getMessage()
        for r in caplog.records
    )


def test_unknown_state_in_table_is_refused() -> None:
    class Other(Enum):
        A = "a"
        B = "b"

    machine = StateMachine("x", Other.A, {Other.A: frozenset()})
    assert not machine.can(Other.B)
    with pytest.raises(IllegalTransition):
        machine.transition_to(Other.B)
