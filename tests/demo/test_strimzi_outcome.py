"""How the strimzi scenario reads its samples: the share and the longest stretch unthrottled."""

from __future__ import annotations

from demo.strimzi import ENTITIES, longest_stretch, unthrottled


def test_the_longest_stretch_runs_from_the_first_unthrottled_sample_to_the_next_throttled_one():
    flags = [(0.0, False), (1.0, True), (1.5, True), (3.0, False), (4.0, True), (4.5, False)]
    assert longest_stretch(flags) == 2.0
    assert longest_stretch([(0.0, True), (2.5, True)]) == 2.5, "still unthrottled at the end"
    assert longest_stretch([]) == 0.0


def test_the_share_counts_only_samples_within_the_firing_window():
    names = list(ENTITIES)
    at = {name: False for name in names}
    reset = {**at, names[0]: True}
    samples = [(0.0, reset), (1.0, reset), (2.0, at), (3.0, at), (9.0, reset)]
    share, longest = unthrottled(samples, 1.0, 5.0)
    assert share[names[0]] == 1 / 3 and share[names[1]] == 0.0
    assert longest[names[0]] == 1.0
