"""Pod groups scheduled all or nothing, as two conventions define them:

* scheduler-plugins' **PodGroup** (`scheduling.x-k8s.io/v1alpha1`): pods labelled
  `scheduling.x-k8s.io/pod-group: NAME` belong to the PodGroup NAME of their namespace, which
  says how many must be placed together (`minMember`), what they need between them
  (`minResources`) and how long members wait for each other (`scheduleTimeoutSeconds`).
* Kubernetes' **Workload** (`scheduling.k8s.io/v1alpha1`, alpha in v1.35): a pod's
  `spec.workloadRef` names a Workload, one of its pod groups and a replica key; a group whose
  policy is `gang` needs `minCount` pods placed together.

The records, their parsers, and the group key a pod belongs to. The cache keeps the groups
and their pods (`ascheduler.cache.gangs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ascheduler.model.pod import PodInfo
from ascheduler.model.quantity import QuantityError, parse_resource

POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
POD_GROUP_API: Final = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"
WORKLOAD_API: Final = "/apis/scheduling.k8s.io/v1alpha1/workloads"

#: scheduler-plugins' kind prefix and the Workload API's, in group keys.
POD_GROUP: Final = "PodGroup"
WORKLOAD: Final = "Workload"


@dataclass(frozen=True, slots=True)
class PodGroupSpec:
    """A scheduler-plugins PodGroup."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    min_member: int = 1
    #: minResources in the units the node table keeps (cpu in millicores).
    min_resources: Mapping[str, int] = field(default_factory=dict)
    #: scheduleTimeoutSeconds; None: the plugin's default.
    schedule_timeout: float | None = None
    creation_timestamp: str = ""
    errors: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Workload:
    """A `scheduling.k8s.io/v1alpha1` Workload: its pod groups' gang minCount (None: the
    group's policy is `basic`, no gang)."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    groups: Mapping[str, int | None] = field(default_factory=dict)
    errors: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _int(value: Any, path: str, errors: list[str], default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        errors.append(f"{path}: expected an integer, got {value!r}")
        return default
    return value


def _meta(obj: Any) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    if not isinstance(obj, Mapping):
        return {}, {}
    meta = obj.get("metadata")
    spec = obj.get("spec")
    return (
        meta if isinstance(meta, Mapping) else {},
        spec if isinstance(spec, Mapping) else {},
    )


def parse_pod_group(obj: Any) -> PodGroupSpec:
    """A PodGroup; a field that cannot be read is an error kept on the record (its pods are
    then held with that error, nothing else is affected)."""
    meta, spec = _meta(obj)
    errors: list[str] = []
    min_member = _int(spec.get("minMember"), "spec.minMember", errors, 1)
    if min_member < 0:
        errors.append(f"spec.minMember: must be at least 0, got {min_member}")
        min_member = 1
    resources: dict[str, int] = {}
    raw = spec.get("minResources")
    if isinstance(raw, Mapping):
        for name, value in raw.items():
            try:
                resources[str(name)] = parse_resource(str(name), value)
            except QuantityError as exc:
                errors.append(f"spec.minResources.{name}: {exc}")
    elif raw is not None:
        errors.append(f"spec.minResources: expected an object, got {type(raw).__name__}")
    timeout = spec.get("scheduleTimeoutSeconds")
    seconds: float | None = None
    if timeout is not None:
        t = _int(timeout, "spec.scheduleTimeoutSeconds", errors, 0)
        seconds = float(t) if t > 0 else None
    return PodGroupSpec(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        min_member=min_member,
        min_resources=resources,
        schedule_timeout=seconds,
        creation_timestamp=str(meta.get("creationTimestamp") or ""),
        errors=tuple(errors),
    )


def parse_workload(obj: Any) -> Workload:
    meta, spec = _meta(obj)
    errors: list[str] = []
    groups: dict[str, int | None] = {}
    raw = spec.get("podGroups")
    for i, g in enumerate(raw if isinstance(raw, list) else ()):
        if not isinstance(g, Mapping):
            errors.append(f"spec.podGroups[{i}]: expected an object")
            continue
        policy = g.get("policy")
        gang = policy.get("gang") if isinstance(policy, Mapping) else None
        count: int | None = None
        if isinstance(gang, Mapping):
            count = _int(
                gang.get("minCount"), f"spec.podGroups[{i}].policy.gang.minCount", errors, 1
            )
        groups[str(g.get("name", ""))] = count
    return Workload(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        groups=groups,
        errors=tuple(errors),
    )


def group_key(pod: PodInfo) -> str | None:
    """The group a pod belongs to: `Workload:ns/name/podGroup/replicaKey` for a
    `spec.workloadRef`, else `PodGroup:ns/name` for the pod-group label; None for neither."""
    ref = pod.workload_ref
    if ref is not None:
        return f"{WORKLOAD}:{pod.namespace}/{ref[0]}/{ref[1]}/{ref[2]}"
    label = pod.labels.get(POD_GROUP_LABEL) if pod.labels else None
    if label:
        return f"{POD_GROUP}:{pod.namespace}/{label}"
    return None


def object_of(key: str) -> str:
    """The `namespace/name` of the PodGroup or Workload a group key names."""
    kind, _, rest = key.partition(":")
    if kind == WORKLOAD:
        namespace, name, *_ = rest.split("/")
        return f"{namespace}/{name}"
    return rest
