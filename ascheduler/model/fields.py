"""Reading a field of an API object that should be an object or a list: the value, or an
empty one and an error naming the field's path (absent, None, is just empty)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def as_map(value: Any, path: str, errors: list[str]) -> Mapping[str, Any]:
    """`value` if it is an object; else {} and an error naming `path` (None is just absent)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    errors.append(f"{path}: expected an object, got {type(value).__name__}")
    return {}


def as_list(value: Any, path: str, errors: list[str]) -> list[Any]:
    """`value` if it is a list; else [] and an error naming `path` (None is just absent)."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    errors.append(f"{path}: expected a list, got {type(value).__name__}")
    return []
