"""The `distinctAttribute` constraint (`DRAConsumableCapacity`): the devices of the
constraint's requests must all differ in an attribute, so a claim cannot take one shared
device twice for two requests.

kube-scheduler's allocator (dynamic-resource-allocation `structured/internal/incubating/
constraint.go`) differs between releases, and both are followed:

* v1.37 keeps every device's value and refuses a device whose value one of them has (the
  same type and equal; versions compare as text);
* v1.36 keeps one value per request name (a request's later device replaces its earlier
  one's) and lets the first device of all in unchecked; removing a device forgets its
  request's value altogether.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ascheduler.model.dra import AttributeValue, Semver

#: An attribute of a device (`dra.allocator.lookup_attribute`).
Lookup = Callable[[Any, str], AttributeValue | None]


def _duplicate(a: AttributeValue, b: AttributeValue) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, Semver):
        assert isinstance(b, Semver)
        return a.text == b.text
    return a == b


class DistinctAttribute:
    """One `distinctAttribute` constraint of a claim, as the allocator adds and removes its
    devices (the same interface as `matchAttribute`'s)."""

    __slots__ = ("attribute", "by_request", "count", "lookup", "requests", "strict", "values")

    def __init__(
        self, requests: tuple[str, ...], attribute: str, lookup: Lookup, *, strict: bool
    ) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute
        self.lookup = lookup
        self.strict = strict
        self.values: list[AttributeValue] = []  # v1.37
        self.by_request: dict[str, AttributeValue] = {}  # v1.36
        self.count = 0

    def _applies(self, base: str, sub: str) -> bool:
        if not self.requests:
            return True
        return base in self.requests or (bool(sub) and f"{base}/{sub}" in self.requests)

    def add(self, base: str, sub: str, device: Any) -> bool:
        if not self._applies(base, sub):
            return True
        value = self.lookup(device, self.attribute)
        if value is None:
            return False
        if self.strict:
            if any(_duplicate(value, v) for v in self.values):
                return False
            self.values.append(value)
            return True
        if self.count and any(_duplicate(value, v) for v in self.by_request.values()):
            return False
        self.by_request[base] = value
        self.count += 1
        return True

    def remove(self, base: str, sub: str) -> None:
        if not self._applies(base, sub):
            return
        if self.strict:
            self.values.pop()
            return
        self.by_request.pop(base, None)
        self.count -= 1
