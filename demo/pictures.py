"""Pictures of the protection, drawn from what a real-Kafka scenario recorded (demo/versus.py,
demo/slowdown.py): the filling volume's available bytes over time for each guard or policy, the
limit as a line, the crossing, the throttle and the space freed marked; and each producer's
acknowledged rate over time, one panel per guard or policy.

What is drawn is first taken out of the run into a `Recorded` (plain numbers: seconds after the
load started, bytes, bytes/s), saved beside the pictures as JSON, so the pictures can be drawn
again without the run:

    python -m demo.pictures docs/results/versus-series.json

matplotlib draws with its Agg backend (files only, no display).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from devkit.results_page import temporary_path

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MIB = 1 << 20
AVAILABLE_STEP = 0.5
"""Seconds between two points of the available-bytes line (the watch samples every 0.1 s)."""
RATE_STEP = 1.0
"""A producer's rate is kept per second of the run."""
RATE_WINDOW = 10
"""...and drawn averaged over this many seconds up to each: a producer that its quota binds is
throttled in bursts (Kafka's quota window is 11 s), and a Java producer's acknowledgements are read
from its topic's high watermark. A drop shows from its moment on, never before it."""

CROSSING, THROTTLE, FREED, FAILED = "crossing", "throttle", "freed", "failed"
OTHER_CROSSING, RESTART = "other-crossing", "restart"
MARKS = {
    # kind: (legend text, marker on the filling volume's line or None, vertical line style)
    CROSSING: ("limit crossed", "o", "--"),
    THROTTLE: ("throttle (first broker throttle after the crossing)", "v", ":"),
    FREED: ("space freed (volume grown)", "^", "-"),
    FAILED: ("disk full: log dir offline, broker halted", "X", "-"),
    OTHER_CROSSING: ("another log dir crossed the limit", None, "-."),
}
"""The moments drawn; RESTART (a span: a broker stopped and started) is shaded."""


@dataclass
class Mark:
    at: float
    """Seconds after the load started."""
    kind: str
    """CROSSING, THROTTLE, FREED, FAILED, or RESTART (a span: `until` is its end)."""
    label: str = ""
    until: float | None = None


@dataclass
class RunSeries:
    """One guard's (or policy's) run, as drawn."""

    key: str
    """`none`, `plugin-5s`, `kvq`, `stop-on-violation`, ..."""
    title: str
    available: list[tuple[float, int]]
    """The filling volume's available bytes: (seconds after the load started, bytes)."""
    marks: list[Mark] = field(default_factory=list)
    rates: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """Producer -> (seconds after the load started, acknowledged value bytes/s)."""

    def mark(self, kind: str) -> Mark | None:
        return next((m for m in self.marks if m.kind == kind), None)


@dataclass
class Recorded:
    """What a scenario's pictures are drawn from."""

    scenario: str
    """The page's name (`versus`, `slowdown`, `slowdown-load-step-10`)."""
    volume: str
    """Which volume fills, in words."""
    limit: int
    """The limit in available bytes."""
    runs: list[RunSeries]
    footer: str = ""
    """The run's date, machine and commit (devkit.results_page), drawn under each picture."""
    legends: dict[str, str] = field(default_factory=dict)
    """Mark kind -> its legend text, where the scenario names it otherwise than MARKS."""

    def legend(self, kind: str) -> str:
        return self.legends.get(kind) or MARKS[kind][0]

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Recorded:
        data = json.loads(text)
        runs = [
            RunSeries(
                key=r["key"],
                title=r["title"],
                available=[(t, b) for t, b in r["available"]],
                marks=[Mark(**m) for m in r["marks"]],
                rates={p: [(t, v) for t, v in points] for p, points in r["rates"].items()},
            )
            for r in data.pop("runs")
        ]
        return cls(runs=runs, **data)


# --- taking the series out of a run -------------------------------------------------------------


def available_series(
    samples: Iterable, volume: tuple[int, int], start: float, step: float = AVAILABLE_STEP
) -> list[tuple[float, int]]:
    """A DiskWatch's samples of `volume` from `start` on, one every `step` seconds (the lowest
    of each step, so no dip is smoothed away)."""
    points: dict[int, tuple[float, int]] = {}
    for sample in samples:
        if sample.at < start or volume not in sample.usable:
            continue
        slot = int((sample.at - start) / step)
        value = sample.usable[volume]
        if slot not in points or value < points[slot][1]:
            points[slot] = (round(sample.at - start, 2), value)
    return [points[slot] for slot in sorted(points)]


