"""Kubernetes resource quantities (`100m`, `1.5Gi`, `2e3`) as exact integers.

cpu is kept in millicores (kube-scheduler's `MilliValue`), everything else in base units
(`Value`: bytes for memory). Both round up, as Kubernetes does.

Every value the scheduler computes on saturates at `MAX_QUANTITY` (2^56, 72 PB or 72 billion
cores, far above any real node): single quantities, a pod's sum over its containers
(`saturating_add`) and a node's sum over its pods. An absurd request ("1000000Ei", or two
containers asking 4Ei each) stays an ordinary integer that no node can satisfy, and the int64
columns filters and scores compute on cannot overflow: the largest intermediate they form is
a sum of two saturated values or one times 100.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Final

MAX_QUANTITY: Final = 2**56

_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: Final = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY_RE: Final = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$"
)


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def parse_fraction(text: object) -> Fraction:
    if isinstance(text, bool):
        raise QuantityError(f"not a quantity: {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"not a quantity: {text!r}")
        return Fraction(text)
    if not isinstance(text, str):
        raise QuantityError(f"not a quantity: {text!r}")
    match = _QUANTITY_RE.match(text.strip())
    if match is None or len(text) > 64:
        raise QuantityError(f"not a quantity: {text!r}")
    number = Fraction(match["num"])
    if match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > 30:
            raise QuantityError(f"quantity exponent out of range: {text!r}")
        return number * Fraction(10) ** exponent
    suffix = match["suffix"] or ""
    return number * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])


def saturate(value: int) -> int:
    """`value` clamped to [-MAX_QUANTITY, MAX_QUANTITY]."""
    return max(-MAX_QUANTITY, min(MAX_QUANTITY, value))


def saturating_add(a: int, b: int) -> int:
    return saturate(a + b)


def parse_value(text: object) -> int:
    """Base units, rounded up: `1.5Gi` -> 1610612736, `100m` -> 1."""
    return saturate(math.ceil(parse_fraction(text)))


def parse_milli(text: object) -> int:
    """Thousandths, rounded up: `100m` -> 100, `1.5` -> 1500, `1u` -> 1."""
    return saturate(math.ceil(parse_fraction(text) * 1000))


#: parse_resource's answers for text it has seen: pods repeat a handful of quantities
#: (`100m`, `500Mi`) thousands of times, and every watch event re-reads them.
_SEEN: dict[tuple[bool, str], int] = {}
_SEEN_MAX = 4096


def parse_resource(name: str, text: object) -> int:
    """A resource's quantity in the unit the scheduler uses for it (millicores for cpu)."""
    milli = name == "cpu"
    if type(text) is not str:
        return parse_milli(text) if milli else parse_value(text)
    key = (milli, text)
    value = _SEEN.get(key)
    if value is None:
        value = parse_milli(text) if milli else parse_value(text)  # raises before it is kept
        if len(_SEEN) >= _SEEN_MAX:
            _SEEN.clear()  # a pod naming thousands of made-up quantities: start again
        _SEEN[key] = value
    return value


def format_quantity(resource: str, value: int) -> str:
    """A resource amount for people: cpu in cores (`1.2`, `0.25`), memory and storage with
    the largest binary unit that keeps it readable (`1.5Gi`, `512Mi`), any other as is."""
    if resource == "cpu":
        return _trim(f"{value / 1000:.3f}")
    if resource == "memory" or resource.startswith(("ephemeral-storage", "hugepages-")):
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = _BINARY[suffix]
            if abs(value) >= unit:
                if value % unit == 0:
                    return f"{value // unit}{suffix}"
                return f"{_trim(f'{value / unit:.2f}')}{suffix}"
    return str(value)


def _trim(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text
