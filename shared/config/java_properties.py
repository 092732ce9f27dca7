"""Java ``Properties`` text: the parser and writer shared by ``hoodie.properties``
(``shared.hudi.properties``) and seed-style ``sink.properties`` config files
(``shared.config.seed``). Comments (``#``/``!``), ``=``/``:``/whitespace separators,
backslash escapes including ``\\uXXXX``, and continuation lines (a line ending in an odd
number of backslashes continues on the next, whose leading whitespace is dropped)."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["format_properties", "parse_properties"]


def _escape(text: str, *, is_key: bool) -> str:
    """Java ``Properties.store`` escaping, restricted to what both readers agree on.

    ``:`` and ``=`` are escaped (Java unescapes them; hudi-rs strips ``\\:`` in the schema and
    splits at the first ``=``, which an escaped ``\\=`` never is for our plain keys). Non-ASCII
    becomes ``\\uXXXX`` because Java loads the file as ISO-8859-1.
    """
    out: list[str] = []
    for index, ch in enumerate(text):
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch in ":=" or (is_key and ch in "#! "):
            out.append("\\" + ch)
        elif ch == " " and index == 0:
            out.append("\\ ")
        elif ch in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[ch])
        elif code < 0x20 or code > 0x7E:
            encoded = ch.encode("utf-16-be")
            for unit in range(0, len(encoded), 2):
                out.append(f"\\u{int.from_bytes(encoded[unit:unit + 2], 'big'):04x}")
        else:
            out.append(ch)
    return "".join(out)


def format_properties(properties: dict[str, str], header: str = "Hudi table config") -> bytes:
    """Serialise ``key=value`` lines; the result is pure ASCII."""
    lines = [f"#{header}"]
    lines.extend(
        f"{_escape(key, is_key=True)}={_escape(value, is_key=False)}"
        for key, value in properties.items()
    )
    return ("\n".join(lines) + "\n").encode("ascii")


def _unescape(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        ch = text[index]
        if ch != "\\" or index + 1 == len(text):
            out.append(ch)
            index += 1
            continue
        nxt = text[index + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[index + 2:index + 6]):
            out.append(chr(int(text[index + 2:index + 6], 16)))
            index += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        index += 2
    # \uXXXX pairs may have produced surrogates; join them back into real characters.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


def _logical_lines(text: str) -> Iterable[str]:
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java Properties text (comments, ``=``/``:``/space separators, escapes)."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        index = 0
        while index < len(line):
            ch = line[index]
            if ch == "\\":
                index += 2
                continue
            if ch in "=: \t\f":
                break
            index += 1
        key, rest = line[:index], line[index:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        result[_unescape(key)] = _unescape(rest)
    return result