REARM_BYTES = 512 << 10
"""A volume back above the limit by this much can cross it again (no mark for every wobble)."""


def crossings(samples: Iterable, volume: tuple[int, int], limit: int, start: float) -> list[float]:
    """Every moment from `start` on (seconds after it) that `volume` went from above the limit
    to at or below it."""
    moments = []
    armed = True
    for sample in samples:
        if sample.at < start or volume not in sample.usable:
            continue
        usable = sample.usable[volume]
        if armed and usable <= limit:
            moments.append(round(sample.at - start, 2))
            armed = False
        elif usable > limit + REARM_BYTES:
            armed = True
    return moments


def other_crossing(
    samples: Iterable, filling: tuple[int, int], limit: int, start: float
) -> Mark | None:
    """The first moment from `start` on that a volume other than `filling` was at or below the
    limit (a DiskWatch's samples; seconds after `start`)."""
    for sample in samples:
        if sample.at < start:
            continue
        crossed = sorted(v for v, b in sample.usable.items() if v != filling and b <= limit)
        if crossed:
            broker, index = crossed[0]
            label = f"broker {broker}'s log dir {index} crossed the limit"
            return Mark(round(sample.at - start, 2), OTHER_CROSSING, label)
    return None


def rate_series(
    acked: Sequence[tuple[float, int]], start: float, end: float, step: float = RATE_STEP
) -> list[tuple[float, float]]:
    """Acknowledged bytes/s in each `step` from `start` to `end` (at its middle), from (moment,
    bytes) pairs (a DeliveryLog's `acked`). Drawn smoothed (`smoothed`); kept as measured."""
    slots = max(1, int((end - start) / step))
    per_slot = [0] * slots
    for at, size in acked:
        if start <= at < start + slots * step:
            per_slot[int((at - start) / step)] += size
    return [(round((i + 0.5) * step, 2), round(n / step, 1)) for i, n in enumerate(per_slot)]


def smoothed(points: Sequence[tuple[float, float]], count: int) -> list[tuple[float, float]]:
    """Each point's value averaged over it and the `count - 1` points before it (fewer at the
    start): what a moment shows never comes after it."""
    values = [v for _, v in points]
    out = []
    total = 0.0
    for i, (t, value) in enumerate(points):
        total += value
        if i >= count:
            total -= values[i - count]
        out.append((t, total / min(i + 1, count)))
    return out


def producer_rates(producers: Iterable, names: dict, start: float, end: float) -> dict:
    """Producer name -> its rate series (a copy of each DeliveryLog taken under its lock)."""
    rates = {}
    for producer in producers:
        with producer.log.lock:
            acked = list(producer.log.acked)
        rates[names[producer]] = rate_series(acked, start, end)
    return rates


# --- drawing -------------------------------------------------------------------------------------

COLORS = {
    "none": "#d62728",
    "plugin-5s": "#ff7f0e",
    "plugin-60s": "#8c564b",
    "kvq": "#2ca02c",
    "kvq-no-default": "#17becf",
    "stop-on-violation": "#1f77b4",
    "graceful-slowdown": "#2ca02c",
}
PRODUCER_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
FOOTER_SIZE = 7


