"""Consumable capacity in DRA objects (`DRAConsumableCapacity`): a device's `requestPolicy` per
capacity, a request's `capacity.requests`, and what an allocation result records of a share
(`shareID`, `consumedCapacity`).

Quantities keep their text and exact value, and the format Kubernetes gives a quantity parsed
from that text (`BinarySI` for `Gi`-like suffixes, `DecimalExponent` for `e3`, else
`DecimalSI`): kube-scheduler writes a rounded consumption in the format of the policy's step
(v1.37) or always binary (v1.36), and `go_text` spells a value the way Kubernetes does, so
what this project writes reads as kube-scheduler's would.

Parsing never raises: a field that cannot be read is recorded with its path in the caller's
error list, as the rest of `model.dra` does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from ascheduler.model.quantity import QuantityError, parse_fraction

BINARY_SI: Final = "BinarySI"
DECIMAL_SI: Final = "DecimalSI"
DECIMAL_EXPONENT: Final = "DecimalExponent"

_BINARY_SUFFIXES: Final = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_EXPONENT: Final = re.compile(r"[eE][+-]?[0-9]+$")
_DECIMAL_SUFFIXES: Final = {
    -9: "n",
    -6: "u",
    -3: "m",
    0: "",
    3: "k",
    6: "M",
    9: "G",
    12: "T",
    15: "P",
    18: "E",
}


@dataclass(frozen=True, slots=True)
class Amount:
    """A quantity: its exact value and the format Kubernetes reads from its text."""

    value: Fraction
    format: str = DECIMAL_SI

    @property
    def text(self) -> str:
        return go_text(self.value, self.format)


@dataclass(frozen=True, slots=True)
class ValidRange:
    minimum: Amount | None = None
    maximum: Amount | None = None
    step: Amount | None = None


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    """A device capacity's `requestPolicy`. `valid_values` is None where the field is absent
    (kube-scheduler tells absent from empty)."""

    default: Amount | None = None
    valid_values: tuple[Amount, ...] | None = None
    valid_range: ValidRange | None = None


def format_of(text: object) -> str:
    """The format Kubernetes' ParseQuantity gives a quantity written as `text`."""
    if not isinstance(text, str):
        return DECIMAL_SI
    t = text.strip()
    if t.endswith(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")):
        return BINARY_SI
    if _EXPONENT.search(t):
        return DECIMAL_EXPONENT
    return DECIMAL_SI


def go_text(value: Fraction, fmt: str) -> str:
    """The canonical text of a quantity (apimachinery's Quantity.String)."""
    if fmt == BINARY_SI and value.denominator == 1 and abs(value) >= 1024:
        number, exponent = int(value), 0
        while number % 1024 == 0 and exponent < len(_BINARY_SUFFIXES) - 1:
            number //= 1024
            exponent += 1
        return f"{number}{_BINARY_SUFFIXES[exponent]}"
    if fmt == BINARY_SI:
        fmt = DECIMAL_SI
    # Decimal: an integer mantissa with the largest exponent (a multiple of 3) that keeps it
    # whole; precision past nano rounds up, as Kubernetes does.
    nanos = math.ceil(value * 10**9)
    exponent = -9
    while nanos != 0 and nanos % 1000 == 0 and exponent < 18:
        nanos //= 1000
        exponent += 3
    if nanos == 0:
        return "0"
    if fmt == DECIMAL_EXPONENT:
        return f"{nanos}e{exponent}" if exponent else str(nanos)
    return f"{nanos}{_DECIMAL_SUFFIXES[exponent]}"


def parse_amount(raw: Any, path: str, errors: list[str]) -> Amount | None:
    if raw is None:
        return None
    try:
        return Amount(parse_fraction(raw), format_of(raw))
    except QuantityError as exc:
        errors.append(f"{path}: {exc}")
        return None


def _map(raw: Any, path: str, errors: list[str]) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        errors.append(f"{path}: expected an object")
        return {}
    return raw


def parse_request_policy(raw: Any, path: str, errors: list[str]) -> RequestPolicy | None:
    """A device capacity's `requestPolicy` (None where absent)."""
    if raw is None:
        return None
    p = _map(raw, path, errors)
    values: tuple[Amount, ...] | None = None
    if p.get("validValues") is not None:
        listed = p["validValues"]
        if not isinstance(listed, list):
            errors.append(f"{path}.validValues: expected a list")
        else:
            parsed = [
                parse_amount(v, f"{path}.validValues[{i}]", errors) for i, v in enumerate(listed)
            ]
            values = tuple(a for a in parsed if a is not None)
    valid_range = None
    if p.get("validRange") is not None:
        r = _map(p["validRange"], f"{path}.validRange", errors)
        valid_range = ValidRange(
            minimum=parse_amount(r.get("min"), f"{path}.validRange.min", errors),
            maximum=parse_amount(r.get("max"), f"{path}.validRange.max", errors),
            step=parse_amount(r.get("step"), f"{path}.validRange.step", errors),
        )
        if valid_range.minimum is None:
            errors.append(f"{path}.validRange.min: required")
        if valid_range.step is not None and valid_range.step.value <= 0:
            errors.append(f"{path}.validRange.step: must be greater than zero")
    return RequestPolicy(
        default=parse_amount(p.get("default"), f"{path}.default", errors),
        valid_values=values,
        valid_range=valid_range,
    )


def parse_policies(raw: Any, path: str, errors: list[str]) -> dict[str, RequestPolicy]:
    """The `requestPolicy` of each entry of a device's `capacity`."""
    out: dict[str, RequestPolicy] = {}
    for name, value in _map(raw, path, errors).items():
        if not isinstance(value, Mapping):
            continue  # reported where the capacity's value is read
        policy = parse_request_policy(
            value.get("requestPolicy"), f"{path}[{name}].requestPolicy", errors
        )
        if policy is not None:
            out[str(name)] = policy
    return out


def parse_amounts(raw: Any, path: str, errors: list[str]) -> dict[str, Amount]:
    out: dict[str, Amount] = {}
    for name, value in _map(raw, path, errors).items():
        amount = parse_amount(value, f"{path}[{name}]", errors)
        if amount is not None:
            out[str(name)] = amount
    return out


def parse_capacity_requests(raw: Any, path: str, errors: list[str]) -> dict[str, Amount] | None:
    """A request's `capacity.requests`; None where `capacity` is absent (kube-scheduler refuses
    a request that has it while the gate is off)."""
    if raw is None:
        return None
    c = _map(raw, path, errors)
    return parse_amounts(c.get("requests"), f"{path}.requests", errors)


def parse_share_id(raw: Any, path: str, errors: list[str]) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str):
        errors.append(f"{path}: expected a string")
        return None
    return raw


def amounts_to_api(amounts: Mapping[str, Amount]) -> dict[str, str]:
    return {name: a.text for name, a in sorted(amounts.items())}


def distinct_attribute(raw: Mapping[str, Any], path: str, errors: list[str]) -> str | None:
    value = raw.get("distinctAttribute")
    if value is None:
        return None
    if not isinstance(value, str):
        errors.append(f"{path}.distinctAttribute: expected a string")
        return None
    return value or None
