"""Feature gates, as kube-scheduler's `--feature-gates` takes them (`Name=true,Other=false`).

Only the gates that change what ascheduler does are known; each starts at kube-scheduler
v1.35's default. A gate ascheduler does not know is an error naming it, not silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

#: StorageCapacityScoring (alpha, off): VolumeBinding scores nodes by how full the volumes
#: it would bind (or the storage capacity it would provision from) would be.
STORAGE_CAPACITY_SCORING: Final = "StorageCapacityScoring"

#: GenericWorkload (alpha, off): the Workload API (`scheduling.k8s.io/v1alpha1`) and pods'
#: `spec.workloadRef`.
GENERIC_WORKLOAD: Final = "GenericWorkload"

#: GangScheduling (alpha, off): the GangScheduling plugin places a Workload's gang pod
#: groups all or nothing.
GANG_SCHEDULING: Final = "GangScheduling"

#: Every gate ascheduler knows, with its default.
DEFAULTS: Final[Mapping[str, bool]] = {
    STORAGE_CAPACITY_SCORING: False,
    GENERIC_WORKLOAD: False,
    GANG_SCHEDULING: False,
}


def defaults() -> frozenset[str]:
    """The gates on by default."""
    return frozenset(name for name, on in DEFAULTS.items() if on)


def parse_gates(text: str) -> frozenset[str]:
    """The gates on after `text` (`A=true,B=false`) is applied to the defaults; ValueError
    naming the first gate that is unknown or has a value other than true or false."""
    enabled = set(defaults())
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep:
            raise ValueError(f"missing bool value for {name}")
        if name not in DEFAULTS:
            known = ", ".join(sorted(DEFAULTS))
            raise ValueError(f"unrecognized feature gate: {name} (ascheduler knows {known})")
        match value.strip().lower():
            case "true":
                enabled.add(name)
            case "false":
                enabled.discard(name)
            case other:
                raise ValueError(f"invalid value of {name}={other}, err: expected true or false")
    return frozenset(enabled)