def _figure(width: float, height: float, footer: str) -> Figure:
    """A figure on Agg (files only, no display) whose layout keeps the footer, the run's facts,
    below everything else (a figure-wide x label to constrained layout)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    if footer:
        figure.supxlabel(
            footer, x=0.01, ha="left", fontsize=FOOTER_SIZE, color="0.35", gid="footer",
            linespacing=1.4,
        )  # fmt: skip
    return figure


def available_bytes_figure(recorded: Recorded) -> Figure:
    """One panel: each run's available bytes on the filling volume (MiB) over time, the limit a
    line, the area below it shaded, each run's crossing, throttle, space freed (and a full disk)
    marked on its line."""
    figure = _figure(10, 5.6, recorded.footer)
    axes = figure.add_subplot()
    end = max((t for run in recorded.runs for t, _ in run.available[-1:]), default=1.0)
    axes.axhspan(0, recorded.limit / MIB, color="#d62728", alpha=0.07, lw=0)
    axes.axhline(recorded.limit / MIB, color="0.2", ls="--", lw=1, label="_limit")
    axes.annotate(
        f"limit: {recorded.limit / MIB:.0f} MiB available",
        (end, recorded.limit / MIB), xytext=(0, 4), textcoords="offset points",
        ha="right", va="bottom", fontsize=8, color="0.2",
    )  # fmt: skip
    axes.annotate(
        "below the limit", (end, 0), xytext=(0, 4), textcoords="offset points",
        ha="right", va="bottom", fontsize=8, color="#d62728",
    )  # fmt: skip
    for order, run in enumerate(recorded.runs):
        color = COLORS.get(run.key)
        times = [t for t, _ in run.available]
        values = [b / MIB for _, b in run.available]
        # the first run (no guard) on top: the others follow its line until they hold
        (line,) = axes.plot(
            times, values, color=color, lw=1.8, label=run.title, gid=run.key, zorder=3 - order / 10
        )
        for mark in run.marks:
            marker = MARKS[mark.kind][1] if mark.kind in MARKS else None
            if marker is None:
                continue
            y = _value_at(run.available, mark.at) / MIB
            size = 12 if mark.kind == FAILED else 7
            axes.plot(
                [mark.at], [y], marker=marker, ms=size, color=line.get_color(), mec="black",
                mew=0.8, ls="none", gid=f"{run.key}:{mark.kind}", zorder=4, clip_on=False,
            )  # fmt: skip
            if mark.kind == FAILED:
                axes.annotate(
                    f"{run.title}: {mark.label or 'disk full'}", (mark.at, y), xytext=(8, 6),
                    textcoords="offset points", fontsize=8, color=line.get_color(),
                    fontweight="bold",
                )  # fmt: skip
    axes.set_xlim(0, end)
    axes.set_ylim(bottom=0)
    axes.set_xlabel("seconds after the load started")
    axes.set_ylabel("available bytes (MiB)")
    axes.set_title(f"Available bytes on {recorded.volume}", loc="left", fontsize=11)
    axes.grid(alpha=0.3)
    axes.legend(
        handles=[*axes.get_legend_handles_labels()[0], *_mark_handles(recorded)],
        loc="upper left", bbox_to_anchor=(0, -0.11), ncols=2, fontsize=8, frameon=False,
    )  # fmt: skip
    return figure


def _mark_handles(recorded: Recorded) -> list:
    from matplotlib.lines import Line2D

    kinds = {m.kind for run in recorded.runs for m in run.marks}
    return [
        Line2D(
            [], [], marker=marker, color="0.5", mec="black", ls="none", label=recorded.legend(kind)
        )
        for kind, (_, marker, _) in MARKS.items()
        if kind in kinds and marker is not None
    ]


def _value_at(points: Sequence[tuple[float, float]], at: float) -> float:
    """The series' value at `at` (the last point at or before it; the first if none is)."""
    before = [v for t, v in points if t <= at]
    return before[-1] if before else (points[0][1] if points else 0.0)


