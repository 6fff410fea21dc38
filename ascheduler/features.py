"""Releases and feature gates: ascheduler behaves as the kube-scheduler of one Kubernetes
release, with that release's feature gates.

A release is a minor version (`Release(1, 36)`). kube-scheduler keeps one table of versioned
gate specs (`pkg/features/kube_features.go`: for each gate, a list of (version, default,
stage, locked)); a gate's default at a release is the last spec at or before it. `GATES` is
that table for the gates that change what a scheduler does, merged over the releases
ascheduler supports: a gate is known at a release when it has a spec at or before it and the
release's table still lists it (`REMOVED`: the release whose table first lacks it, after
which the behaviour it guarded is simply the code's).

`--feature-gates` is read as component-base reads it (`featureGate.unsafeSetFromMap`), with
its messages: an unknown gate, a value not a Go bool, a gate locked to its default set
otherwise, a gate on whose dependencies are off (`DEPENDENCIES`, per release). A gate
ascheduler does not model is an unknown gate here, where kube-scheduler would accept it and
act on it: refusing it is honest, accepting it would silently ignore it.

Behaviour that changed between releases without a gate (a score's formula, the default
plugins' order) is chosen by `Features.release`, not by a gate.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final


@dataclass(frozen=True, order=True)
class Release:
    """A Kubernetes minor release (`1.36`)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> Release:
        """`1.36`, `v1.36`, `v1.36.3` (the patch is dropped); ValueError otherwise."""
        match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?", text.strip())
        if match is None:
            raise ValueError(f"{text!r} is not a Kubernetes version (major.minor)")
        return cls(int(match[1]), int(match[2]))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


#: The releases ascheduler behaves as, oldest first.
SUPPORTED: Final = (Release(1, 35), Release(1, 36), Release(1, 37))
OLDEST: Final = SUPPORTED[0]
NEWEST: Final = SUPPORTED[-1]
#: The release assumed when none is named and no API server is asked (unit tests, `config
#: validate`, `config defaults`).
DEFAULT_RELEASE: Final = NEWEST


def parse_emulated_version(text: str) -> Release:
    """`--emulated-version`: `1.36`, or `kube=1.36` as kube-scheduler's flag names its
    component; one of `SUPPORTED`, else ValueError naming the range."""
    component, sep, value = text.strip().partition("=")
    if sep and component.strip() != "kube":
        raise ValueError(f"unknown component {component.strip()!r} (only kube)")
    release = Release.parse(value if sep else component)
    if release not in SUPPORTED:
        raise ValueError(f"emulation version {release} is not between [{OLDEST}, {NEWEST}]")
    return release


def cluster_release(git_version: str, emulated: Release | None) -> tuple[Release, str | None]:
    """The release to behave as against an API server of `git_version` (`v1.36.3`), and a
    warning when it is not the API server's own.

    `emulated` (`--emulated-version`) wins. Otherwise the API server's release when it is
    supported; one minor newer than the newest supported, the newest (kube-scheduler may be
    one minor older than its API server); anything else is refused (ValueError): an older API
    server does not serve what a newer scheduler reads, and a scheduler two minors behind is
    outside Kubernetes' version skew policy."""
    server = Release.parse(git_version)
    if emulated is not None:
        if emulated == server:
            return emulated, None
        return emulated, f"the API server is {git_version}; behaving as kube-scheduler {emulated}"
    if server in SUPPORTED:
        return server, None
    if server == Release(NEWEST.major, NEWEST.minor + 1):
        return NEWEST, (
            f"the API server is {git_version}, newer than the newest release ascheduler knows; "
            f"behaving as kube-scheduler {NEWEST} (one minor older than its API server, which "
            f"Kubernetes' version skew policy allows)"
        )
    supported = ", ".join(str(r) for r in SUPPORTED)
    raise ValueError(
        f"the API server is {git_version}: ascheduler behaves as kube-scheduler {supported}; "
        f"name one with --emulated-version to run against this API server anyway"
    )


class Stage(StrEnum):
    ALPHA = "ALPHA"
    BETA = "BETA"
    GA = "GA"
    DEPRECATED = "DEPRECATED"


@dataclass(frozen=True)
class Spec:
    since: Release
    default: bool
    stage: Stage
    locked: bool = False


def _specs(*specs: tuple[str, bool, Stage] | tuple[str, bool, Stage, bool]) -> tuple[Spec, ...]:
    return tuple(Spec(Release.parse(s[0]), *s[1:]) for s in specs)


A, B, GA = Stage.ALPHA, Stage.BETA, Stage.GA

# -- the gates (names as kube-scheduler spells them) ------------------------------------------

