"""A run's results page: what a benchmark or a scenario measured, where the docs show it.

`Recording` wraps one run. While it is open, everything the run prints (stdout and stderr, in
order) is kept as well as shown; when the run completes, it writes `docs/results/<name>.md` (a page
of the docs site, listed by docs/benchmarks.md): at the top the date (UTC), the machine (cores,
memory, CPU model, OS, Python, Kafka's version where the run used it), the git commit (`-dirty`
when tracked files outside docs/results/ differ from it), the load average at the start and the
end, the exact command and how long it took; then the pictures the run drew, then its printed
output verbatim. Every file is written to a temporary name and renamed into place once the run
has completed, so an interrupted or crashed run leaves the previous results whole, never half a
page. `KVQ_RESULTS_DIR` writes them elsewhere.

A run with arguments other than its defaults writes its own page: the run calls `arguments()`
with its parser and parsed arguments, and the page is named by the benchmark and each argument
that differs from its default (`slowdown-load-step-10.md`, `backfill-scaling.md`), so the default
run's page is never overwritten by a variant.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import platform
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TextIO

from kvq import interrupts

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR_ENV = "KVQ_RESULTS_DIR"
MAX_NAME = 100
"""Longest page name (without `.md`): longer argument lists are cut and a hash of them added."""


def results_dir() -> Path:
    """Where the pages go: docs/results/ of this checkout, or `KVQ_RESULTS_DIR`."""
    return Path(os.environ.get(RESULTS_DIR_ENV) or ROOT / "docs" / "results")


@dataclass(frozen=True)
class Machine:
    cores: int
    usable_cores: int
    """Cores this process may run on (its CPU affinity)."""
    memory_bytes: int
    cpu_model: str
    os: str
    python: str

    @classmethod
    def this(cls) -> Machine:
        cores = os.cpu_count() or 1
        return cls(
            cores=cores,
            usable_cores=len(os.sched_getaffinity(0)),
            memory_bytes=_meminfo_total(),
            cpu_model=_cpu_model(),
            os=f"{_os_name()}, {platform.system()} {platform.release()} {platform.machine()}",
            python=f"{platform.python_implementation()} {platform.python_version()}",
        )

    def describe(self) -> str:
        cores = f"{self.cores} cores"
        if self.usable_cores != self.cores:
            cores += f" ({self.usable_cores} usable by the run)"
        return f"{cores}, {self.memory_bytes / 2**30:.1f} GiB memory, {self.cpu_model}"


def _meminfo_total() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("model name", "Model", "Hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _os_name() -> str:
    try:
        with open("/etc/os-release") as release:
            for line in release:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.platform(terse=True)


def git_commit(root: Path = ROOT) -> str:
    """HEAD's hash (12 digits), `-dirty` when a tracked file outside docs/results/ differs from
    it (the pages a run writes there do not make the next run dirty); "unknown" outside git."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no",
             "--", ".", ":(exclude)docs/results"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"{head}-dirty" if changed else head


def load_average() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed (`sys.orig_argv`), the interpreter's path relative to the checkout
    when it is inside it (`.venv/bin/python -m bench.versus`)."""
    words = list(sys.orig_argv if argv is None else argv)
    if words:
        program = Path(words[0])
        if program.is_absolute() and program.is_relative_to(ROOT):
            words[0] = str(program.relative_to(ROOT))
    return shlex.join(words)


@dataclass
class RunFacts:
    """What a reader needs to weigh a run's figures: when, where, which code, how busy."""

    started: datetime
    machine: Machine
    commit: str
    load_start: tuple[float, float, float]
    command: str
    kafka_version: str | None = None
    load_end: tuple[float, float, float] | None = None
    seconds: float | None = None

    @classmethod
    def now(cls, command: str | None = None) -> RunFacts:
        return cls(
            started=datetime.now(UTC),
            machine=Machine.this(),
            commit=git_commit(),
            load_start=load_average(),
            command=command if command is not None else command_line(),
        )

    @property
    def date(self) -> str:
        return self.started.strftime("%Y-%m-%d %H:%M UTC")

    def platform(self) -> str:
        kafka = f", Apache Kafka {self.kafka_version}" if self.kafka_version else ""
        return f"{self.machine.os}, {self.machine.python}{kafka}"

    def load(self) -> str:
        def one(values: tuple[float, float, float]) -> str:
            return " / ".join(f"{v:.2f}" for v in values)

        text = f"{one(self.load_start)} at the start"
        if self.load_end is not None:
            text += f", {one(self.load_end)} at the end"
        return f"{text} (1 / 5 / 15 min, on {self.machine.cores} cores)"

    def footer(self) -> str:
        """Two lines for the foot of a picture: the run, the machine."""
        end = self.load_end or load_average()
        return (
            f"{self.date}, commit {self.commit}, load {self.load_start[0]:.1f} -> {end[0]:.1f} "
            f"(1 min, {self.machine.cores} cores): {self.command}\n"
            f"{self.machine.describe()}; {self.platform()}"
        )

    def header(self) -> list[str]:
        """The page's table of the run's facts (Markdown)."""
        rows = [
            ("date", self.date),
            ("machine", self.machine.describe()),
            ("system", self.platform()),
            ("commit", f"`{self.commit}`"),
            ("load average", self.load()),
            ("command", f"`{self.command}`"),
        ]
        if self.seconds is not None:
            rows.append(("took", _duration(self.seconds)))
        return ["| run | |", "|---|---|", *(f"| {k} | {_cell(v)} |" for k, v in rows)]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{seconds:.1f} s"