def producer_rates_figure(recorded: Recorded) -> Figure:
    """Small multiples: per run, each producer's acknowledged rate (kB/s) over time, with the
    run's crossing, throttle and space freed as vertical lines (a broker's restart shaded)."""
    count = len(recorded.runs)
    figure = _figure(10, 1.2 + 2.0 * count, recorded.footer)
    axes_list: list[Axes] = list(
        figure.subplots(count, 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    )
    producers = sorted(
        {p for run in recorded.runs for p in run.rates}, key=_producer_order(recorded)
    )
    colors = {p: PRODUCER_COLORS[i % len(PRODUCER_COLORS)] for i, p in enumerate(producers)}
    end = max((pts[-1][0] for run in recorded.runs for pts in run.rates.values() if pts), default=1)
    for axes, run in zip(axes_list, recorded.runs, strict=True):
        for producer, measured in run.rates.items():
            points = smoothed(measured, int(RATE_WINDOW / RATE_STEP))
            axes.plot(
                [t for t, _ in points], [v / 1000 for _, v in points], color=colors[producer],
                lw=1.2, label=producer, gid=f"{run.key}:{producer}",
            )  # fmt: skip
        for mark in run.marks:
            if mark.kind == RESTART and mark.until is not None:
                axes.axvspan(mark.at, mark.until, color="0.5", alpha=0.15, lw=0)
            elif mark.kind in MARKS:
                _, _, style = MARKS[mark.kind]
                color = "#d62728" if mark.kind == FAILED else "0.15"
                axes.axvline(mark.at, color=color, ls=style, lw=1.1, gid=f"{run.key}:{mark.kind}")
        axes.set_title(run.title, loc="left", fontsize=9, color=COLORS.get(run.key, "black"))
        axes.set_ylabel("kB/s acked")
        axes.grid(alpha=0.3)
    axes_list[-1].set_ylim(0, _rates_top(recorded))
    axes_list[-1].set_xlim(0, end)
    axes_list[-1].set_xlabel("seconds after the load started")
    figure.suptitle(
        f"Each producer's acknowledged rate (value bytes/s over the {RATE_WINDOW} s before each "
        "moment)",
        x=0.01, ha="left",
        fontsize=11,
    )  # fmt: skip
    axes_list[0].legend(
        handles=[*axes_list[0].get_legend_handles_labels()[0], *_vertical_handles(recorded)],
        loc="lower left", bbox_to_anchor=(0, 1.12), fontsize=8, ncols=3, frameon=False,
    )  # fmt: skip
    return figure


def _rates_top(recorded: Recorded) -> float:
    """kB/s at the top of the rate panels: well above what the producers steadily reach (the
    95th percentile of the drawn points), so that a catch-up burst (a backlog acknowledged at
    once after a throttle, hundreds of kB/s) does not flatten the rest: it runs off the top."""
    window = int(RATE_WINDOW / RATE_STEP)
    drawn = sorted(
        v
        for run in recorded.runs
        for points in run.rates.values()
        for _, v in smoothed(points, window)
    )
    return max(1.0, 1.4 * drawn[int(0.95 * (len(drawn) - 1))] / 1000) if drawn else 1.0


def _producer_order(recorded: Recorded):
    first = [p for run in recorded.runs for p in run.rates]
    return lambda producer: first.index(producer)


def _vertical_handles(recorded: Recorded) -> list:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    kinds = {m.kind for run in recorded.runs for m in run.marks}
    handles: list = [
        Line2D(
            [],
            [],
            color="#d62728" if kind == FAILED else "0.15",
            ls=style,
            label=recorded.legend(kind),
        )  # fmt: skip
        for kind, (_, _, style) in MARKS.items()
        if kind in kinds
    ]
    if RESTART in kinds:
        handles.append(Patch(color="0.5", alpha=0.15, label="broker 0 stopped (restart)"))
    return handles


PICTURES = {
    "-available-bytes.png": (
        available_bytes_figure,
        "Available bytes on the filling volume over time for each {what}, with the limit",
    ),
    "-producer-rates.png": (
        producer_rates_figure,
        "Each producer's acknowledged rate over time, one panel per {what}",
    ),
}
"""File suffix -> (drawing function, alternative text)."""


def save(figure: Figure, path: Path) -> None:
    """The figure as a PNG at `path` (whatever its suffix: the results page's temporary name)."""
    figure.savefig(path, format="png")


def draw(recorded: Recorded, recording, what: str) -> None:
    """Every picture of `recorded`, and its series as JSON, attached to the results page
    (`devkit.results_page.Recording`): written with it when the run completes."""
    for suffix, (drawing, alt) in PICTURES.items():
        save(drawing(recorded), recording.attach(suffix, alt.format(what=what)))
    recording.attach("-series.json").write_text(recorded.to_json())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demo.pictures",
        description="Draw a scenario's pictures again from the series it saved.",
    )
    parser.add_argument("series", type=Path, help="a <page>-series.json from docs/results/")
    args = parser.parse_args(argv)
    recorded = Recorded.from_json(args.series.read_text())
    stem = args.series.name.removesuffix("-series.json")
    for suffix, (drawing, _) in PICTURES.items():
        path = args.series.with_name(stem + suffix)
        temporary = temporary_path(path)
        try:
            save(drawing(recorded), temporary)
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
