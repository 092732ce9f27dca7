"""``hudi-sink dev`` stops its processes on Ctrl-C and on SIGTERM, even when it was started
as a shell's background command (SIGINT inherited as ignored)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from hudi_sink.cli.dev import _stop_on_signals


@pytest.fixture
def saved_handlers() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_sigint_and_sigterm_interrupt_dev_even_when_sigint_was_ignored(
    number: signal.Signals, saved_handlers: None
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background command inherits it
    _stop_on_signals()
    with pytest.raises(KeyboardInterrupt, match=number.name):
        os.kill(os.getpid(), number)
        signal.sigtimedwait([], 0.5)  # the handler runs before this returns
