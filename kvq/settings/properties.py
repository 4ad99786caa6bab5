"""Read Java `.properties` files, the format Strimzi users already keep their broker settings in."""

from __future__ import annotations

import stat
from pathlib import Path

_SEPARATORS = "=:"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """A properties file that cannot be read; the message names the file and line."""


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse properties text: `#`/`!` comments, `key=value`, `key: value` or `key value`,
    backslash line continuations and escapes. A later duplicate key wins, as in Java."""
    result: dict[str, str] = {}
    for line_no, logical in _logical_lines(text):
        key, value = _split(logical)
        if not key:
            raise PropertiesError(f"{source}:{line_no}: line has a value but no key: {logical!r}")
        result[_unescape(key, source, line_no)] = _unescape(value, source, line_no)
    return result


def read_properties(path: str | Path) -> dict[str, str]:
    """Read a properties file (UTF-8, a leading byte order mark ignored); errors name the path."""
    path = Path(path)
    try:
        text = read_text_file(path)
    except FileNotFoundError:
        raise PropertiesError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:
        raise PropertiesError(f"{path}: cannot read: {exc}") from None
    return parse_properties(text, str(path))


def read_text_file(path: str | Path) -> str:
    """A regular file's UTF-8 text without a leading byte order mark (editors on Windows add one).

    Raises OSError, or ValueError for something that is not a regular file (a FIFO would block
    for ever) or not UTF-8 (the message says where).
    """
    if not stat.S_ISREG(Path(path).stat().st_mode):
        raise ValueError("not a regular file")
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from None


def _logical_lines(text: str):
    """Yield (first physical line number, logical line) with continuations joined."""
    pending: str | None = None
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start, pending = number, ""
        pending += line
        if _ends_with_continuation(pending):
            pending = pending[:-1]
            continue
        yield start, pending
        pending = None
    if pending is not None:
        yield start, pending


def _ends_with_continuation(line: str) -> bool:
    backslashes = len(line) - len(line.rstrip("\\"))
    return backslashes % 2 == 1


def _split(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in _SEPARATORS or char in " \t\f":
            break
        index += 1
    key = line[:index]
    rest = line[index:].lstrip(" \t\f")
    if rest[:1] in ("=", ":") and (index >= len(line) or line[index] not in _SEPARATORS):
        rest = rest[1:].lstrip(" \t\f")
    elif index < len(line) and line[index] in _SEPARATORS:
        rest = line[index + 1 :].lstrip(" \t\f")
    return key, rest


def _unescape(text: str, source: str, line_no: int) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 >= len(text):
            out.append(char)
            index += 1
            continue
        nxt = text[index + 1]
        if nxt == "u":
            digits = text[index + 2 : index + 6]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise PropertiesError(
                    f"{source}:{line_no}: bad unicode escape \\u{digits!s}"
                ) from None
            index += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        index += 2
    return "".join(out)