def write_atomically(path: Path, data: bytes | str) -> None:
    """`data` into `path` whole or not at all: a temporary file beside it, synced, renamed."""
    temporary = temporary_path(path)
    try:
        with open(temporary, "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def temporary_path(path: Path) -> Path:
    """A hidden name beside `path` that no glob of pages or pictures matches."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def arguments_name(
    name: str, parser: argparse.ArgumentParser, args: argparse.Namespace, ignore: Iterable[str]
) -> tuple[str, str]:
    """(page name, arguments as shown in its title): `name` and each argument of `args` that
    differs from the parser's default, in the parser's order; `ignore` names the ones that do not
    change what is measured (where logs are kept)."""
    skipped = set(ignore)
    slugs, shown = [], []
    for dest, value in vars(args).items():
        default = parser.get_default(dest)
        if dest in skipped or value == default or value is None or str(value) == str(default):
            continue
        option = "--" + dest.replace("_", "-")
        if value is True:
            slugs.append(dest)
            shown.append(option)
        elif value is False:
            slugs.append(f"no-{dest}")
            shown.append(option)
        else:
            text = ",".join(map(_text, value)) if isinstance(value, list | tuple) else _text(value)
            slugs.append(f"{dest}-{text}")
            shown.append(f"{option} {text}")
    page = "-".join([name, *(_slug(s) for s in slugs)])
    if len(page) > MAX_NAME:
        digest = hashlib.sha1(page.encode()).hexdigest()[:8]
        page = f"{page[: MAX_NAME - 9].rstrip('-')}-{digest}"
    return page, " ".join(shown)


def _text(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


class _Tee(io.TextIOBase):
    """Writes through to `shown` and keeps a copy in `kept` (shared by stdout and stderr)."""

    def __init__(self, shown: TextIO, kept: io.StringIO, lock: threading.Lock) -> None:
        self.shown, self.kept, self.lock = shown, kept, lock

    def write(self, text: str) -> int:
        with self.lock:
            self.kept.write(text)
        return self.shown.write(text)

    def flush(self) -> None:
        self.shown.flush()

    def isatty(self) -> bool:
        return self.shown.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.shown, "encoding", "utf-8")


@dataclass
class Attachment:
    final: Path
    temporary: Path
    alt: str | None
    """A picture's alternative text (shown on the page); None: a data file, not shown."""


_ACTIVE: list[Recording] = []


def active() -> Recording | None:
    """The innermost open Recording, if any."""
    return _ACTIVE[-1] if _ACTIVE else None


def arguments(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    *,
    ignore: Iterable[str] = (),
    kafka: bool = False,
) -> None:
    """What a run tells its open Recording (none open, e.g. a test calling `main`: nothing):
    its arguments (the page's name), and whether it runs real Kafka (its version in the header)."""
    recording = active()
    if recording is not None:
        recording.arguments(parser, args, ignore=ignore, kafka=kafka)


@dataclass
class Recording:
    """One run, recorded: see the module's docstring.

        with Recording("poll_fanout", "Poll fan-out: ...") as recording:
            ...  # print the figures
            recording.complete()

    The page is written on leaving the block only if `complete()` was called and nothing was
    raised."""

    name: str
    description: str = ""
    directory: Path | None = None
    command: str | None = None
    alone: str | None = None
    """The command that runs this benchmark alone, when `command` ran several."""
    facts: RunFacts = field(init=False)
    page: str = field(init=False)
    title_arguments: str = ""
    completed: bool = False
    attachments: list[Attachment] = field(default_factory=list)
    _output: io.StringIO = field(default_factory=io.StringIO)
    _saved: tuple[TextIO, TextIO] | None = None
    _started: float = 0.0

    def __post_init__(self) -> None:
        self.page = self.name
        self.directory = self.directory or results_dir()

    def __enter__(self) -> Recording:
        # Made now, not when the page is written: a run's pictures are drawn into it before the
        # page, and a missing KVQ_RESULTS_DIR lost an 8-minute run at its last step.
        assert self.directory is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        self.facts = RunFacts.now(self.command)
        self._started = time.monotonic()
        lock = threading.Lock()
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout = _Tee(sys.stdout, self._output, lock)  # type: ignore[assignment]
        sys.stderr = _Tee(sys.stderr, self._output, lock)  # type: ignore[assignment]
        _ACTIVE.append(self)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        _ACTIVE.remove(self)
        if self._saved is not None:
            sys.stdout, sys.stderr = self._saved
        try:
            if kind is None and self.completed:
                self._write()
        finally:
            for attachment in self.attachments:
                attachment.temporary.unlink(missing_ok=True)

    def arguments(
        self,
        parser: argparse.ArgumentParser,
        args: argparse.Namespace,
        *,
        ignore: Iterable[str] = (),
        kafka: bool = False,
    ) -> None:
        """Name the page by the arguments that differ from their defaults (see `arguments`)."""
        if self.attachments:
            raise RuntimeError("arguments() names the page: call it before attach()")
        self.page, self.title_arguments = arguments_name(self.name, parser, args, ignore)
        if kafka:
            from devkit.kafka_dist import selected_version

            self.facts.kafka_version = selected_version()

    def path(self, suffix: str = ".md") -> Path:
        assert self.directory is not None
        return self.directory / f"{self.page}{suffix}"

    def attach(self, suffix: str, alt: str | None = None) -> Path:
        """A file written with the page (`<page><suffix>`, e.g. `-available-bytes.png`): returns
        the temporary path to write it to; it is renamed into place with the page. With `alt`,
        a picture the page shows."""
        final = self.path(suffix)
        attachment = Attachment(final, temporary_path(final), alt)
        self.attachments.append(attachment)
        return attachment.temporary

    def footer(self) -> str:
        """The run's date, machine and commit, for the foot of a picture."""
        return self.facts.footer()

    def complete(self) -> None:
        """The run measured what it measures: write its page when the block ends."""
        self.completed = True

    def render(self) -> str:
        """The page (Markdown, MyST)."""
        title = self.name + (f" ({self.title_arguments})" if self.title_arguments else "")
        output = self._output.getvalue().rstrip()
        fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", output)), default=0))
        lines = [
            f"# {title}",
            "",
            f"<!-- Written by the run itself ({Path(__file__).relative_to(ROOT)}): run it again "
            "rather than edit this page. -->",
            "",
        ]
        if self.description:
            lines += [self.description, ""]
        lines += self.facts.header()
        if self.alone:
            lines.append(f"| this benchmark alone | {_cell(f'`{self.alone}`')} |")
        lines.append("")
        for attachment in self.attachments:
            if attachment.alt is not None:
                lines += [f"![{attachment.alt}]({attachment.final.name})", ""]
        lines += ["## Output", "", fence, output, fence, ""]
        return "\n".join(lines)

    def _write(self) -> None:
        self.facts.load_end = load_average()
        self.facts.seconds = time.monotonic() - self._started
        page = self.render()
        assert self.directory is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        missing = [a.temporary.name for a in self.attachments if not a.temporary.is_file()]
        if missing:
            raise RuntimeError(f"attached but never written: {', '.join(missing)}")
        with interrupts.deferred():  # the page and its pictures land together, or not at all
            for attachment in self.attachments:
                os.replace(attachment.temporary, attachment.final)
            write_atomically(self.path(), page)
        print(f"results: {_shown(self.path())}", file=sys.stdout, flush=True)


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
