"""Devices shared by several allocations (`allowMultipleAllocations`, `DRAConsumableCapacity`):
what the cache knows of their shares, and the shares one search takes.

**The cache's view** (`Shares`, kept by `dra.store.ResourceObjects`) sorts every non-admin
result of the claims' allocations (informed, assumed, or in flight from Reserve) as
kube-scheduler's `foreachAllocatedDevice` does with the gate on: a result without `shareID`
holds its device alone (dedicated: no other claim may have it); one with a `shareID` is a
share, and its `consumedCapacity` adds to what the device's shares consume together
(`AggregatedCapacity`). With the gate off every result holds its device alone, as before.

**One search** (`Session`, one per `Allocator`) adds what its own earlier picks consume
(`allocatingCapacity`) and asks `dra.capacity` whether a request still fits a device. A share
is recorded with a fresh `shareID` (a UUID, as kube-scheduler's `GenerateShareID`) and the
consumption of every capacity of the device.

**Columns** for the count-first Filter: which device rows allow multiple allocations (their
remaining capacity depends on the shares, so counting cannot decide them: the exact search
does), which rows are held only by shares (not busy with the gate on), and which rows a
request's capacity asks fit at all (the static check kube-scheduler makes before an `All`
request lists its devices).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from ascheduler.dra.capacity import CapacityError, Consumed, Rules, consumptions, fits
from ascheduler.features import DRA_CONSUMABLE_CAPACITY, DRA_FRACTIONAL_CAPACITY_RANGE, Features
from ascheduler.model.dra import Allocation, Request
from ascheduler.model.dra import Device as DeviceSpec
from ascheduler.model.dra_capacity import Amount

DeviceId = tuple[str, str, str]
BoolArray = np.ndarray[Any, np.dtype[np.bool_]]


class Candidate(Protocol):
    """A device as the allocator offers it (`dra.allocator.Candidate`)."""

    @property
    def spec(self) -> DeviceSpec: ...

    @property
    def id(self) -> DeviceId: ...


class DeviceTable(Protocol):
    """The device table's rows (`dra.store.DeviceTable`)."""

    @property
    def serial(self) -> int: ...

    @property
    def n(self) -> int: ...

    @property
    def candidates(self) -> Sequence[Candidate]: ...

    @property
    def index(self) -> Mapping[DeviceId, int]: ...


@dataclass(slots=True)
class _Shared:
    holders: int = 0
    consumed: dict[str, Fraction] = field(default_factory=dict)


class Shares:
    """Per device: how many results hold it alone, and its shares with what they consume."""

    def __init__(self) -> None:
        self.dedicated: dict[DeviceId, int] = {}
        self.shared: dict[DeviceId, _Shared] = {}
        #: Bumped on every change (caches of the columns below key on it).
        self.revision = 0

    def count(self, allocation: Allocation | None, sign: int) -> None:
        if allocation is None:
            return
        for d in allocation.devices:
            if d.admin_access:
                continue
            device = d.device_id
            self.revision += 1
            if d.share_id is None:
                held = self.dedicated.get(device, 0) + sign
                if held > 0:
                    self.dedicated[device] = held
                else:
                    self.dedicated.pop(device, None)
                continue
            share = self.shared.setdefault(device, _Shared())
            share.holders += sign
            for name, amount in (d.consumed_capacity or {}).items():
                share.consumed[name] = share.consumed.get(name, Fraction(0)) + sign * amount.value
            if share.holders <= 0:
                del self.shared[device]

    def aggregated(self, device: DeviceId) -> Consumed | None:
        share = self.shared.get(device)
        return share.consumed if share is not None else None


@dataclass(frozen=True, slots=True)
class CapacityView:
    """The gate on: the release's arithmetic and the cache's shares."""

    rules: Rules
    shares: Shares

    def allocated(self, device: DeviceId) -> bool:
        """In use as kube-scheduler's allocator sees it with the gate on: held alone."""
        return device in self.shares.dedicated

    def session(self) -> Session:
        return Session(self)


def capacity_view(features: Features, shares: Shares) -> CapacityView | None:
    """None while `DRAConsumableCapacity` is off (v1.35's default): every result holds its
    device alone and capacity is not looked at."""
    if DRA_CONSUMABLE_CAPACITY not in features:
        return None
    rules = Rules(
        strict=features.since(1, 37), fractional=DRA_FRACTIONAL_CAPACITY_RANGE in features
    )
    return CapacityView(rules, shares)


