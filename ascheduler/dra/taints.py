"""Device taints and tolerations, as kube-scheduler's allocator (1.36, 1.37) honours them.

**Which taints a device has.** Its own, from its ResourceSlice, while `DRADeviceTaints` is on
(beta in 1.36, GA in 1.37); off (1.35), the allocator never looks at them, so they are dropped
here. While `DRADeviceTaintRules` is on too (GA in 1.37; beta but off in 1.36, where the API is
resource.k8s.io/v1beta2), each DeviceTaintRule adds its taint to every device its selector
matches (driver, pool and device name, each only when set), as kube-scheduler's slice tracker
patches the slices it hands the allocator (`resourceslice/tracker/tracker.go`, applyPatches).
A rule without a selector matches no device from 1.37 and every device in 1.36. A rule whose
fields could not be read is left out (the event handler logs it).

**Which taints keep a device from a request.** `NoSchedule` and `NoExecute` ones the request
(the `exactly` request, or the `firstAvailable` subrequest tried) does not tolerate; any other
effect (`None`, or one a later release adds) is ignored (`taintPreventsAllocation` in the
stable/incubating allocators, `resourceclaim.ToleratesTaint`). A tainted device is simply
not a candidate: no message names it, and a node whose only devices are tainted fails with
the allocator's `cannot allocate all claims`. An `All` request takes every device its
selectors select, tainted or not, so one untolerated taint among them fails the node.

**What the scheduler does not do.** A claim already allocated keeps its devices whatever taint
they get: the scheduler only checks where an allocation is available; evicting pods from a
`NoExecute` device is the device taint eviction controller's work, and `tolerationSeconds`
and `timeAdded` are read only there.

**Columns.** The device table has a column of the rows with a taint that can block
(`blocked_column`); a request without tolerations simply loses those rows
(`tolerated_rows`), one with tolerations has only the tainted rows checked one by one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from ascheduler.features import DRA_DEVICE_TAINT_RULES, DRA_DEVICE_TAINTS, Features
from ascheduler.model.dra import Device, ResourceSlice
from ascheduler.model.dra_taints import NO_EXECUTE, NO_SCHEDULE, DeviceTaint, DeviceTaintRule

BoolArray = np.ndarray[Any, np.dtype[np.bool_]]

#: The effects that keep a device from a request that does not tolerate them.
BLOCKING: Final = frozenset({NO_SCHEDULE, NO_EXECUTE})


def tolerates(toleration: Mapping[str, Any], taint: DeviceTaint) -> bool:
    """kube's `resourceclaim.ToleratesTaint`: an empty effect or key matches any; `Equal`
    (also the empty operator) needs the same value, `Exists` any; another operator none."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    if key and key != taint.key:
        return False
    operator = toleration.get("operator") or ""
    if operator in ("", "Equal"):
        return bool((toleration.get("value") or "") == taint.value)
    return bool(operator == "Exists")


def prevents_allocation(
    taints: Sequence[DeviceTaint], tolerations: Sequence[Mapping[str, Any]]
) -> bool:
    """Whether a device with `taints` cannot be given to a request with `tolerations`."""
    return any(
        t.effect in BLOCKING and not any(tolerates(tol, t) for tol in tolerations) for t in taints
    )


def blocked_column(devices: Sequence[Device]) -> BoolArray:
    """Per device: whether it has a taint that blocks a request without tolerations."""
    return np.fromiter(
        (any(t.effect in BLOCKING for t in d.taints) for d in devices),
        dtype=np.bool_,
        count=len(devices),
    )


def tolerated_rows(
    blocked: BoolArray,
    taints_of: Callable[[int], Sequence[DeviceTaint]],
    tolerations: Sequence[Mapping[str, Any]],
) -> BoolArray | None:
    """The rows a request with `tolerations` may be given as far as taints go (None: all);
    `taints_of(row)`: a row's taints, read only for the blocked rows."""
    if not blocked.any():
        return None
    allowed = ~blocked
    if tolerations:
        for row in np.flatnonzero(blocked).tolist():
            allowed[row] = not prevents_allocation(taints_of(row), tolerations)
    return allowed


