"""gzip for large responses, compressed once per distinct body and reused until it changes."""

from __future__ import annotations

import gzip
import threading

MIN_SIZE = 1024
LEVEL = 6


def accepts_gzip(accept_encoding: str | None) -> bool:
    """True when an Accept-Encoding header admits gzip (`gzip`, `gzip;q=0.5`, `*`; not `q=0`)."""
    if not accept_encoding:
        return False
    wanted = False
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        coding = coding.strip().lower()
        if coding not in ("gzip", "x-gzip", "*"):
            continue
        quality = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if coding == "*":
            wanted = wanted or quality > 0
        else:
            return quality > 0
    return wanted


def gzip_member(data: bytes, level: int = LEVEL) -> bytes:
    """One gzip member; members concatenated are one valid gzip stream (RFC 1952 2.2)."""
    return gzip.compress(data, compresslevel=level, mtime=0)


class GzipCache:
    """Per key (a path): the last body and its gzip; `compress` re-compresses only a new body.

    The exporter's renderer hands out the same bytes until the state changes, so between polls
    every gzip scrape is a dictionary look-up (an identity or memcmp check, no compression).
    """

    def __init__(self, level: int = LEVEL) -> None:
        self.level = level
        self.compressions = 0
        self._entries: dict[str, tuple[bytes, bytes]] = {}
        self._lock = threading.Lock()

    def compress(self, key: str, body: bytes) -> bytes:
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and (entry[0] is body or entry[0] == body):
            return entry[1]
        compressed = gzip_member(body, self.level)
        with self._lock:
            self._entries[key] = (body, compressed)
            self.compressions += 1
        return compressed
