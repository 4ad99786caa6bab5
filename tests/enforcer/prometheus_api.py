"""Answers of Prometheus' HTTP API for `responses` callbacks (the API mocked where a test does
not start Prometheus)."""

import json


def vector_answer(
    samples: list[tuple[dict[str, str], float]], at: float = 0.0
) -> tuple[int, dict, str]:
    """A successful instant query: one series per (labels, value), evaluated `at`."""
    result = [{"metric": labels, "value": [at, str(value)]} for labels, value in samples]
    body = {"status": "success", "data": {"resultType": "vector", "result": result}}
    return 200, {}, json.dumps(body)