@dataclass(slots=True)
class DeviceTaints:
    """The taints the scheduler sees on devices (the module docstring): the slices' own while
    `enabled`, with the rules' added while `rules_enabled`."""

    enabled: bool = False
    rules_enabled: bool = False
    #: 1.36: a rule without a selector matches every device (1.37: none).
    unselected_matches_all: bool = False
    rules: dict[str, DeviceTaintRule] = field(default_factory=dict)

    @classmethod
    def of(cls, features: Features) -> DeviceTaints:
        enabled = DRA_DEVICE_TAINTS in features
        return cls(
            enabled=enabled,
            rules_enabled=enabled and DRA_DEVICE_TAINT_RULES in features,
            unselected_matches_all=not features.since(1, 37),
        )

    def rule_changed(self, old: DeviceTaintRule | None, new: DeviceTaintRule | None) -> None:
        if new is None:
            if old is not None:
                self.rules.pop(old.name, None)
        else:
            self.rules[new.name] = new

    def _applied(self) -> list[DeviceTaintRule]:
        if not self.rules_enabled:
            return []
        return [r for r in self.rules.values() if not r.errors and r.taint is not None]

    def _in_slice(self, rule: DeviceTaintRule | None, s: ResourceSlice) -> bool:
        """Whether `rule` may match devices of `s` (its driver and pool)."""
        if rule is None:
            return False
        if not rule.has_selector:
            return self.unselected_matches_all
        return (rule.driver is None or rule.driver == s.driver) and (
            rule.pool is None or rule.pool == s.pool
        )

    def _matches(self, rule: DeviceTaintRule, s: ResourceSlice, device: str) -> bool:
        if not self._in_slice(rule, s):
            return False
        return not rule.has_selector or rule.device is None or rule.device == device

    def slices(self, slices: Iterable[ResourceSlice]) -> list[ResourceSlice]:
        """The slices with their devices' taints as the allocator sees them."""
        rules = self._applied()
        out = []
        for s in slices:
            if not self.enabled:
                if any(d.taints for d in s.devices):
                    s = dataclasses.replace(
                        s, devices=tuple(dataclasses.replace(d, taints=()) for d in s.devices)
                    )
            elif rules:
                s = self._patched(s, rules)
            out.append(s)
        return out

    def _patched(self, s: ResourceSlice, rules: Sequence[DeviceTaintRule]) -> ResourceSlice:
        devices = list(s.devices)
        changed = False
        for rule in rules:
            assert rule.taint is not None
            if not self._in_slice(rule, s):
                continue
            for i, d in enumerate(devices):
                if self._matches(rule, s, d.name):
                    devices[i] = dataclasses.replace(d, taints=(*d.taints, rule.taint))
                    changed = True
        return dataclasses.replace(s, devices=tuple(devices)) if changed else s

    def changes_devices(
        self,
        old: DeviceTaintRule | None,
        new: DeviceTaintRule | None,
        slices: Iterable[ResourceSlice],
    ) -> bool:
        """Whether replacing rule `old` by `new` (either None: added, deleted) changes the
        taints of some device: kube-scheduler hears of a rule only through the slices its
        tracker patches anew (a ResourceSlice update), never of one that taints nothing new
        (a status update, a rule matching no device)."""
        if not self.rules_enabled:
            return False
        before = old if old is not None and not old.errors else None
        after = new if new is not None and not new.errors else None
        if before is None and after is None:
            return False
        # (the tracker's taintsEqual: key, value, effect and time added)
        same_taint = before is not None and after is not None and before.taint == after.taint
        for s in slices:
            if not self._in_slice(before, s) and not self._in_slice(after, s):
                continue
            for d in s.devices:
                was = before is not None and self._matches(before, s, d.name)
                now = after is not None and self._matches(after, s, d.name)
                if was != now or (was and not same_taint):
                    return True
        return False
