"""Partitionable devices (`DRAPartitionableDevices`) as the allocator reads them: a
ResourceSlice's `sharedCounters` (counter sets: a name and counters, each a quantity) and a
device's `consumesCounters` (what allocating it takes from the counter sets of its pool).

A MIG-style GPU publishes its memory and compute as one counter set, and each partition (the
full GPU, its halves...) as a device consuming part of it: two partitions may be allocated at
once only while their consumption together fits the set. Parsing never raises; a field that
cannot be read is recorded with its path, as for the rest of the slice (`model.dra`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ascheduler.model.quantity import QuantityError, parse_fraction


@dataclass(frozen=True, slots=True)
class CounterSet:
    """One entry of a slice's `sharedCounters`."""

    name: str
    #: Counter name -> how much of it there is.
    counters: Mapping[str, Fraction] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    """One entry of a device's `consumesCounters`."""

    counter_set: str
    #: Counter name -> how much allocating the device takes.
    counters: Mapping[str, Fraction] = field(default_factory=dict)


def _counters(raw: Any, path: str, errors: list[str]) -> dict[str, Fraction]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        errors.append(f"{path}: expected an object")
        return {}
    out: dict[str, Fraction] = {}
    for name, counter in raw.items():
        where = f"{path}[{name}]"
        if not isinstance(counter, Mapping):
            errors.append(f"{where}: expected an object")
            continue
        try:
            out[str(name)] = parse_fraction(counter.get("value"))
        except QuantityError as exc:
            errors.append(f"{where}.value: {exc}")
    return out


def _entries(raw: Any, path: str, errors: list[str]) -> list[tuple[str, Mapping[str, Any]]]:
    if raw is None:
        return []
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        errors.append(f"{path}: expected a list")
        return []
    out = []
    for i, entry in enumerate(raw):
        where = f"{path}[{i}]"
        if not isinstance(entry, Mapping):
            errors.append(f"{where}: expected an object")
            continue
        out.append((where, entry))
    return out


def _name(raw: Any, path: str, errors: list[str]) -> str:
    if not isinstance(raw, str) or not raw:
        errors.append(f"{path}: expected a non-empty string")
        return ""
    return raw


def parse_counter_sets(raw: Any, path: str, errors: list[str]) -> tuple[CounterSet, ...]:
    """A slice's `sharedCounters`."""
    return tuple(
        CounterSet(
            _name(entry.get("name"), f"{where}.name", errors),
            _counters(entry.get("counters"), f"{where}.counters", errors),
        )
        for where, entry in _entries(raw, path, errors)
    )


def parse_consumptions(raw: Any, path: str, errors: list[str]) -> tuple[CounterConsumption, ...]:
    """A device's `consumesCounters`."""
    return tuple(
        CounterConsumption(
            _name(entry.get("counterSet"), f"{where}.counterSet", errors),
            _counters(entry.get("counters"), f"{where}.counters", errors),
        )
        for where, entry in _entries(raw, path, errors)
    )