#: NodeDeclaredFeatures: the plugin of that name, in the default profile while it is on.
NODE_DECLARED_FEATURES: Final = "NodeDeclaredFeatures"
#: Pod-level requests follow an in-place resize (the pod's status).
POD_LEVEL_RESIZE: Final = "InPlacePodLevelResourcesVerticalScaling"
#: VolumeBinding scores nodes by how full the volumes it would bind would be.
STORAGE_CAPACITY_SCORING: Final = "StorageCapacityScoring"
#: NodeVolumeLimits refuses nodes without the CSI driver a volume needs (drivers opting in).
VOLUME_LIMIT_SCALING: Final = "VolumeLimitScaling"
#: DeferredPodScheduling, and preemption for pending resizes.
SCHEDULER_PREEMPTION_FOR_RESIZE: Final = "InPlacePodVerticalScalingSchedulerPreemption"
#: The Workload API (`scheduling.k8s.io`) and pods' references to it.
GENERIC_WORKLOAD: Final = "GenericWorkload"
#: GangScheduling places a Workload's gang pod groups all or nothing (1.35, 1.36; from 1.37
#: GenericWorkload alone adds it).
GANG_SCHEDULING: Final = "GangScheduling"
TOPOLOGY_AWARE_WORKLOAD_SCHEDULING: Final = "TopologyAwareWorkloadScheduling"
WORKLOAD_AWARE_PREEMPTION: Final = "WorkloadAwarePreemption"
POD_GROUP_PREEMPTION_POLICY: Final = "PodGroupPreemptionPolicy"
INTER_POD_AFFINITY_HOSTNAME_FAST_PATH: Final = "InterPodAffinityHostnameFastPath"
#: DRA: devices skipped while they carry a taint a request does not tolerate.
DRA_DEVICE_TAINTS: Final = "DRADeviceTaints"
#: DRA: DeviceTaintRule objects taint devices too.
DRA_DEVICE_TAINT_RULES: Final = "DRADeviceTaintRules"
#: DRA: counter sets in ResourceSlices that devices consume (partitions of one device).
DRA_PARTITIONABLE_DEVICES: Final = "DRAPartitionableDevices"
#: DRA: devices several claims share by capacity.
DRA_CONSUMABLE_CAPACITY: Final = "DRAConsumableCapacity"
#: DRA: a request's capacity may be met by a range (`DRAConsumableCapacity` needed).
DRA_FRACTIONAL_CAPACITY_RANGE: Final = "DRAFractionalCapacityRange"
#: DRA: a DeviceClass's `extendedResourceName` satisfies pods requesting that resource.
DRA_EXTENDED_RESOURCE: Final = "DRAExtendedResource"
#: DRA: PreBind waits for a device's binding conditions.
DRA_DEVICE_BINDING_CONDITIONS: Final = "DRADeviceBindingConditions"
#: The binding cycle sets the pod's `nominatedNodeName` before Permit's wait or PreBind's
#: work, so other components (another scheduler, an autoscaler) see the node as taken.
NOMINATED_NODE_NAME_FOR_EXPECTATION: Final = "NominatedNodeNameForExpectation"
DRA_ADMIN_ACCESS: Final = "DRAAdminAccess"
DRA_PRIORITIZED_LIST: Final = "DRAPrioritizedList"
DRA_RESOURCE_CLAIM_DEVICE_STATUS: Final = "DRAResourceClaimDeviceStatus"
DRA_SCHEDULER_FILTER_TIMEOUT: Final = "DRASchedulerFilterTimeout"
DRA_GRANULAR_STATUS_AUTHORIZATION: Final = "DRAResourceClaimGranularStatusAuthorization"

