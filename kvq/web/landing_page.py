"""The page at `/`: what this server is and links to what it serves, as every exporter has."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

import kvq


def landing_page(title: str, description: str, links: Iterable[tuple[str, str, str]]) -> bytes:
    """HTML with one line per (method, path, what it does), GET paths as links, and the version
    and source revision of this build."""
    items = []
    for method, path, what in links:
        target = f'<a href="{escape(path)}">{escape(path)}</a>' if method == "GET" else escape(path)
        items.append(f"<li><code>{escape(method)}</code> {target}: {escape(what)}</li>")
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title></head>\n<body>\n<h1>{escape(title)}</h1>\n"
        f"<p>{escape(description)}</p>\n<ul>\n" + "\n".join(items) + "\n</ul>\n"
        f"<p>kafka-volume-quotas {escape(kvq.__version__)}, revision {escape(kvq.revision())}</p>\n"
        "</body></html>\n"
    ).encode()
