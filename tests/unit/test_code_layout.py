"""The codebase's shape, checked on every run: modules stay small enough to read whole, and
no two production modules import each other (directly or around a longer loop).

Static analysis of ``services/``, ``shared/`` and ``cli/`` with ``ast`` — every import counts,
including those under ``if TYPE_CHECKING:`` (a cycle hidden from the interpreter is still a
cycle for the reader).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("services", "shared", "cli")
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found["hudi_sink." + ".".join(parts)] = path
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
    a.write_text("from hudi_sink.shared import b\n")
    b.write_text("import hudi_sink.shared.a\n")
    known = {"hudi_sink.shared.a": a, "hudi_sink.shared.b": b}
    assert _imports("hudi_sink.shared.a", a, known) == {"hudi_sink.shared.b"}
    assert _imports("hudi_sink.shared.b", b, known) == {"hudi_sink.shared.a"}


SERVICES = ("hudi_sink.services.coordinator", "hudi_sink.services.participant", "hudi_sink.services.deleter")


def _service_of(module: str) -> str | None:
    return next((s for s in SERVICES if module == s or module.startswith(f"{s}.")), None)


def test_only_the_routes_and_the_wiring_import_a_rest_module() -> None:
    """Domain code takes its view types from the service's ``views``; only ``rest`` itself
    and the service's wiring (``service``) may import a ``rest`` module."""
    known = _modules()
    rest_modules = {f"{s}.rest" for s in SERVICES}
    wiring = {f"{s}.{leaf}" for s in SERVICES for leaf in ("rest", "service")}
    offenders = {
        name: sorted(_imports(name, path, known) & rest_modules)
        for name, path in known.items()
        if _service_of(name) is not None and name not in wiring
    }
    offenders = {name: rest for name, rest in offenders.items() if rest}
    assert not offenders, f"domain modules importing a rest module: {offenders}"


def test_a_rest_module_imports_only_its_service_views_and_errors() -> None:
    """The other direction: routes answer with ``views`` models and reach the service
    through a Protocol, so a ``rest`` module imports no domain module of its service."""
    known = _modules()
    offenders = {
        f"{s}.rest": sorted(t for t in _imports(f"{s}.rest", known[f"{s}.rest"], known)
                            if _service_of(t) == s and t not in {f"{s}.views", f"{s}.errors"})
        for s in SERVICES
    }
    offenders = {name: targets for name, targets in offenders.items() if targets}
    assert not offenders, f"rest modules importing domain modules: {offenders}"


def _defined(path: Path) -> set[str]:
    """Names a module binds itself at module level (classes, functions, assignments)."""
    names: set[str] = set()
    stack: list[ast.stmt] = list(ast.parse(path.read_text(), str(path)).body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.If | ast.Try):
            stack.extend(node.body + node.orelse)
    return names


def _reexported(source_files: list[Path], known: dict[str, Path]) -> list[str]:
    """``file: from M import name`` where M is a coordinator module that does not define
    ``name`` itself (it only imported it): the importer should import it from its home."""
    found = []
    for path in source_files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or node.level or node.module not in known:
                continue
            target = known[node.module]
            defined = _defined(target)
            for alias in node.names:
                if f"{node.module}.{alias.name}" not in known and alias.name not in defined:
                    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                    found.append(f"{shown}: from {node.module} import {alias.name}")
    return found


def test_nothing_is_imported_through_a_coordinator_module_that_re_exports_it() -> None:
    """Importers import from where a name is defined: no coordinator module passes on what
    it imported (``__all__`` included), so moving a name never leaves a second home."""
    known = _modules()
    files = sorted(p for d in ("services", "shared", "cli", "tests") for p in (ROOT / d).rglob("*.py"))
    assert not _reexported(files, known)
    listed = {
        name: sorted(set(_all_of(path)) - _defined(path))
        for name, path in known.items() if not path.name == "__init__.py"
    }
    listed = {name: names for name, names in listed.items() if names}
    assert not listed, f"coordinator modules listing imported names in __all__: {listed}"


def _all_of(path: Path) -> list[str]:
    for node in ast.parse(path.read_text(), str(path)).body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                 for t in node.targets)
                and isinstance(node.value, ast.List | ast.Tuple)):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return []


def test_the_re_export_finder_finds_one(tmp_path: Path) -> None:
    """The checker itself: a name taken from a module that only imported it is reported."""
    home, relay, user = tmp_path / "home.py", tmp_path / "relay.py", tmp_path / "user.py"
    home.write_text("class Thing:\n    pass\n")
    relay.write_text("from hudi_sink.services.coordinator.home import Thing\nX = 1\n")
    user.write_text("from hudi_sink.services.coordinator.relay import Thing, X\n")
    known = {"hudi_sink.services.coordinator.home": home, "hudi_sink.services.coordinator.relay": relay}
    found = _reexported([user], known)
    assert len(found) == 1 and found[0].endswith("import Thing")


def test_no_two_test_files_share_a_name() -> None:
    """pytest imports test files by their base name (rootdir-relative imports, no packages):
    two ``test_x.py`` in different folders stop a one-process run at collection."""
    names: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    shared = {name: paths for name, paths in names.items() if len(paths) > 1}
    assert not shared, f"test files sharing a name: {shared}"
