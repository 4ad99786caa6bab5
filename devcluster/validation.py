"""Checks for control requests; every failure names the field, the bad value and what is allowed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class ControlError(Exception):
    """A control request the devcluster refuses; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def require_object(body: Any, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise ControlError(400, f"expected a JSON object with any of {', '.join(allowed)}")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise ControlError(
            400, f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}"
        )
    if not body:
        raise ControlError(400, f"empty request: give any of {', '.join(allowed)}")
    return body


def integer(name: str, value: Any, minimum: int = 0, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ControlError(400, f"{name} must be an integer, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        allowed = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise ControlError(400, f"{name} must be {allowed}, got {value}")
    return value


def optional_integer(name: str, value: Any, minimum: int = 0, maximum: int | None = None):
    return None if value is None else integer(name, value, minimum, maximum)


def boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ControlError(400, f"{name} must be true or false, got {value!r}")
    return value


def read_json_file(path: Path, what: str) -> Any:
    """The JSON value in a file; ValueError naming `what`, the file and the problem."""
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what} {path}: {exc}") from None
