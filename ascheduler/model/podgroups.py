"""Pod groups scheduled all or nothing, as two conventions define them:

* scheduler-plugins' **PodGroup** (`scheduling.x-k8s.io/v1alpha1`): pods labelled
  `scheduling.x-k8s.io/pod-group: NAME` belong to the PodGroup NAME of their namespace, which
  says how many must be placed together (`minMember`), what they need between them
  (`minResources`) and how long members wait for each other (`scheduleTimeoutSeconds`).
* Kubernetes' **Workload** (`scheduling.k8s.io/v1alpha1`, alpha in v1.35): a pod's
  `spec.workloadRef` names a Workload, one of its pod groups and a replica key; a group whose
  policy is `gang` needs `minCount` pods placed together.
* Kubernetes' **PodGroup** (`scheduling.k8s.io/v1alpha2` in v1.36, `v1beta1` in v1.37, KEP-5832):
  from v1.36 a pod's `spec.schedulingGroup.podGroupName` names a PodGroup object of its
  namespace, whose `spec.schedulingPolicy` is `gang` (`minCount`) or `basic`. The Workload
  keeps only templates of PodGroups (`podGroupTemplates`); kube-scheduler no longer reads it.

The records, their parsers, and the group key a pod belongs to. The cache keeps the groups
and their pods (`ascheduler.cache.gangs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ascheduler.features import Release
from ascheduler.model.pod import PodInfo
from ascheduler.model.quantity import QuantityError, parse_resource

POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
POD_GROUP_API: Final = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"
WORKLOAD_API: Final = "/apis/scheduling.k8s.io/v1alpha1/workloads"
#: The version of `scheduling.k8s.io` whose PodGroups kube-scheduler reads, by release (1.37
#: serves PodGroup as `v1beta1` and `v1alpha3`; its scheduler's informer is `v1beta1`).
SCHEDULING_GROUP_VERSIONS: Final[Mapping[Release, str]] = {
    Release(1, 36): "v1alpha2",
    Release(1, 37): "v1beta1",
}

#: scheduler-plugins' kind prefix and the Workload API's, in group keys.
POD_GROUP: Final = "PodGroup"
WORKLOAD: Final = "Workload"
#: The condition kube-scheduler writes on a PodGroup: `PodGroupScheduled` in 1.36 (v1alpha2),
#: renamed `PodGroupInitiallyScheduled` in 1.37 (v1beta1).
SCHEDULED_CONDITIONS: Final = frozenset({"PodGroupScheduled", "PodGroupInitiallyScheduled"})
#: The kind prefix of a `scheduling.k8s.io` PodGroup's group key (v1.36 on).
SCHEDULING_GROUP: Final = "SchedulingGroup"


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


@dataclass(frozen=True, slots=True)
class GroupCondition:
    """One `metav1.Condition` of a PodGroup's status, as the API has it."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    observed_generation: int = 0
    #: RFC 3339, seconds (`2026-01-02T03:04:05Z`); "" when absent.
    last_transition_time: str = ""


