"""The codebase's shape, checked on every run: modules stay small enough to read whole, and
no two production modules import each other (directly or around a longer loop).

Static analysis of ``services/`` and ``shared/`` with ``ast`` — every import counts,
including those under ``if TYPE_CHECKING:`` (a cycle hidden from the interpreter is still a
cycle for the reader).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("services", "shared")
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Project modules ``module`` imports; ``from pkg import name`` names the submodule
    ``pkg.name`` when there is one, else the package."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in known else base)
    return {t for t in targets if t in known and t != module}


def test_no_production_module_is_over_the_line_limit() -> None:
    too_long = {
        name: count
        for name, path in _modules().items()
        if (count := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not too_long, f"modules over {MAX_LINES} lines (split them by feature): {too_long}"


def test_no_import_cycles() -> None:
    known = _modules()
    graph = {name: _imports(name, path, known) for name, path in known.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path) -> None:
    """The checker itself: two modules importing each other are reported."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from shared import b\n")
    b.write_text("import shared.a\n")
    known = {"shared.a": a, "shared.b": b}
    assert _imports("shared.a", a, known) == {"shared.b"}
    assert _imports("shared.b", b, known) == {"shared.a"}
