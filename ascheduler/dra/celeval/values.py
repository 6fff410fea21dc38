"""Values as the metered evaluator holds them, and the rules cel-go applies to them.

A device's values arrive as `ascheduler.dra.cel.device_value()` builds them: strings, ints,
bools, and tagged bytes for quantities (`Q` + nano-units) and semantic versions (`V` + text).
CEL bytes literals are refused when an expression is metered, so bytes at run time are always
one of those tags. Lists are Python lists, maps dicts, null None, optionals `Optional`.

Errors are Python exceptions (`Fail`), not values: the evaluator catches them exactly where
cel-go lets an error value be absorbed (`&&`, `||`, the loop condition, a comprehension's
accumulator), and keeps evaluating a call's remaining arguments after one fails, so the cost
it meters is the cost cel-go meters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from ascheduler.dra.celeval.ast import Uint


class Fail(Exception):
    """A CEL evaluation error, with cel-go's message."""


class CostExceeded(Exception):
    """The running cost passed the limit."""


MESSAGE_COST: Final = "operation cancelled: actual cost limit exceeded"
NO_OVERLOAD: Final = "no such overload"


class Optional:
    """An optional value: `value` is meaningful when `present`."""

    __slots__ = ("present", "value")

    def __init__(self, present: bool, value: Any = None) -> None:
        self.present = present
        self.value = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Optional):
            return False
        if self.present != other.present:
            return False
        return not self.present or equal(self.value, other.value)

    __hash__ = None  # type: ignore[assignment]


NONE: Final = Optional(False)


class Domains(dict[str, Any]):
    """`device.attributes` / `device.capacity`: an unknown domain reads as an empty map, as
    Kubernetes' map with a default does; `in`, `size()` and iteration see the real keys."""

    def find(self, key: Any) -> Any:
        return self.get(key, _EMPTY) if isinstance(key, str) else _EMPTY


_EMPTY: Final[dict[str, Any]] = {}


def size(value: Any) -> int:
    """cel-go's actualSize: the length of sized values (strings in code points), else 1."""
    kind = type(value)
    if kind is str or kind is list or kind is dict or kind is Domains:
        return len(value)
    if kind is Optional and value.present:
        return size(value.value)
    return 1


def traversal(value: Any) -> int:
    """Kubernetes' traversalCost of a string (its UTF-8 length, rounded down) or list."""
    if type(value) is str:
        return int(len(value.encode()) * 0.1)
    if type(value) is list:
        return sum(traversal(v) for v in value)
    return 1


def ceil_tenth(n: int | float) -> int:
    return math.ceil(n * 0.1)


def _number(v: Any) -> bool:
    kind = type(v)
    return kind is int or kind is float or kind is Uint


def equal(a: Any, b: Any) -> bool:
    """CEL's heterogeneous equality: numbers compare across types, other kinds must match."""
    ka, kb = type(a), type(b)
    if ka is kb and ka is not list and ka is not dict and ka is not Domains:
        return bool(a == b)
    if _number(a) and _number(b):
        return bool(a == b)
    if ka is list and kb is list:
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        if len(a) != len(b):
            return False
        for key, value in a.items():
            other = _lookup(b, key)
            if other is _ABSENT or not equal(value, other):
                return False
        return True
    return False


_ABSENT: Final = object()


def _lookup(m: Mapping[Any, Any], key: Any) -> Any:
    """A map entry by CEL key equality (1, 1u and 1.0 are the same key)."""
    if type(key) is bool:
        value = m.get(key, _ABSENT)
        return value if any(type(k) is bool and k == key for k in m) else _ABSENT
    if _number(key):
        if type(key) is float and not key.is_integer():
            return _ABSENT
        for k, v in m.items():
            if _number(k) and k == key:
                return v
        return _ABSENT
    if type(key) is str:
        return m.get(key, _ABSENT)
    return _ABSENT


def map_get(m: Any, key: Any) -> Any:
    """`m[key]`, failing as cel-go does on a missing key."""
    if type(m) is Domains:
        return m.find(key)
    value = _lookup(m, key)
    if value is _ABSENT:
        raise Fail(f"no such key: {key_text(key)}")
    return value


def map_find(m: Any, key: Any) -> Any:
    """`m[key]`, or _ABSENT."""
    if type(m) is Domains:
        return m.find(key)
    return _lookup(m, key)


def map_contains(m: Any, key: Any) -> bool:
    return _lookup(m, key) is not _ABSENT


def key_text(key: Any) -> str:
    if type(key) is bool:
        return "true" if key else "false"
    return str(key)


def absent(value: Any) -> bool:
    return value is _ABSENT


def list_index(items: list[Any], index: Any) -> Any:
    if type(index) is float:
        if not index.is_integer():
            raise Fail(f"unsupported index value {index}")
        index = int(index)
    if not _number(index) or type(index) is bool:
        raise Fail(NO_OVERLOAD)
    if index < 0 or index >= len(items):
        raise Fail(f"index out of bounds: {index}")
    return items[index]


def type_name(value: Any) -> str:
    """The CEL type name, as cel.py's result messages spell it."""
    kind = type(value)
    if kind is bool:
        return "bool"
    if kind is int:
        return "int"
    if kind is Uint:
        return "uint"
    if kind is float:
        return "double"
    if kind is str:
        return "string"
    if kind is bytes:
        return "bytes"
    if kind is list:
        return "list"
    if kind is dict or kind is Domains:
        return "map"
    if kind is Optional:
        return "optional_type"
    if value is None:
        return "null_type"
    return kind.__name__


INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**63 - 1


def checked_int(value: int) -> int:
    if value < INT_MIN or value > INT_MAX:
        raise Fail("integer overflow")
    return value