#: Every gate ascheduler knows: its versioned specs, oldest first.
GATES: Final[Mapping[str, tuple[Spec, ...]]] = {
    NODE_DECLARED_FEATURES: _specs(("1.35", False, A), ("1.36", True, B), ("1.37", True, GA, True)),
    POD_LEVEL_RESIZE: _specs(("1.35", False, A), ("1.36", True, B)),
    STORAGE_CAPACITY_SCORING: _specs(("1.33", False, A), ("1.37", True, B)),
    VOLUME_LIMIT_SCALING: _specs(("1.35", False, A), ("1.37", True, B)),
    SCHEDULER_PREEMPTION_FOR_RESIZE: _specs(("1.37", False, A)),
    NOMINATED_NODE_NAME_FOR_EXPECTATION: _specs(("1.34", False, A), ("1.35", True, B)),
    INTER_POD_AFFINITY_HOSTNAME_FAST_PATH: _specs(("1.37", False, A)),
    "SchedulerPreQueueingHints": _specs(("1.37", False, A)),
    "SchedulerQueueingHints": _specs(
        ("1.28", False, B), ("1.32", True, B), ("1.34", True, GA, True)
    ),
    "SidecarContainers": _specs(("1.28", False, A), ("1.29", True, B), ("1.33", True, GA, True)),
    "CSIMigrationPortworx": _specs(
        ("1.23", False, A), ("1.25", False, B), ("1.31", True, B), ("1.33", True, GA, True)
    ),
    GENERIC_WORKLOAD: _specs(("1.35", False, A), ("1.37", False, B)),
    GANG_SCHEDULING: _specs(("1.35", False, A)),
    TOPOLOGY_AWARE_WORKLOAD_SCHEDULING: _specs(("1.36", False, A)),
    WORKLOAD_AWARE_PREEMPTION: _specs(("1.36", False, A)),
    POD_GROUP_PREEMPTION_POLICY: _specs(("1.37", False, A)),
    "CompositePodGroup": _specs(("1.37", False, A)),
    "RestartAllContainersOnContainerExits": _specs(("1.35", False, A), ("1.36", True, B)),
    "ContainerRestartRules": _specs(("1.34", False, A), ("1.35", True, B)),
    "UserNamespacesSupport": _specs(
        ("1.25", False, A), ("1.30", False, B), ("1.33", True, B), ("1.36", True, GA, True)
    ),
    "UserNamespacesHostNetworkSupport": _specs(("1.35", False, A)),
    "VolumeBindMountOptions": _specs(("1.37", False, A)),
    "InPlacePodVerticalScaling": _specs(
        ("1.27", False, A), ("1.33", True, B), ("1.35", True, GA, True)
    ),
    "InPlacePodVerticalScalingInitContainers": _specs(("1.36", True, B), ("1.37", True, GA, True)),
    "PodLevelResources": _specs(("1.32", False, A), ("1.34", True, B)),
    "VolumeAttributesClass": _specs(
        ("1.29", False, A), ("1.31", False, B), ("1.34", True, GA), ("1.36", True, GA, True)
    ),
    "ImageVolume": _specs(
        ("1.31", False, A), ("1.33", False, B), ("1.35", True, B), ("1.36", True, GA, True)
    ),
    DRA_ADMIN_ACCESS: _specs(("1.32", False, A), ("1.34", True, B), ("1.36", True, GA, True)),
    DRA_CONSUMABLE_CAPACITY: _specs(("1.34", False, A), ("1.36", True, B)),
    # Upstream lists a second 1.37 stage, on, for `--min-compatibility-version` 1.37 and up;
    # a 1.37 component's default is 1.36, so the gate is off unless that flag raises it.
    DRA_FRACTIONAL_CAPACITY_RANGE: _specs(("1.37", False, B)),
    DRA_DEVICE_BINDING_CONDITIONS: _specs(("1.34", False, A), ("1.36", True, B)),
    DRA_DEVICE_TAINT_RULES: _specs(("1.35", False, A), ("1.36", False, B), ("1.37", True, GA)),
    DRA_DEVICE_TAINTS: _specs(("1.33", False, A), ("1.36", True, B), ("1.37", True, GA)),
    DRA_EXTENDED_RESOURCE: _specs(("1.34", False, A), ("1.36", True, B), ("1.37", True, GA, True)),
    DRA_PARTITIONABLE_DEVICES: _specs(("1.33", False, A), ("1.36", True, B)),
    DRA_PRIORITIZED_LIST: _specs(
        ("1.33", False, A), ("1.34", True, B), ("1.36", True, GA), ("1.37", True, GA, True)
    ),
    DRA_RESOURCE_CLAIM_DEVICE_STATUS: _specs(
        ("1.32", False, A), ("1.33", True, B), ("1.37", True, GA, True)
    ),
    DRA_SCHEDULER_FILTER_TIMEOUT: _specs(("1.34", True, B)),
    DRA_GRANULAR_STATUS_AUTHORIZATION: _specs(("1.36", True, B)),
    "DRADerivedAttributes": _specs(("1.37", False, A)),
    "DRADeviceCompatibilityGroups": _specs(("1.37", False, A)),
    "DRAListTypeAttributes": _specs(("1.36", False, A)),
    "DRANodeAllocatableResources": _specs(("1.36", False, A)),
    "DRAOptionalNodeOperations": _specs(("1.37", False, A)),
    "DRAPartitionableDevicesType": _specs(("1.37", False, A)),
    "DRAResourcePoolStatus": _specs(("1.36", False, A)),
    "DRAWorkloadResourceClaims": _specs(("1.36", False, A), ("1.37", False, B)),
    "DynamicResourceAllocation": _specs(
        ("1.26", False, A), ("1.32", False, B), ("1.34", True, GA), ("1.35", True, GA, True)
    ),
    "MatchLabelKeysInPodTopologySpread": _specs(("1.25", False, A), ("1.27", True, B)),
    "NodeInclusionPolicyInPodTopologySpread": _specs(
        ("1.25", False, A), ("1.26", True, B), ("1.33", True, GA, True)
    ),
}

