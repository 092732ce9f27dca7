"""Code, tests and docs cite only what is in the repository.

Design notes and format notes once lived in documents outside it; citations of them ("the
design document's section N", "the reference notes' section N", a path into the reference
folder or the parent's ``shared`` folder) point nowhere for a reader of this repository.
``docs/design.md`` holds that material now: cite ``docs/design.md §N`` (its Hudi format facts
are §3.8, the development broker's gaps §6). The patterns are assembled from pieces so that
this file does not cite anything itself.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("services", "shared", "tests", "docs", "deploy", "bench", "scripts", "README.md",
           "Dockerfile", "pyproject.toml")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".json", ".txt", ".tpl", ".sh", ""}

OUTSIDE = re.compile("|".join([
    "DESIGN" + r"\s*§",
    r"\breference" + r"\s*§",
    r"\breference" + "/",
    r"\.\./" + "shared",
]))


def _files() -> list[Path]:
    found = []
    for name in SCANNED:
        top = ROOT / name
        paths = [top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else []
        found += [p for p in paths if p.is_file() and p.suffix in SUFFIXES]
    return found


def citations(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of each line of ``text`` citing an outside document."""
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1)
            if OUTSIDE.search(line)]


def test_nothing_cites_a_document_outside_the_repository() -> None:
    hits = [f"{path.relative_to(ROOT)}:{n}: {line}"
            for path in _files()
            for n, line in citations(path.read_text(errors="replace"))]
    assert not hits, "cite docs/design.md §N instead:\n" + "\n".join(hits)


def test_the_patterns_catch_each_old_form_and_not_the_new_one() -> None:
    old = ["phase 2 (DESIGN" + " §4)", "v6 key set (reference" + " §3)",
           "follows ``reference" + "/hudi-table-format.md``", "see .." + "/shared/notes.md"]
    assert [len(citations(line)) for line in old] == [1, 1, 1, 1]
    assert citations("phase 2 (docs/design.md §4.3); facts 3 and 4 of docs/design.md §3.8") == []
    assert len(_files()) > 100  # the scan reads the repository, not an empty list
