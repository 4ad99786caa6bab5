"""Read Java `.properties` files, the format Strimzi users already keep their broker settings in."""

from __future__ import annotations

import re
import stat
from collections.abc import Iterator
from pathlib import Path

# javaproperties: the same reading as Java's Properties.load (line ends, escapes, separators); a
# user's Strimzi file must read here exactly as the broker reads it.
import javaproperties


class PropertiesError(ValueError):
    """A properties file that cannot be read; the message names the file and line."""


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse properties text exactly as Java's `Properties.load` does (`javaproperties`: `#`/`!`
    comments, `key=value`, `key: value` or `key value`, backslash continuations and escapes, lines
    ended only by \\n, \\r or \\r\\n; a later duplicate key wins), and refuse what Java would
    refuse (a bad \\u escape) or silently keep but is a mistake (a value without a key), naming
    the line."""
    result: dict[str, str] = {}
    for line_no, element in _elements(text, source):
        if isinstance(element, javaproperties.KeyValue):
            if not element.key:
                raise PropertiesError(
                    f"{source}:{line_no}: line has a value but no key: {element.source_stripped!r}"
                )
            result[element.key] = element.value
    return result


def _elements(text: str, source: str) -> Iterator[tuple[int, javaproperties.PropertiesElement]]:
    """Each entry, comment or blank of `text` with the number of its first line."""
    elements = javaproperties.parse(text)
    line_no = 1
    while True:
        try:
            element = next(elements, None)
        except javaproperties.InvalidUEscapeError as exc:  # unescaped as its entry is read
            raise PropertiesError(f"{source}:{line_no}: bad unicode escape {exc.escape}") from None
        if element is None:
            return
        yield line_no, element
        line_no += len(_LINE_END.findall(element.source))


_LINE_END = re.compile(r"\r\n?|\n")
"""Where Java's `Properties.load` ends a line (`str.splitlines` also ends one at \\f, \\x0b,
\\x1c-\\x1e, \\x85, \\u2028 and \\u2029, which Java keeps in the value)."""


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
