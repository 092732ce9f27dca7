"""``hudi-sink dev``'s stop SIGTERMs the coordinator alone first: its drain commits the open
instant with what the participants report, so they must still run until it has exited (all
at once, the participants left and the drain could only roll the instant back)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from eventually import eventually

from hudi_sink.cli.dev import _stop

CHILD = """
import pathlib, signal, sys, time
role, journal = sys.argv[1], pathlib.Path(sys.argv[2])
def note(text):
    with journal.open("a") as f:
        f.write(text + "\\n")
def on_term(*_):
    note(f"{role} term")
    if role == "coordinator":  # a drain: are the participants still there to report?
        until = time.monotonic() + 1.0
        while time.monotonic() < until and "participant term" not in journal.read_text():
            time.sleep(0.02)
        note("coordinator drained with participants " +
             ("gone" if "participant term" in journal.read_text() else "running"))
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
note(f"{role} up")
while True:
    signal.pause()
"""


def test_the_coordinator_stops_first_and_alone(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    journal.touch()
    children = [(role, subprocess.Popen([sys.executable, "-c", CHILD, role, str(journal)]))
                for role in ("coordinator", "participant", "deleter")]
    eventually(lambda: journal.read_text().count(" up") == 3, 30, "children up")
    _stop(children)
    lines = journal.read_text().splitlines()
    assert "coordinator drained with participants running" in lines, lines
    assert lines.index("coordinator drained with participants running") \
        < lines.index("participant term"), lines
    assert all(process.returncode == 0 for _, process in children)
