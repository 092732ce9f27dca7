"""No fixed sleeps in the unit tests: a test waits for what it means (``eventually``), an
event, or a clock it moves itself (``manual_clock``), never for "long enough".

A constant ``time.sleep``/``asyncio.sleep`` used to let something happen is too short on a
loaded machine (a flake) and too long everywhere else (every run pays the worst case).
``sleep(0)``, which only yields to the event loop once, is fine. The few constant sleeps
that remain are not synchronisation — a stand-in that *is* slow, or an actor's own cadence
while time passes — and are listed in ``ALLOWED`` with the reason; a listed one that is gone
must leave the list too.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from pathlib import Path

UNIT = Path(__file__).resolve().parent
ARITHMETIC: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow, ast.Mod: operator.mod}

ALLOWED: dict[tuple[str, str], str] = {
    ("test_shutdown_timeout.py", "Stubborn.on_stop"):
        "the stand-in service's work in hand takes 0.3 s of the shutdown budget: the slowness is "
        "what the test measures (on_stop and close share one bound), not a wait for anything",
    ("test_coordinator_protocol.py",
     "test_a_participant_still_preparing_its_report_is_waited_for_not_rolled_back"):
        "the scripted participant's heartbeat: it re-announces every 0.2 s for 2.5 s of real time, "
        "past the coordinator's 1 s write-status timeout (measured on the coordinator's own "
        "monotonic clock); the test is that nothing is rolled back while time passes",
    ("test_coordinator_protocol.py",
     "test_after_an_instant_that_outlasted_the_interval_upsert_mode_ends_the_next_at_once"):
        "the stimulus: the scripted participant's flushes take 3.5 s of real time, longer than "
        "the 3 s interval on the coordinator's own monotonic clock; the test is when the next "
        "END comes once that time has passed",
}


def _constants(tree: ast.Module) -> dict[str, float]:
    """Module-level ``NAME = <number>`` assignments (a sleep of ``POLL_S`` is still fixed)."""
    found: dict[str, float] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = _number(node.value, {}) if node.value is not None else None
            for target in targets:
                if isinstance(target, ast.Name) and value is not None:
                    found[target.id] = value
    return found


def _number(node: ast.expr, constants: dict[str, float]) -> float | None:
    """The value of a constant numeric expression (literals, module constants, arithmetic)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
            and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _number(node.operand, constants)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:
        left, right = _number(node.left, constants), _number(node.right, constants)
        if left is None or right is None:
            return None
        try:
            return float(ARITHMETIC[type(node.op)](left, right))
        except ArithmeticError:
            return None
    return None


def _is_sleep(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "sleep") or \
        (isinstance(node, ast.Name) and node.id == "sleep")


def _fixed_seconds(call: ast.Call, constants: dict[str, float]) -> float | None:
    """The constant duration of a sleep call — ``sleep(0.1)``, ``sleep(delay=0.1)``, or
    ``to_thread(time.sleep, 0.1)`` — or None when it is not one."""
    if _is_sleep(call.func):
        args = [*call.args[:1], *(k.value for k in call.keywords if k.arg in {"delay", "secs", "seconds"})]
    elif call.args and any(_is_sleep(a) for a in call.args):
        at = next(i for i, a in enumerate(call.args) if _is_sleep(a))
        args = call.args[at + 1:at + 2]
    else:
        return None
    return _number(args[0], constants) if args else None


def fixed_sleeps(source: str) -> list[tuple[str, int, float]]:
    """``(enclosing function's qualified name, line, seconds)`` of every constant, non-zero
    sleep in ``source``."""
    tree = ast.parse(source)
    constants = _constants(tree)
    found: list[tuple[str, int, float]] = []

    def visit(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = [*scope, child.name]
            if isinstance(child, ast.Call):
                seconds = _fixed_seconds(child, constants)
                if seconds:
                    found.append((".".join(scope) or "<module>", child.lineno, seconds))
            visit(child, inner)

    visit(tree, [])
    return found


def test_the_detector_finds_fixed_sleeps_in_every_disguise() -> None:
    source = """
import asyncio, time
from time import sleep
POLL_S = 0.05
class Fake:
    def slow(self):
        time.sleep(0.5)
async def waits():
    await asyncio.sleep(0.01)
    sleep(1)
    await asyncio.sleep(delay=2 * 0.1)
    await asyncio.sleep(POLL_S)
    await asyncio.to_thread(time.sleep, 3)
async def fine(pause, timeout_ms):
    await asyncio.sleep(0)
    await asyncio.sleep(pause)
    await asyncio.sleep(timeout_ms / 1000)
    time.sleep(0.0)
"""
    found = fixed_sleeps(source)
    assert [(scope, seconds) for scope, _, seconds in found] == [
        ("Fake.slow", 0.5), ("waits", 0.01), ("waits", 1.0), ("waits", 0.2), ("waits", 0.05),
        ("waits", 3.0)]


def test_no_unit_test_sleeps_a_fixed_time_outside_the_allow_list() -> None:
    seen: set[tuple[str, str]] = set()
    offending: list[str] = []
    for path in sorted(UNIT.glob("*.py")):
        for scope, line, seconds in fixed_sleeps(path.read_text()):
            key = (path.name, scope)
            if key in ALLOWED:
                seen.add(key)
            else:
                offending.append(f"{path.name}:{line} in {scope}: sleep({seconds:g})")
    assert not offending, (
        "fixed sleeps in tests/unit: wait for the condition (tests/eventually.py), an event, or "
        "move an injected clock (tests/manual_clock.py); a sleep that is not synchronisation "
        "goes into ALLOWED with its reason:\n" + "\n".join(offending))
    assert seen == set(ALLOWED), f"allowed sleeps no longer there: {set(ALLOWED) - seen}"
