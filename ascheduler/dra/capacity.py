"""Consumable capacity (`DRAConsumableCapacity`): how much of a device's capacity a request
consumes, and whether that still fits beside what other allocations consume.

kube-scheduler's rules (dynamic-resource-allocation `structured/internal/incubating/
consumable_capacity.go`, the allocator its default gates select from v1.36): for every
capacity the device has, a request consumes

* what it asks for (`capacity.requests[name]`), rounded up by the capacity's `requestPolicy`:
  to `validRange.min` when below it, then to `min + n*step`; or to the first of `validValues`
  not below it;
* where it does not ask: the policy's `default`, or else the whole capacity.

A device fits when every capacity the request names exists on it, no consumption violates
the policy (above `validRange.max`, off the step, not one of `validValues`), and what the
device's other shares consume (allocated, in flight, and taken earlier in this search) plus
this fits its value.

Releases differ in the arithmetic (`Rules`):

* v1.36 works in whole units (`Value()`, rounded up) and writes rounded values in binary
  format;
* v1.37 uses thousandths where `DRAFractionalCapacityRange` is on and every bound of the
  range is exact in them (a step of at least `1m`), writes rounded values in the step's
  format, and aborts the allocation (`CapacityError`) on a request it cannot represent or a
  negative consumption.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from ascheduler.model.dra import Quantity
from ascheduler.model.dra_capacity import (
    BINARY_SI,
    Amount,
    RequestPolicy,
    ValidRange,
    format_of,
)

MAX_INT64: Final = 2**63 - 1
NOT_REPRESENTABLE: Final = "capacity request cannot be represented in the device's range arithmetic"
NEGATIVE: Final = "capacity value is negative"


class CapacityError(Exception):
    """A consumption kube-scheduler cannot compute: the allocation aborts with this text."""


@dataclass(frozen=True, slots=True)
class Rules:
    """Which release's arithmetic: v1.37's (`strict`), with thousandths where
    `DRAFractionalCapacityRange` is on (`fractional`)."""

    strict: bool = True
    fractional: bool = True


#: Consumption per capacity name.
Consumed = Mapping[str, Fraction]


def go_value(v: Fraction) -> int:
    """Quantity.Value(): whole units, rounded away from zero."""
    return math.ceil(v) if v >= 0 else math.floor(v)


def go_milli(v: Fraction) -> int:
    return go_value(v * 1000)


def _safe_milli(v: Fraction) -> int | None:
    """The value in thousandths where that is exact and fits an int64 (safeMilliValue)."""
    milli = v * 1000
    if milli.denominator != 1 or abs(milli) > MAX_INT64:
        return None
    return int(milli)


def _use_milli(r: ValidRange, rules: Rules) -> bool:
    if not (rules.strict and rules.fractional):
        return False
    for bound in (r.minimum, r.maximum, r.step):
        if bound is not None and _safe_milli(bound.value) is None:
            return False
    return r.step is None or (_safe_milli(r.step.value) or 0) >= 1


def _go_rem(a: int, b: int) -> int:
    """Go's `%`: the sign of the dividend."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _go_div(a: int, b: int) -> int:
    """Go's `/` on integers: truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _quote(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _round_up_range(requested: Amount, r: ValidRange, rules: Rules) -> Amount:
    assert r.minimum is not None
    if requested.value < r.minimum.value:
        return r.minimum
    step = r.step
    if step is None:
        return requested
    if not rules.strict:
        req, st, mn = go_value(requested.value), go_value(step.value), go_value(r.minimum.value)
        added = req - mn
        n = _go_div(added, st) + (1 if _go_rem(added, st) else 0)
        return Amount(Fraction(mn + st * n), BINARY_SI)
    if _use_milli(r, rules):
        req_milli = _safe_milli(requested.value)
        if req_milli is None:
            raise CapacityError(
                f"{NOT_REPRESENTABLE}: request {requested.text} is not a representable milli value"
            )
        st, mn = go_milli(step.value), go_milli(r.minimum.value)
        added = req_milli - mn
        n = _go_div(added, st) + (1 if _go_rem(added, st) else 0)
        if n > _go_div(MAX_INT64 - mn, st):
            raise CapacityError(
                f"{NOT_REPRESENTABLE}: rounding request {requested.text} up to the next step "
                "passes the milli-value range"
            )
        return Amount(Fraction(mn + st * n, 1000), step.format)
    if requested.value > MAX_INT64:
        raise CapacityError(f"{NOT_REPRESENTABLE}: request {requested.text} exceeds MaxInt64")
    req, st, mn = go_value(requested.value), go_value(step.value), go_value(r.minimum.value)
    added = req - mn
    n = _go_div(added, st) + (1 if _go_rem(added, st) else 0)
    if mn >= 0 and n > _go_div(MAX_INT64 - mn, st):
        raise CapacityError(
            f"{NOT_REPRESENTABLE}: rounding request {requested.text} up to the next step passes "
            "MaxInt64"
        )
    return Amount(Fraction(mn + st * n), step.format)


def consumption(
    requested: Amount | None, capacity: Quantity, policy: RequestPolicy | None, rules: Rules
) -> Amount:
    """calculateConsumedCapacity: what a request consumes of one capacity."""
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return Amount(capacity.value, format_of(capacity.text))
    if policy is None:
        return requested
    if policy.valid_range is not None and policy.valid_range.minimum is not None:
        return _round_up_range(requested, policy.valid_range, rules)
    if policy.valid_values is not None:
        for valid in policy.valid_values:
            if requested.value <= valid.value:
                return valid
    return requested


def violates(consumed: Fraction, policy: RequestPolicy | None, rules: Rules) -> bool:
    """violatesPolicy: the consumption is not one the policy allows."""
    if policy is None:
        return False
    if policy.default is not None and consumed == policy.default.value:
        return False
    r = policy.valid_range
    if r is not None:
        if r.maximum is not None and consumed > r.maximum.value:
            return True
        if r.step is not None:
            minimum = r.minimum.value if r.minimum is not None else Fraction(0)
            if _use_milli(r, rules):
                req = _safe_milli(consumed)
                if req is None:
                    return True
                st, mn = go_milli(r.step.value), go_milli(minimum)
            else:
                req, st, mn = go_value(consumed), go_value(r.step.value), go_value(minimum)
            if st == 0 or _go_rem(req - mn, st) != 0:
                return True
        return False
    if policy.valid_values:
        return not any(consumed == v.value for v in policy.valid_values)
    return False


def consumptions(
    requests: Mapping[str, Amount] | None,
    capacity: Mapping[str, Quantity],
    policies: Mapping[str, RequestPolicy],
    rules: Rules,
) -> dict[str, Amount]:
    """GetConsumedCapacityFromRequest: the consumption of every capacity of the device (in
    name order, so the first error reported is always the same one)."""
    out: dict[str, Amount] = {}
    for name in sorted(capacity):
        asked = requests.get(name) if requests else None
        try:
            consumed = consumption(asked, capacity[name], policies.get(name), rules)
        except CapacityError as exc:
            raise CapacityError(f"capacity {_quote(name)}: {exc}") from None
        if rules.strict and consumed.value < 0:
            raise CapacityError(f"capacity {_quote(name)}: {NEGATIVE}")
        out[name] = consumed
    return out


def fits(
    requests: Mapping[str, Amount] | None,
    capacity: Mapping[str, Quantity],
    policies: Mapping[str, RequestPolicy],
    rules: Rules,
    allocated: Consumed | None = None,
    allocating: Consumed | None = None,
) -> bool:
    """CmpRequestOverCapacity: the request's consumption fits beside `allocated` (the
    device's shares known to the cache) and `allocating` (shares taken earlier in this
    search). Raises CapacityError where v1.37 aborts."""
    if requests and any(name not in capacity for name in requests):
        return False
    consumed = consumptions(requests, capacity, policies, rules)
    for name, amount in consumed.items():
        if violates(amount.value, policies.get(name), rules):
            return False
        total = amount.value
        if allocated:
            total += allocated.get(name, 0)
        if allocating:
            total += allocating.get(name, 0)
        if total > capacity[name].value:
            return False
    return True
