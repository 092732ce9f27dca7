"""``shared.hudi.layout`` is the one home of the table's on-disk names.

Every production module (``services/``, ``shared/``) is parsed with ``ast`` and each string
constant in code — f-string pieces included, docstrings excluded (they may describe a path;
they never build one) — is checked against the names the sink reads and writes inside a
table: ``.hoodie`` and what it holds, the sink's state directories under ``.hoodie/.sink``,
timeline suffixes. A module that spells one builds a path layout.py does not know about, so a
layout change would miss it; it must take the name from ``layout`` instead.

A string that merely contains such a word without being a path (a log message, a metric
label) does not match the patterns, which look at path components; the allow-list is for the
rare string that matches and still is not a path, each with its reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("services", "shared")
LAYOUT = Path("shared/hudi/layout.py")


def _component(name: str) -> re.Pattern[str]:
    """``name`` as a whole path component: ``.sink``, ``x/.sink``, ``.sink/y``, ``/.sink``."""
    return re.compile(rf"(^|/){re.escape(name)}(/|$)")


def _in_path(name: str) -> re.Pattern[str]:
    """``name`` as a component of a string that holds a ``/`` (a bare word is no path)."""
    escaped = re.escape(name)
    return re.compile(rf"(^|/){escaped}/|/{escaped}$")


PATH_NAMES: dict[str, re.Pattern[str]] = {
    ".hoodie": re.compile(r"\.hoodie"),  # the metafolder and .hoodie_partition_metadata
    "hoodie.properties": re.compile(re.escape("hoodie.properties")),
    ".temp": _component(".temp"),
    ".sink": _component(".sink"),
    ".aux": _component(".aux"),
    "archived": _component("archived"),
    "checkpoint": _component("checkpoint"),
    "log/": _in_path("log"),
    "clean/": _in_path("clean"),
    "probe/": _in_path("probe"),
    "deleter/": _in_path("deleter"),
    "warmup-": re.compile(r"(^|/)warmup-"),
    "schedule.json": re.compile(re.escape("schedule.json")),
    "dlq-replayed.json": re.compile(re.escape("dlq-replayed.json")),
    "table.json": re.compile(re.escape("table.json")),
    "timeline suffix": re.compile(r"(^|\.)(replacecommit|commit)\.(requested|inflight)$"),
}

ALLOWED: dict[tuple[str, str], str] = {}
"""``(module path, string)`` → why the string is not a path. Empty: nothing needs one."""


def _docstring_nodes(tree: ast.AST) -> set[int]:
    """Module, class and function docstrings and attribute docstrings (a bare string
    statement): prose, not code."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            found.add(id(node.value))
    return found


def spelled_paths(source: str) -> list[tuple[int, str, str]]:
    """``(line, string, path name)`` for each code string constant of ``source`` that spells
    one of :data:`PATH_NAMES`."""
    tree = ast.parse(source)
    prose = _docstring_nodes(tree)
    hits = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in prose):
            for name, pattern in PATH_NAMES.items():
                if pattern.search(node.value):
                    hits.append((node.lineno, node.value, name))
    return sorted(hits)


def _production_modules() -> list[Path]:
    return [path.relative_to(ROOT) for package in PACKAGES
            for path in sorted((ROOT / package).rglob("*.py"))]


def test_no_production_module_but_layout_spells_a_table_path() -> None:
    offenders = [
        f"{module}:{line}: {text!r} spells {name!r}"
        for module in _production_modules() if module != LAYOUT
        for line, text, name in spelled_paths((ROOT / module).read_text())
        if (str(module), text) not in ALLOWED
    ]
    assert not offenders, (
        "on-disk names belong in shared/hudi/layout.py; take them from there:\n"
        + "\n".join(offenders))


def test_layout_itself_spells_them() -> None:
    """The scan reads the modules it means to: layout.py, the one module allowed, is found
    and its names match (so an empty result elsewhere is not a scan that saw nothing)."""
    assert LAYOUT in _production_modules()
    names = {name for _, _, name in spelled_paths((ROOT / LAYOUT).read_text())}
    assert {".hoodie", "hoodie.properties", ".temp", ".sink", "archived", "checkpoint",
            "log/", "clean/", "probe/", "deleter/", "warmup-", "schedule.json",
            "dlq-replayed.json", "table.json", "timeline suffix"} <= names


def test_the_scan_sees_f_string_pieces_and_skips_prose_and_plain_words() -> None:
    source = '''
"""Module prose may say .hoodie/.sink/clean freely."""
import posixpath
CLEAN = f"{SINK}/clean"
WARM = f"warmup-{pid}"
META = posixpath.join(base, ".hoodie")
SUFFIX = "replacecommit.inflight"
def f() -> None:
    """Nor is a docstring code: .hoodie/.temp."""
    log.info("archived %d instant(s); clean done; probe failed", 3)
    headers = {"hudi.sink.source.topic": 1}
'''
    assert [(line, name) for line, _, name in spelled_paths(source)] == [
        (4, "clean/"), (5, "warmup-"), (6, ".hoodie"), (7, "timeline suffix")]
