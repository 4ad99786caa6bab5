"""The scenarios' pictures (demo/pictures.py), drawn from recorded series without a Kafka: the
panels, lines and marks they hold, the PNGs written, the series read back from their JSON."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from demo import pictures
from demo.pictures import (
    CROSSING,
    FAILED,
    FREED,
    MIB,
    OTHER_CROSSING,
    RESTART,
    THROTTLE,
    Mark,
    Recorded,
    RunSeries,
)
from devkit.results_page import Recording

LIMIT = 8 * MIB
PNG = b"\x89PNG\r\n\x1a\n"
PRODUCERS = ("alice / web", "bob / app", "dave / java-web (Java)")


def filling(until: float, low: float, freed: float | None, end: float) -> list[tuple[float, int]]:
    """32 MiB falling at 0.3 MiB/s to `low` MiB by `until`, held there, doubled at `freed`."""
    points = []
    t = 0.0
    while t <= end:
        if freed is not None and t >= freed:
            value = low + 32
        else:
            value = max(low, 32 - 0.3 * t) if t <= until else low
        points.append((t, int(value * MIB)))
        t += 0.5
    return points


def rates(end: float, held: float | None) -> dict[str, list[tuple[float, float]]]:
    return {
        p: [(t + 0.5, 75_000.0 if held is None or t < held else 8_000.0) for t in range(int(end))]
        for p in PRODUCERS
    }


def versus_like() -> Recorded:
    """Four guards as demo/versus.py records them: no guard fills the disk; each guard holds it."""
    none = RunSeries(
        "none",
        "no guard",
        filling(107, 0, None, 110),
        [Mark(80, CROSSING), Mark(107, FAILED, "log dir offline")],
        rates(110, None),
    )
    runs = [none]
    for key, title, throttle in (
        ("plugin-5s", "Strimzi plugin, check every 5 s", 85),
        ("plugin-60s", "Strimzi plugin, check every 60 s", 135),
        ("kvq", "kvq", 91),
    ):
        low = max(0.5, 8 - 0.3 * (throttle - 80))
        freed = throttle + 30
        runs.append(
            RunSeries(
                key,
                title,
                filling(throttle, low, freed, freed + 60),
                [
                    Mark(80, CROSSING),
                    Mark(throttle, THROTTLE),
                    Mark(throttle + 3, RESTART, "broker 0 stopped", until=throttle + 13),
                    Mark(freed, FREED),
                ],
                rates(freed + 60, throttle),
            )
        )
    runs[-1].marks.append(
        Mark(freed + 40, OTHER_CROSSING, "broker 2's log dir 0 crossed the limit")
    )
    return Recorded("versus", "broker 0's log dir (a 32 MiB tmpfs)", LIMIT, runs, "a run\nmachine")


def lines_by_gid(figure) -> dict[str, object]:
    return {line.get_gid(): line for axes in figure.axes for line in axes.get_lines()}


def test_the_available_bytes_picture_has_a_line_per_guard_the_limit_and_every_mark() -> None:
    recorded = versus_like()
    figure = pictures.available_bytes_figure(recorded)
    (axes,) = figure.axes
    lines = lines_by_gid(figure)
    assert {"none", "plugin-5s", "plugin-60s", "kvq"} <= set(lines)
    limits = [line for line in axes.get_lines() if line.get_label() == "_limit"]
    assert [tuple(line.get_ydata()) for line in limits] == [(LIMIT / MIB, LIMIT / MIB)]
    assert "none:failed" in lines and "none:throttle" not in lines
    assert "kvq:other-crossing" not in lines  # another volume: not on this one's line
    for key in ("plugin-5s", "plugin-60s", "kvq"):
        assert {f"{key}:{kind}" for kind in (CROSSING, THROTTLE, FREED)} <= set(lines)
    # kvq's throttle is drawn where its line is at that moment
    kvq_throttle = lines["kvq:throttle"]
    assert kvq_throttle.get_xdata()[0] == 91  # type: ignore[attr-defined]
    assert kvq_throttle.get_ydata()[0] == pytest.approx(8 - 0.3 * 11, abs=0.2)  # type: ignore[attr-defined]
    legend = [text.get_text() for text in axes.get_legend().get_texts()]
    assert legend[:4] == ["no guard", "Strimzi plugin, check every 5 s",
                          "Strimzi plugin, check every 60 s", "kvq"]  # fmt: skip
    assert any("disk full" in text for text in legend)
    footers = [text.get_text() for text in figure.texts if text.get_gid() == "footer"]
    assert footers == ["a run\nmachine"]


def test_the_rates_picture_has_a_panel_per_guard_a_line_per_producer_and_the_moments() -> None:
    recorded = versus_like()
    figure = pictures.producer_rates_figure(recorded)
    assert [axes.get_title(loc="left") for axes in figure.axes] == [r.title for r in recorded.runs]
    for axes, run in zip(figure.axes, recorded.runs, strict=True):
        gids = {line.get_gid() for line in axes.get_lines()}
        assert {f"{run.key}:{p}" for p in PRODUCERS} <= gids
        expected = {m.kind for m in run.marks} - {RESTART}
        assert {g.split(":", 1)[1] for g in gids if g.split(":", 1)[1] in pictures.MARKS} == (
            expected
        )
        assert len(axes.patches) == (1 if run.mark(RESTART) else 0)  # the restart's span
    assert [t.get_text() for t in figure.texts if t.get_gid() == "footer"] == ["a run\nmachine"]


def test_the_pictures_are_written_with_the_results_page(tmp_path: Path) -> None:
    recorded = versus_like()
    with Recording("versus", directory=tmp_path) as recording:
        pictures.draw(recorded, recording, "guard")
        # written to hidden temporary names: nothing in place before the run completes
        assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []
        recording.complete()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "versus-available-bytes.png",
        "versus-producer-rates.png",
        "versus-series.json",
        "versus.md",
    ]
    for name in names[:2]:
        assert (tmp_path / name).read_bytes().startswith(PNG)
    page = (tmp_path / "versus.md").read_text()
    assert "![Available bytes on the filling volume over time for each guard" in page
    assert "](versus-available-bytes.png)" in page and "](versus-producer-rates.png)" in page
    again = Recorded.from_json((tmp_path / "versus-series.json").read_text())
    assert again == recorded


def test_pictures_are_drawn_again_from_the_saved_series(tmp_path: Path) -> None:
    series = tmp_path / "slowdown-series.json"
    series.write_text(versus_like().to_json())
    assert pictures.main([str(series)]) == 0
    for suffix in ("-available-bytes.png", "-producer-rates.png"):
        assert (tmp_path / f"slowdown{suffix}").read_bytes().startswith(PNG)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_the_available_series_keeps_each_steps_lowest_sample() -> None:
    samples = [
        SimpleNamespace(at=10.0 + i * 0.1, usable={(0, 0): 1000 - i, (1, 0): 5}) for i in range(10)
    ]
    samples[3].usable[(0, 0)] = 10  # a dip inside the first half second
    points = pictures.available_series(samples, (0, 0), start=10.0)
    assert [v for _, v in points] == [10, 991]
    assert [t for t, _ in points] == [pytest.approx(0.3), pytest.approx(0.9)]


def test_a_rate_is_kept_per_second_and_drawn_averaged() -> None:
    acked = [(100.0 + i * 0.01, 1000) for i in range(1000)]  # 100 kB/s for 10 s
    points = pictures.rate_series(acked, start=100.0, end=120.0)
    assert len(points) == 20
    assert dict(points)[0.5] == pytest.approx(100_000, rel=0.01)
    assert dict(points)[10.5] == 0
    drawn = dict(pictures.smoothed(points, 4))
    assert drawn[0.5] == pytest.approx(100_000, rel=0.01)  # one second so far
    assert drawn[9.5] == pytest.approx(100_000, rel=0.01)  # the four seconds up to it: loaded
    assert drawn[11.5] == pytest.approx(50_000, rel=0.02)  # 8-11 s: two of load, two without
    assert drawn[19.5] == 0


def test_another_volume_crossing_is_found_for_the_rates_panels() -> None:
    def sample(at: float, broker_2: int) -> SimpleNamespace:
        return SimpleNamespace(at=at, usable={(0, 0): 1, (1, 0): 10 * MIB, (2, 0): broker_2})

    samples = [sample(5.0, 0), sample(10.0, 9 * MIB), sample(12.5, LIMIT), sample(13.0, 0)]
    mark = pictures.other_crossing(samples, (0, 0), LIMIT, start=10.0)
    assert mark == Mark(2.5, OTHER_CROSSING, "broker 2's log dir 0 crossed the limit")
    assert pictures.other_crossing(samples[:2], (0, 0), LIMIT, start=10.0) is None


def test_every_crossing_of_the_limit_is_found_once() -> None:
    """Down through the limit, wobbling around it (one crossing), back well above, down again."""
    values = [10 * MIB, LIMIT + 1, LIMIT, LIMIT + 1000, LIMIT - 5, 10 * MIB, LIMIT - 1, 0]
    samples = [SimpleNamespace(at=100.0 + i, usable={(0, 0): v}) for i, v in enumerate(values)]
    assert pictures.crossings(samples, (0, 0), LIMIT, start=100.0) == [2.0, 6.0]
    assert pictures.crossings(samples, (0, 0), LIMIT, start=103.0) == [1.0, 3.0]
