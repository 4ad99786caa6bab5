"""The fenced code blocks of the documentation, read from the markdown itself, so a test runs an
example exactly as a reader copies it and the two cannot drift apart."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Every page a user copies examples from: the README, the docs site's pages, every folder's README
# (the CHANGELOG only narrates; the benchmarks' results are their output, written by the runs).
DOCS = (
    "README.md",
    "CONTRIBUTING.md",
    *sorted(
        p.relative_to(ROOT).as_posix()
        for p in (
            *ROOT.glob("docs/*.md"),
            *ROOT.glob("*/README.md"),
            *ROOT.glob("deploy/**/README.md"),
        )
    ),
)
# A fence may be indented (a block inside a list item): the closing fence has the same indent.
# A fence whose info string is in braces is a MyST directive of the site (toctree, include,
# figure), not an example.
FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>\{?[\w-]*\}?)\n(?P<body>.*?)^(?P=indent)```\s*$", re.M | re.S
)


@dataclass(frozen=True)
class Block:
    doc: str  # path relative to the repository, e.g. "spark/README.md"
    line: int  # line of the opening fence, 1-based
    lang: str  # "sh", "yaml", "properties", ... or "" (output, diagrams)
    text: str  # the body, dedented by the fence's indent

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks(doc: str) -> list[Block]:
    """Every fenced block of `doc`, in order."""
    text = (ROOT / doc).read_text()
    return [
        Block(
            doc,
            text.count("\n", 0, match.start()) + 1,
            match["lang"],
            textwrap.dedent(match["body"]),
        )
        for match in FENCE.finditer(text)
        if not match["lang"].startswith("{")
    ]


def block(doc: str, containing: str) -> Block:
    """The one block of `doc` whose text contains `containing` (fails unless exactly one does)."""
    found = [b for b in blocks(doc) if containing in b.text]
    assert len(found) == 1, f"{doc}: {len(found)} blocks contain {containing!r}"
    return found[0]


def command_lines(block: Block) -> list[str]:
    """The command lines of a ```sh block, continuation lines joined, comments removed."""
    joined = re.sub(r"\\\n\s*", "", block.text)
    lines = [re.sub(r"(^|\s+)#.*$", "", line).strip() for line in joined.splitlines()]
    return [line for line in lines if line]


def commands(block: Block, program: str) -> list[str]:
    """The command lines of a ```sh block that start with `program`."""
    return [line for line in command_lines(block) if line.split(" ", 1)[0] == program]


SYSTEM_PATH = re.compile(r"(?<![\w./])/(?:etc|var)/[\w./-]+")


def localize(text: str, root: Path) -> str:
    """`text` with every /etc/... and /var/... path moved under `root`, the files it names made
    as a user has them (PEM certificates and keys, a webhook token): an example runs as shown
    but for where its files are. Directories and journals are left for the app to create."""
    from devkit.tls_certificates import make_pki

    pki = None
    for path in sorted(set(SYSTEM_PATH.findall(text))):
        local = root / path.lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        name = local.name
        if name.endswith((".pem", ".crt", ".key")):
            pki = pki or make_pki(root / "pki")
            if name.endswith(".key"):
                source = pki.client.key
            else:  # a CA's file, or the client's own certificate (its key is the .key above)
                source = pki.ca if name.startswith("ca") else pki.client.cert
            local.write_bytes(source.read_bytes())
        elif "token" in name:
            local.write_text("example-token\n")
    return SYSTEM_PATH.sub(lambda m: str(root / m[0].lstrip("/")), text)
