"""Hudi's own partition path codec, transcribed from the Java source, as a test oracle.

``org.apache.hudi.common.util.PartitionPathEncodeUtils`` (``escapePathName`` /
``unescapePathName``) is what Java Hudi writers and readers use for partition directories
when ``hoodie.datasource.write.partitionpath.urlencode`` is on. It is transcribed here, apart
from the code under test, so the tests compare ``shared.hudi.naming`` with Hudi rather than
with itself. Importable from unit and integration tests (``tests/`` is on ``sys.path``
because ``tests/conftest.py`` lives there).
"""

from __future__ import annotations

import re

__all__ = ["hudi_escape", "hudi_unescape"]

#: ``charToEscape``: every char below ``' '``, then the explicit list of the Java source.
_CHAR_TO_ESCAPE = frozenset([*map(chr, range(0x20)), *'"#%\'*/:=?\\\x7f{[]^'])
_JAVA_HEX_INT = re.compile(r"[+-]?[0-9A-Fa-f]+")


def hudi_escape(path: str) -> str:
    """``escapePathName`` of a non-empty value: ``%`` + ``String.format("%1$02X", c)`` for
    each char in ``charToEscape``, every other char (non-ASCII included) unchanged."""
    return "".join(f"%{ord(ch):02X}" if ch in _CHAR_TO_ESCAPE else ch for ch in path)


def hudi_unescape(path: str) -> str:
    """``unescapePathName``, quirks included: a ``%`` needs two chars after it
    (``i + 2 < length``), they are parsed by ``Integer.parseInt(_, 16)`` (which accepts a
    sign), a negative or unparseable pair leaves the ``%`` as it is, and each ``%XX``
    becomes one *char* — which is why byte-wise UTF-8 escapes read back as mojibake."""
    out: list[str] = []
    i = 0
    while i < len(path):
        ch = path[i]
        if ch == "%" and i + 2 < len(path):
            pair = path[i + 1 : i + 3]
            if _JAVA_HEX_INT.fullmatch(pair) and int(pair, 16) >= 0:
                out.append(chr(int(pair, 16)))
                i += 3
                continue
        out.append(ch)
        i += 1
    return "".join(out)
