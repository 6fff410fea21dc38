"""Partitionable devices: the counter sets of a pool, and what a search takes from them
(kube-scheduler's `incubating` allocator with `DRAPartitionableDevices`, on by default from
1.36: k8s.io/dynamic-resource-allocation structured/internal/incubating, `buildPool`,
`checkAvailableCounters`, `deallocateCountersForDevice`).

A pool's counter sets come from its slices with `sharedCounters` (such a slice has no
devices); its devices' `consumesCounters` name a set and take some of its counters. What is
available in a set is what it has, less what every allocated device of the pool consumes (any
claim, in flight or written, whichever node the device reaches: a device not reaching the
node being tried still draws on the set). A search adds what it takes device by device and
gives it back when it backtracks; a device may be taken only while no counter of any set of
its pool is overdrawn (a set already overdrawn by allocated devices blocks every
counter-consuming device of the pool, as kube-scheduler's check does).

A pool whose counter sets repeat a name, or one of whose devices consumes from a set or a
counter the pool does not have, is invalid (`PoolCounters.invalid`, kube's reason): nothing is
allocated from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from ascheduler.model.dra import ResourceSlice
from ascheduler.model.dra_counters import CounterConsumption

DeviceId = tuple[str, str, str]
#: Counter set name -> counter name -> value.
Counters = dict[str, dict[str, Fraction]]


@dataclass(slots=True)
class PoolCounters:
    """One pool's counter sets and what each of its devices consumes."""

    driver: str
    pool: str
    sets: Counters = field(default_factory=dict)
    #: Device name -> its `consumesCounters` (devices that consume none are left out).
    consumers: dict[str, tuple[CounterConsumption, ...]] = field(default_factory=dict)
    #: Why the pool is invalid ("" when it is not).
    invalid: str = ""

    def available(self, allocated: Callable[[DeviceId], bool]) -> Counters:
        """The sets less what the allocated devices of the pool consume (may go negative)."""
        out = {name: dict(counters) for name, counters in self.sets.items()}
        for device, consumes in self.consumers.items():
            if allocated((self.driver, self.pool, device)):
                _add(out, consumes, -1)
        return out

    def overdrawn(self, taken: Iterable[str], adding: Iterable[str]) -> str:
        """Why allocating the devices `adding` beside the allocated `taken` would overdraw a
        counter of the sets they consume ("" when they fit)."""
        available = {name: dict(counters) for name, counters in self.sets.items()}
        for device in taken:
            _add(available, self.consumers.get(device, ()), -1)
        wanted: Counters = {}
        for device in adding:
            _add(wanted, self.consumers.get(device, ()), 1, create=True)
        for set_name, counters in sorted(wanted.items()):
            for counter, amount in sorted(counters.items()):
                left = available.get(set_name, {}).get(counter, Fraction(0))
                if amount > left:
                    return (
                        f"counter {counter} of counter set {set_name} in pool {self.pool} "
                        f"(driver {self.driver}): {_text(amount)} wanted, {_text(left)} left"
                    )
        return ""


def _text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(float(value))


def _add(
    into: Counters, consumes: Iterable[CounterConsumption], sign: int, *, create: bool = False
) -> None:
    for consumption in consumes:
        counters = into.get(consumption.counter_set)
        if counters is None:
            if not create:
                continue  # validated: the set exists (kube skips what it cannot find)
            counters = into[consumption.counter_set] = {}
        for name, value in consumption.counters.items():
            if name in counters or create:
                counters[name] = counters.get(name, Fraction(0)) + sign * value


def pool_counters(driver: str, pool: str, slices: Iterable[ResourceSlice]) -> PoolCounters:
    """The counters of one pool from its slices (one generation), validated as kube's
    buildPool does: counter set names unique, every consumption naming a set and counters of
    it."""
    out = PoolCounters(driver, pool)
    device_slices = []
    for s in slices:
        if not s.shared_counters:
            device_slices.append(s)
            continue
        for counter_set in s.counter_sets:
            if counter_set.name in out.sets and not out.invalid:
                out.invalid = f"duplicate counter set name {counter_set.name}"
            out.sets[counter_set.name] = dict(counter_set.counters)
    for s in device_slices:
        for device in s.devices:
            if not device.consumes:
                continue
            out.consumers[device.name] = device.consumes
            if out.invalid:
                continue
            for consumption in device.consumes:
                have = out.sets.get(consumption.counter_set)
                if have is None:
                    out.invalid = f"counter set {consumption.counter_set} not found"
                    break
                missing = [n for n in consumption.counters if n not in have]
                if missing:
                    out.invalid = (
                        f"counter {missing[0]} not found in counter set {consumption.counter_set}"
                    )
                    break
    return out


class CounterLedger:
    """What one search has taken from the counter sets of the pools it draws on."""

    __slots__ = ("_allocated", "_available", "_consumed")

    def __init__(self, allocated: Callable[[DeviceId], bool]) -> None:
        self._allocated = allocated
        #: Per pool: available before the search (computed once, on first use).
        self._available: dict[tuple[str, str], Counters] = {}
        #: Per pool: taken by the search so far.
        self._consumed: dict[tuple[str, str], Counters] = {}

    def take(self, counters: PoolCounters, consumes: tuple[CounterConsumption, ...]) -> bool:
        """Take a device's consumption if no counter of its pool ends up overdrawn."""
        key = (counters.driver, counters.pool)
        available = self._available.get(key)
        if available is None:
            available = self._available[key] = counters.available(self._allocated)
        consumed = self._consumed.setdefault(key, {})
        _add(consumed, consumes, 1, create=True)
        for set_name, have in available.items():
            used = consumed.get(set_name, {})
            for counter, value in have.items():
                if value < used.get(counter, 0):
                    _add(consumed, consumes, -1)
                    return False
        return True

    def give_back(self, counters: PoolCounters, consumes: tuple[CounterConsumption, ...]) -> None:
        _add(self._consumed[(counters.driver, counters.pool)], consumes, -1)


def consumption(
    pools: Mapping[tuple[str, str], PoolCounters | None], device: DeviceId
) -> tuple[PoolCounters, tuple[CounterConsumption, ...]] | None:
    """A device's pool counters and consumption, where it consumes counters."""
    counters = pools.get(device[:2])
    if counters is None:
        return None
    consumes = counters.consumers.get(device[2])
    return (counters, consumes) if consumes else None