#: Gates a release's table no longer lists (named there, they are unrecognized).
REMOVED: Final[Mapping[str, Release]] = {
    "SchedulerQueueingHints": Release(1, 37),
    "SidecarContainers": Release(1, 37),
    "CSIMigrationPortworx": Release(1, 36),
    GANG_SCHEDULING: Release(1, 37),
    WORKLOAD_AWARE_PREEMPTION: Release(1, 37),
}

#: The gates each gate needs on, from a release on (`defaultKubernetesFeatureGateDependencies`;
#: the last entry at or before a release applies).
DEPENDENCIES: Final[Mapping[str, tuple[tuple[Release, tuple[str, ...]], ...]]] = {
    POD_LEVEL_RESIZE: (
        (
            Release(1, 35),
            ("InPlacePodVerticalScaling", "PodLevelResources", NODE_DECLARED_FEATURES),
        ),
    ),
    "RestartAllContainersOnContainerExits": (
        (Release(1, 35), ("ContainerRestartRules", NODE_DECLARED_FEATURES)),
    ),
    "UserNamespacesHostNetworkSupport": (
        (Release(1, 35), ("UserNamespacesSupport",)),
        (Release(1, 36), ("UserNamespacesSupport", NODE_DECLARED_FEATURES)),
    ),
    SCHEDULER_PREEMPTION_FOR_RESIZE: ((Release(1, 37), ("InPlacePodVerticalScaling",)),),
    GANG_SCHEDULING: ((Release(1, 35), (GENERIC_WORKLOAD,)),),
    TOPOLOGY_AWARE_WORKLOAD_SCHEDULING: ((Release(1, 36), (GENERIC_WORKLOAD,)),),
    WORKLOAD_AWARE_PREEMPTION: ((Release(1, 36), (GANG_SCHEDULING,)),),
    DRA_ADMIN_ACCESS: ((Release(1, 35), ("DynamicResourceAllocation",)),),
    DRA_CONSUMABLE_CAPACITY: ((Release(1, 35), ("DynamicResourceAllocation",)),),
    DRA_DEVICE_BINDING_CONDITIONS: (
        (
            Release(1, 35),
            (
                "DynamicResourceAllocation",
                DRA_RESOURCE_CLAIM_DEVICE_STATUS,
            ),
        ),
    ),
    DRA_DEVICE_TAINT_RULES: ((Release(1, 35), (DRA_DEVICE_TAINTS,)),),
    DRA_DEVICE_TAINTS: ((Release(1, 35), ("DynamicResourceAllocation",)),),
    DRA_EXTENDED_RESOURCE: ((Release(1, 35), ("DynamicResourceAllocation",)),),
    DRA_PARTITIONABLE_DEVICES: ((Release(1, 35), ("DynamicResourceAllocation",)),),
    DRA_PRIORITIZED_LIST: ((Release(1, 35), ("DynamicResourceAllocation",)),),
    DRA_SCHEDULER_FILTER_TIMEOUT: ((Release(1, 35), ("DynamicResourceAllocation",)),),
    DRA_FRACTIONAL_CAPACITY_RANGE: ((Release(1, 37), (DRA_CONSUMABLE_CAPACITY,)),),
    DRA_GRANULAR_STATUS_AUTHORIZATION: (
        (Release(1, 36), ("DynamicResourceAllocation", DRA_RESOURCE_CLAIM_DEVICE_STATUS)),
    ),
    "DRADerivedAttributes": ((Release(1, 37), ("DynamicResourceAllocation",)),),
    "DRADeviceCompatibilityGroups": (
        (
            Release(1, 37),
            (
                "DynamicResourceAllocation",
                DRA_PARTITIONABLE_DEVICES,
            ),
        ),
    ),
    "DRAListTypeAttributes": ((Release(1, 36), ("DynamicResourceAllocation",)),),
    "DRANodeAllocatableResources": ((Release(1, 36), ("DynamicResourceAllocation",)),),
    "DRAOptionalNodeOperations": (
        (
            Release(1, 37),
            (
                "DynamicResourceAllocation",
                NODE_DECLARED_FEATURES,
            ),
        ),
    ),
    "DRAPartitionableDevicesType": (
        (
            Release(1, 37),
            (
                "DynamicResourceAllocation",
                DRA_PARTITIONABLE_DEVICES,
                "DRAResourcePoolStatus",
            ),
        ),
    ),
    "DRAResourcePoolStatus": ((Release(1, 36), ("DynamicResourceAllocation",)),),
    "DRAWorkloadResourceClaims": (
        (
            Release(1, 36),
            (
                "DynamicResourceAllocation",
                GENERIC_WORKLOAD,
            ),
        ),
    ),
}