@dataclass(frozen=True, slots=True)
class SchedulingGroup:
    """A `scheduling.k8s.io` PodGroup (v1.36 on): a runtime instance of pods scheduled together.

    `min_count` is the gang policy's quorum; None when the policy is `basic` (pods placed one
    by one, as if in no group). Errors name the field; a group with errors holds its pods."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    min_count: int | None = None
    #: `spec.podGroupTemplateRef.workload` (1.36) / `spec.workloadRef` (1.37): the Workload
    #: and template the group was made from, ("", "") when none.
    template: tuple[str, str] = ("", "")
    #: `spec.parentCompositePodGroupName` (1.37, CompositePodGroup), "" when none.
    parent: str = ""
    #: Whether `status.conditions` holds `PodGroupScheduled` (v1alpha2) or
    #: `PodGroupInitiallyScheduled` (v1beta1) True: kube-scheduler never sets it back to False.
    scheduled: bool = False
    #: `spec.priority` (set by the Priority admission plugin from `priorityClassName`); 0 when
    #: unset, as kube-scheduler's `PodGroupPriority` reads it.
    priority: int = 0
    #: `spec.preemptionPolicy` (1.37, PodGroupPreemptionPolicy); "" when unset.
    preemption_policy: str = ""
    #: `spec.disruptionMode.all` (1.37): the group's scheduled pods are preempted together,
    #: as one victim of a workload-aware preemption; False for `single` or unset.
    disruption_all: bool = False
    #: The scheduler's conditions (`SCHEDULED_CONDITIONS`) in `status.conditions`.
    conditions: tuple[GroupCondition, ...] = ()
    errors: tuple[str, ...] = ()

    def condition(self, kind: str) -> GroupCondition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gang(self) -> bool:
        return self.min_count is not None


def scheduling_group_api(release: Release) -> str | None:
    """The collection of PodGroups kube-scheduler of `release` watches; None before 1.36."""
    versions = [v for r, v in SCHEDULING_GROUP_VERSIONS.items() if r <= release]
    if not versions:
        return None
    return f"/apis/scheduling.k8s.io/{versions[-1]}/podgroups"


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
    """A Workload: v1alpha1's `spec.podGroups[].policy`, or (v1alpha2 on) its
    `spec.podGroupTemplates[].schedulingPolicy`, as template name -> gang minCount."""
    meta, spec = _meta(obj)
    errors: list[str] = []
    groups: dict[str, int | None] = {}
    field_name, policy_name = "podGroups", "policy"
    if "podGroupTemplates" in spec:
        field_name, policy_name = "podGroupTemplates", "schedulingPolicy"
    raw = spec.get(field_name)
    if raw is not None and not isinstance(raw, list):
        errors.append(f"spec.{field_name}: expected a list, got {type(raw).__name__}")
    for i, g in enumerate(raw if isinstance(raw, list) else ()):
        path = f"spec.{field_name}[{i}]"
        if not isinstance(g, Mapping):
            errors.append(f"{path}: expected an object")
            continue
        count = _gang_count(g.get(policy_name), f"{path}.{policy_name}", errors)
        groups[str(g.get("name", ""))] = count
    return Workload(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        groups=groups,
        errors=tuple(errors),
    )


def _gang_count(policy: Any, path: str, errors: list[str]) -> int | None:
    """A scheduling policy's gang minCount; None for `basic` (or a policy that cannot be
    read, with its error)."""
    if not isinstance(policy, Mapping):
        if policy is not None:
            errors.append(f"{path}: expected an object, got {type(policy).__name__}")
        return None
    gang = policy.get("gang")
    if gang is None:
        return None
    if not isinstance(gang, Mapping):
        errors.append(f"{path}.gang: expected an object, got {type(gang).__name__}")
        return None
    count = _int(gang.get("minCount"), f"{path}.gang.minCount", errors, 1)
    if count < 1:
        errors.append(f"{path}.gang.minCount: must be greater than 0, got {count}")
        count = 1
    return count


def parse_scheduling_group(obj: Any) -> SchedulingGroup:
    """A `scheduling.k8s.io` PodGroup of v1alpha2 (1.36) or v1beta1 (1.37); never raises."""
    meta, spec = _meta(obj)
    errors: list[str] = []
    policy = spec.get("schedulingPolicy")
    if isinstance(policy, Mapping) and ("gang" in policy) == ("basic" in policy):
        errors.append("spec.schedulingPolicy: exactly one of basic and gang must be set")
    elif policy is None:
        errors.append("spec.schedulingPolicy: required")
    count = _gang_count(policy, "spec.schedulingPolicy", errors)
    template = ("", "")
    ref = spec.get("workloadRef")  # v1beta1
    names = ("workloadName", "templateName")
    if ref is None:  # v1alpha2
        outer = spec.get("podGroupTemplateRef")
        ref = outer.get("workload") if isinstance(outer, Mapping) else None
        names = ("workloadName", "podGroupTemplateName")
    if isinstance(ref, Mapping):
        template = (str(ref.get(names[0]) or ""), str(ref.get(names[1]) or ""))
    generation = meta.get("generation")
    status = obj.get("status") if isinstance(obj, Mapping) else None
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    ours = tuple(
        GroupCondition(
            type=str(c["type"]),
            status=str(c.get("status") or ""),
            reason=str(c.get("reason") or ""),
            message=str(c.get("message") or ""),
            observed_generation=_int(c.get("observedGeneration"), "", [], 0),
            last_transition_time=str(c.get("lastTransitionTime") or ""),
        )
        for c in (conditions if isinstance(conditions, list) else ())
        if isinstance(c, Mapping) and c.get("type") in SCHEDULED_CONDITIONS
    )
    priority = spec.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        errors.append(f"spec.priority: expected an integer, got {priority!r}")
        priority = None
    return SchedulingGroup(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        generation=generation if isinstance(generation, int) else 0,
        min_count=count,
        template=template,
        parent=str(spec.get("parentCompositePodGroupName") or ""),
        scheduled=any(c.status == "True" for c in ours),
        priority=priority or 0,
        preemption_policy=str(spec.get("preemptionPolicy") or ""),
        disruption_all=isinstance(mode := spec.get("disruptionMode"), Mapping)
        and mode.get("all") is not None,
        conditions=ours,
        errors=tuple(errors),
    )


def group_key(pod: PodInfo) -> str | None:
    """The group a pod belongs to: `SchedulingGroup:ns/name` for a `spec.schedulingGroup`
    (v1.36 on), `Workload:ns/name/podGroup/replicaKey` for a `spec.workloadRef` (v1.35), else
    `PodGroup:ns/name` for the pod-group label; None for none of them."""
    if pod.scheduling_group is not None:
        return f"{SCHEDULING_GROUP}:{pod.namespace}/{pod.scheduling_group}"
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
