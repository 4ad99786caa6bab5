"""Benchmarks: each prints ratios measured side by side in one run and writes them, with the run's
date, machine, commit and load, to docs/results/ (bench/results.py). Never part of the tests."""