class Session:
    """The shares one search has taken so far (see the module docstring)."""

    def __init__(self, view: CapacityView) -> None:
        self.view = view
        self.rules = view.rules
        self.allocating: dict[DeviceId, dict[str, Fraction]] = {}

    def fits(self, request: Request, device: Candidate) -> bool:
        """Raises CapacityError (the caller words it)."""
        spec = device.spec
        return fits(
            request.capacity,
            spec.capacity,
            spec.request_policies,
            self.rules,
            self.view.shares.aggregated(device.id),
            self.allocating.get(device.id),
        )

    def fits_unshared(self, request: Request, spec: DeviceSpec) -> bool:
        """The static check: the request fits the device with no other share."""
        return fits(request.capacity, spec.capacity, spec.request_policies, self.rules)

    def take(self, request: Request, device: Candidate) -> tuple[str, dict[str, Amount]]:
        """A share of `device` for `request`: its id and consumption, counted for the rest of
        the search."""
        spec = device.spec
        consumed = consumptions(request.capacity, spec.capacity, spec.request_policies, self.rules)
        into = self.allocating.setdefault(device.id, {})
        for name, amount in consumed.items():
            into[name] = into.get(name, Fraction(0)) + amount.value
        return str(uuid.uuid4()), consumed

    def give_back(self, device: DeviceId, consumed: Mapping[str, Amount]) -> None:
        into = self.allocating.get(device)
        if into is None:
            return
        for name, amount in consumed.items():
            into[name] = into.get(name, Fraction(0)) - amount.value


# -- columns for the count-first Filter --------------------------------------------------


_MULTI: dict[int, BoolArray] = {}
_STATIC: dict[tuple[int, Rules, tuple[tuple[str, Fraction], ...]], tuple[BoolArray, BoolArray]] = {}


def multi_rows(table: DeviceTable) -> BoolArray:
    """Rows of devices that allow multiple allocations (cached per table)."""
    hit = _MULTI.get(table.serial)
    if hit is None:
        if len(_MULTI) > 8:
            _MULTI.clear()
        hit = np.fromiter(
            (c.spec.allow_multiple_allocations for c in table.candidates),
            dtype=np.bool_,
            count=table.n,
        )
        _MULTI[table.serial] = hit
    return hit


def shared_only_rows(table: DeviceTable, shares: Shares) -> BoolArray:
    """Rows held by shares and by no dedicated result (busy in `table.allocated`, yet free
    for kube-scheduler's allocator with the gate on)."""
    rows = np.zeros(table.n, dtype=np.bool_)
    for device in shares.shared:
        if device in shares.dedicated:
            continue
        row = table.index.get(device)
        if row is not None:
            rows[row] = True
    return rows


def static_fit(table: DeviceTable, request: Request, rules: Rules) -> tuple[BoolArray, BoolArray]:
    """Per device row: whether the request's capacity asks fit the device with no other
    share, and whether that check fails with an error (the search reports it there). Only
    for a request that names capacity: one that does not consumes each capacity's default
    or whole value, which always fits an unshared device. Computed once per table and
    request."""
    assert request.capacity is not None
    key = (table.serial, rules, tuple(sorted((k, v.value) for k, v in request.capacity.items())))
    hit = _STATIC.get(key)
    if hit is None:
        if len(_STATIC) > 64:
            _STATIC.clear()
        ok = np.zeros(table.n, dtype=np.bool_)
        failed = np.zeros(table.n, dtype=np.bool_)
        for i, c in enumerate(table.candidates):
            try:
                ok[i] = fits(request.capacity, c.spec.capacity, c.spec.request_policies, rules)
            except CapacityError:
                ok[i] = failed[i] = True  # the search meets the error there
        hit = _STATIC[key] = (ok, failed)
    return hit


def shared_use(
    table: DeviceTable, allocations: Iterable[Allocation]
) -> dict[DeviceId, tuple[dict[str, Fraction], dict[str, Fraction]]]:
    """Per device the allocations share: what they consume of it together, and its capacity
    (what the device locks check against the API server's other shares)."""
    out: dict[DeviceId, tuple[dict[str, Fraction], dict[str, Fraction]]] = {}
    for allocation in allocations:
        for d in allocation.devices:
            if d.admin_access or d.share_id is None:
                continue
            row = table.index.get(d.device_id)
            if d.device_id not in out:
                capacity = (
                    {k: q.value for k, q in table.candidates[row].spec.capacity.items()}
                    if row is not None
                    else {}
                )
                out[d.device_id] = ({}, capacity)
            consumed = out[d.device_id][0]
            for name, amount in (d.consumed_capacity or {}).items():
                consumed[name] = consumed.get(name, Fraction(0)) + amount.value
    return out