#: component-base's special gates: every alpha (beta) gate not named otherwise.
_ALL: Final = {"AllAlpha": Stage.ALPHA, "AllBeta": Stage.BETA}


def spec_at(name: str, release: Release) -> Spec | None:
    """The gate's spec at `release`; None when that release's table does not list it."""
    removed = REMOVED.get(name)
    if removed is not None and release >= removed:
        return None
    found = None
    for spec in GATES.get(name, ()):
        if spec.since <= release:
            found = spec
    return found


def known_at(release: Release) -> list[str]:
    """The gates `release`'s table lists, sorted."""
    return sorted(name for name in GATES if spec_at(name, release) is not None)


def _dependencies_at(name: str, release: Release) -> tuple[str, ...]:
    found: tuple[str, ...] = ()
    for since, needs in DEPENDENCIES.get(name, ()):
        if since <= release:
            found = needs
    return found


@dataclass(frozen=True)
class Features:
    """The release ascheduler behaves as, and the gates on there (`name in features`)."""

    release: Release = DEFAULT_RELEASE
    enabled: frozenset[str] = field(default=frozenset())
    #: What setting the gates warned of (a GA or deprecated gate set), for the log.
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def defaults(cls, release: Release = DEFAULT_RELEASE) -> Features:
        """The gates on by default at `release`."""
        on = frozenset(n for n in GATES if (s := spec_at(n, release)) is not None and s.default)
        return cls(release, on)

    def __contains__(self, name: object) -> bool:
        return name in self.enabled

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.enabled))

    def since(self, major: int, minor: int) -> bool:
        """Whether the release is `major.minor` or later (behaviour a release changed
        without a gate)."""
        return self.release >= Release(major, minor)


def _parse_bool(value: str) -> bool | None:
    """Go's strconv.ParseBool."""
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def parse_gates(text: str, release: Release = DEFAULT_RELEASE) -> Features:
    """The gates on at `release` after `text` (`A=true,B=false`) is applied to its
    defaults; ValueError with component-base's message for the first problem."""
    values: dict[str, bool] = {}
    for item in text.split(","):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep:
            raise ValueError(f"missing bool value for {name}")
        value = _parse_bool(raw.strip())
        if value is None:
            raise ValueError(
                f'invalid value of {name}={raw.strip()}, err: strconv.ParseBool: parsing "'
                f'{raw.strip()}": invalid syntax'
            )
        values[name] = value
    enabled = set(Features.defaults(release).enabled)
    explicit: dict[str, bool] = {}
    every: dict[Stage, bool] = {}
    warnings: list[str] = []
    problems: list[str] = []
    for name, value in values.items():
        if name in _ALL:
            every[_ALL[name]] = value
            continue
        spec = spec_at(name, release)
        if spec is None:
            raise ValueError(f"unrecognized feature gate: {name}")
        if spec.locked and spec.default != value:
            problems.append(
                f"cannot set feature gate {name} to {str(value).lower()}, feature is locked to "
                f"{str(spec.default).lower()}"
            )
            continue
        explicit[name] = value
        if spec.stage in (Stage.GA, Stage.DEPRECATED):
            warnings.append(
                f"setting {spec.stage.value} feature gate {name}={str(value).lower()}: it will "
                f"be removed in a future release"
            )
    if problems:
        raise ValueError("; ".join(problems))
    for stage, value in every.items():
        for name in known_at(release):
            spec = spec_at(name, release)
            if spec is not None and spec.stage == stage and not spec.locked:
                explicit.setdefault(name, value)
    for name, value in explicit.items():
        (enabled.add if value else enabled.discard)(name)
    for name in sorted(enabled):
        off = [dep for dep in _dependencies_at(name, release) if dep not in enabled]
        if off:
            problems.append(
                f"{name} is enabled, but depends on features that are disabled: [{' '.join(off)}]"
            )
    if problems:
        raise ValueError("; ".join(problems))
    return Features(release, frozenset(enabled), tuple(warnings))
