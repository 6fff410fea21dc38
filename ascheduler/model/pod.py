"""`PodInfo`: what the scheduler needs of a pod, parsed once from the API's JSON.

Parsing never raises: a field that cannot be understood is recorded in `errors` with its path
(`spec.containers[0].resources.requests.cpu: not a quantity: 'lots'`), and the scheduler
reports the pod with that message instead of scheduling it, while everything else goes on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from ascheduler.model.affinity import (
    NodeSelectorTerm,
    PreferredTerm,
    SpecError,
    Toleration,
    parse_term,
    parse_toleration,
)
from ascheduler.model.dra import PodClaim, parse_pod_claims
from ascheduler.model.extended import ContainerRequests, parse_extended_containers
from ascheduler.model.fields import as_list, as_map
from ascheduler.model.nodefeatures import infer_for_scheduling
from ascheduler.model.resources import V1_35, RequestsRule, pod_requests, resize_digest
from ascheduler.model.topology import (
    NO_POD_AFFINITY,
    PodAffinity,
    SpreadConstraint,
    parse_pod_affinity,
    parse_spread_constraint,
)
from ascheduler.model.volumes import PodVolume, parse_volumes

HostPort = tuple[str, str, int]  # (hostIP, protocol, port)

PREEMPT_LOWER_PRIORITY: Final = "PreemptLowerPriority"
PREEMPT_NEVER: Final = "Never"
#: The DisruptionTarget condition's reason when a scheduler preempts the pod.
PREEMPTION_BY_SCHEDULER: Final = "PreemptionByScheduler"


@dataclass(frozen=True, slots=True)
class PodInfo:
    uid: str
    namespace: str
    name: str
    resource_version: str
    scheduler_name: str
    node_name: str
    priority: int
    phase: str
    deleting: bool
    scheduling_gates: tuple[str, ...]
    #: Effective requests (cpu in millicores, others in base units), zero entries dropped:
    #: what the pod holds on its node, an in-place resize's status included
    #: (`ascheduler.model.resources`).
    requests: Mapping[str, int]
    #: cpu and memory with kube-scheduler's non-zero defaults: what the pod holds on its
    #: node for scoring.
    nonzero_cpu: int
    nonzero_memory: int
    host_ports: tuple[HostPort, ...]
    tolerations: tuple[Toleration, ...]
    node_selector: tuple[tuple[str, str], ...]
    required_terms: tuple[NodeSelectorTerm, ...] | None
    preferred_terms: tuple[PreferredTerm, ...]
    #: (status, reason, message) of the PodScheduled condition, if present.
    scheduled_condition: tuple[str, str, str] | None
    nominated_node_name: str
    creation_timestamp: str
    #: status.startTime ("" until the kubelet starts it).
    start_time: str = ""
    #: PreemptLowerPriority (the default) or Never.
    preemption_policy: str = "PreemptLowerPriority"
    #: A DisruptionTarget condition says a scheduler's preemption is evicting it.
    preempted: bool = False
    #: Its first PodResizePending condition has reason Deferred: the kubelet could not fit
    #: an in-place resize (`resource.IsPodResizeDeferred`); kube-scheduler 1.37 with
    #: InPlacePodVerticalScalingSchedulerPreemption schedules such a bound pod again.
    resize_deferred: bool = False
    errors: tuple[str, ...] = field(default=())
    labels: Mapping[str, str] = field(default_factory=dict)
    #: (apiVersion, kind, name) of the owner reference with `controller: true`, if any.
    controller: tuple[str, str, str] | None = None
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    pod_affinity: PodAffinity = NO_POD_AFFINITY
    #: Container and init container images, as written in the spec.
    images: tuple[str, ...] = ()
    #: `spec.volumes[].image.reference` of every image volume ("" where none is given).
    image_volumes: tuple[str, ...] = ()
    #: `spec.volumes`, as the volume plugins read them.
    volumes: tuple[PodVolume, ...] = ()
    #: `spec.resourceClaims` (Dynamic Resource Allocation).
    resource_claims: tuple[PodClaim, ...] = ()
    #: `status.resourceClaimStatuses`: (pod claim name, generated claim's name or None).
    claim_statuses: tuple[tuple[str, str | None], ...] = ()
    #: `spec.workloadRef` (name, podGroup, podGroupReplicaKey): the Workload API's gang.
    workload_ref: tuple[str, str, str] | None = None
    #: `spec.schedulingGroup.podGroupName` (from v1.36, replacing `workloadRef`): the name of
    #: the `scheduling.k8s.io` PodGroup of the pod's namespace it belongs to.
    scheduling_group: str | None = None
    #: The node declared features the spec requires (`ascheduler.model.nodefeatures`).
    node_features: frozenset[str] = frozenset()
    #: The object as the API server sent it, kept only where something needs all of it
    #: (HTTP extenders are sent the pod); never compared.
    raw: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    #: A digest of what was parsed from the spec and the stable metadata (`reparse_pod`);
    #: 0 when there is none. Never compared.
    fingerprint: int = field(default=0, compare=False, repr=False)
    #: The non-zero cpu and memory the pod is scored with while being scheduled, when they
    #: differ from `nonzero_cpu`/`nonzero_memory` (pod-level requests); else None.
    score_nonzero: tuple[int, int] | None = None
    #: The spec's requests, which NodeResourcesFit filters the pod with, when they differ
    #: from `requests` (status resources); else None.
    spec_requests: Mapping[str, int] | None = None
    #: `resources.resize_digest` of the status this was parsed from (`reparse_pod`).
    resize_digest: int = field(default=0, compare=False, repr=False)
    #: The containers requesting an extended resource (`model.extended`).
    extended_containers: tuple[ContainerRequests, ...] = ()

    @property
    def fit_requests(self) -> Mapping[str, int]:
        """The requests NodeResourcesFit checks when scheduling this pod."""
        return self.requests if self.spec_requests is None else self.spec_requests

    @property
    def score_cpu(self) -> int:
        """The non-zero cpu this pod is scored with while being scheduled."""
        return self.nonzero_cpu if self.score_nonzero is None else self.score_nonzero[0]

    @property
    def score_memory(self) -> int:
        """The non-zero memory this pod is scored with while being scheduled."""
        return self.nonzero_memory if self.score_nonzero is None else self.score_nonzero[1]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def assigned(self) -> bool:
        return bool(self.node_name)

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def scheduling_spec_equal(self, other: PodInfo) -> bool:
        """Whether an update left everything scheduling depends on unchanged, but the pod's
        labels (which matter only to plugins that count pods: the queue asks them)."""
        return (
            self.requests == other.requests
            and self.spec_requests == other.spec_requests
            and self.priority == other.priority
            and self.scheduling_gates == other.scheduling_gates
            and self.tolerations == other.tolerations
            and self.node_selector == other.node_selector
            and self.required_terms == other.required_terms
            and self.preferred_terms == other.preferred_terms
            and self.host_ports == other.host_ports
            and self.node_name == other.node_name
            and self.errors == other.errors
            and self.spread_constraints == other.spread_constraints
            and self.pod_affinity == other.pod_affinity
            and self.preemption_policy == other.preemption_policy
            and self.resource_claims == other.resource_claims
            and self.claim_statuses == other.claim_statuses
            and self.workload_ref == other.workload_ref
            and self.scheduling_group == other.scheduling_group
            and self.node_features == other.node_features
        )


def _containers(
    spec: Mapping[str, Any], field: str, errors: list[str]
) -> list[tuple[int, Mapping[str, Any]]]:
    """(index, container) for the well-formed entries of `spec.<field>`."""
    out = []
    for i, c in enumerate(as_list(spec.get(field), f"spec.{field}", errors)):
        container = as_map(c, f"spec.{field}[{i}]", errors)
        if container:
            out.append((i, container))
    return out


def _host_ports(spec: Mapping[str, Any], errors: list[str]) -> tuple[HostPort, ...]:
    ports: list[HostPort] = []
    for group in ("containers", "initContainers"):
        for i, c in _containers(spec, group, errors):
            if group == "initContainers" and c.get("restartPolicy") != "Always":
                continue  # only sidecars keep running and hold their ports
            path = f"spec.{group}[{i}].ports"
            for j, raw in enumerate(as_list(c.get("ports"), path, errors)):
                port = as_map(raw, f"{path}[{j}]", errors)
                host_port = port.get("hostPort") or 0
                if not host_port:
                    continue
                if not isinstance(host_port, int) or not 0 < host_port < 65536:
                    errors.append(f"{path}[{j}].hostPort: invalid {host_port!r}")
                    continue
                ports.append(
                    (
                        str(port.get("hostIP") or "0.0.0.0"),
                        str(port.get("protocol") or "TCP"),
                        host_port,
                    )
                )
    return tuple(ports)


def _affinity(
    spec: Mapping[str, Any], errors: list[str]
) -> tuple[tuple[NodeSelectorTerm, ...] | None, tuple[PreferredTerm, ...]]:
    affinity = as_map(spec.get("affinity"), "spec.affinity", errors)
    base = "spec.affinity.nodeAffinity"
    node_affinity = as_map(affinity.get("nodeAffinity"), base, errors)
    required: tuple[NodeSelectorTerm, ...] | None = None
    preferred: list[PreferredTerm] = []
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    if node_affinity.get(key) is not None:
        req = as_map(node_affinity.get(key), f"{base}.{key}", errors)
        path = f"{base}.{key}.nodeSelectorTerms"
        parsed: list[NodeSelectorTerm] = []
        for i, t in enumerate(as_list(req.get("nodeSelectorTerms"), path, errors)):
            try:
                parsed.append(parse_term(t, f"{path}[{i}]"))
            except SpecError as exc:
                errors.append(str(exc))
        required = tuple(parsed)
    key = "preferredDuringSchedulingIgnoredDuringExecution"
    path = f"{base}.{key}"
    for i, raw in enumerate(as_list(node_affinity.get(key), path, errors)):
        pref = as_map(raw, f"{path}[{i}]", errors)
        if not pref:
            continue
        weight = pref.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
            errors.append(f"{path}[{i}].weight: must be an integer in 1..100, got {weight!r}")
            continue
        try:
            term = parse_term(pref.get("preference"), f"{path}[{i}].preference")
        except SpecError as exc:
            errors.append(str(exc))
            continue
        preferred.append(PreferredTerm(weight, term))
    return required, tuple(preferred)


def _labels(raw: Any, path: str, errors: list[str]) -> dict[str, str]:
    out = {}
    for k, v in as_map(raw, path, errors).items():
        if not isinstance(v, str):
            errors.append(f"{path}.{k}: expected a string, got {type(v).__name__}")
            continue
        out[str(k)] = v
    return out


def _controller(meta: Mapping[str, Any], errors: list[str]) -> tuple[str, str, str] | None:
    for i, raw in enumerate(
        as_list(meta.get("ownerReferences"), "metadata.ownerReferences", errors)
    ):
        ref = as_map(raw, f"metadata.ownerReferences[{i}]", errors)
        if ref.get("controller") is True:
            return (
                str(ref.get("apiVersion", "")),
                str(ref.get("kind", "")),
                str(ref.get("name", "")),
            )
    return None


def _spread(spec: Mapping[str, Any], errors: list[str]) -> tuple[SpreadConstraint, ...]:
    path = "spec.topologySpreadConstraints"
    out = []
    for i, raw in enumerate(as_list(spec.get("topologySpreadConstraints"), path, errors)):
        try:
            out.append(parse_spread_constraint(raw, f"{path}[{i}]"))
        except SpecError as exc:
            errors.append(str(exc))
    return tuple(out)


def _images(spec: Mapping[str, Any], errors: list[str]) -> tuple[str, ...]:
    out = []
    for group in ("initContainers", "containers"):
        for _, c in _containers(spec, group, errors):
            image = c.get("image")
            if isinstance(image, str) and image:
                out.append(image)
    return tuple(out)


def _image_volumes(spec: Mapping[str, Any], errors: list[str]) -> tuple[str, ...]:
    """Image volumes' references: ImageLocality counts them from 1.36."""
    out = []
    volumes = spec.get("volumes")
    for i, raw in enumerate(volumes if isinstance(volumes, list) else ()):
        image = raw.get("image") if isinstance(raw, Mapping) else None
        if image is None:
            continue
        if not isinstance(image, Mapping):
            errors.append(f"spec.volumes[{i}].image: expected an object")
            continue
        reference = image.get("reference")
        if reference is not None and not isinstance(reference, str):
            errors.append(f"spec.volumes[{i}].image.reference: expected a string")
        out.append(reference if isinstance(reference, str) else "")
    return tuple(out)


def parse_pod(obj: Any, *, keep_raw: bool = False, rule: RequestsRule = V1_35) -> PodInfo:
    """`keep_raw` keeps the object itself on a pod not yet bound (what extenders are sent);
    `rule` is how the release reads a resized pod's requests (`resources.RequestsRule`)."""
    errors: list[str] = []
    if not isinstance(obj, Mapping):
        obj = {}
        errors.append("pod: expected an object")
    meta = as_map(obj.get("metadata"), "metadata", errors)
    spec = as_map(obj.get("spec"), "spec", errors)
    status = as_map(obj.get("status"), "status", errors)

    reqs = pod_requests(spec, status, errors, rule)
    tolerations: list[Toleration] = []
    for i, t in enumerate(as_list(spec.get("tolerations"), "spec.tolerations", errors)):
        try:
            tolerations.append(parse_toleration(t, f"spec.tolerations[{i}]"))
        except SpecError as exc:
            errors.append(str(exc))
    selector = as_map(spec.get("nodeSelector"), "spec.nodeSelector", errors)
    required, preferred = _affinity(spec, errors)
    namespace = str(meta.get("namespace", ""))
    pod_affinity = parse_pod_affinity(
        as_map(spec.get("affinity"), "spec.affinity", []), namespace, errors
    )
    labels = _labels(meta.get("labels"), "metadata.labels", errors)
    controller = _controller(meta, errors)
    spread = _spread(spec, errors)
    images = _images(spec, errors)
    image_volumes = _image_volumes(spec, errors)
    volumes = parse_volumes(spec.get("volumes"), str(meta.get("name", "")), errors)
    resource_claims, claim_statuses = parse_pod_claims(spec, status, errors)
    priority = spec.get("priority") or 0
    if not isinstance(priority, int) or isinstance(priority, bool):
        errors.append(f"spec.priority: expected an integer, got {priority!r}")
        priority = 0
    policy = spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY
    if policy not in (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER):
        errors.append(
            f"spec.preemptionPolicy: expected {PREEMPT_LOWER_PRIORITY} or {PREEMPT_NEVER}, "
            f"got {policy!r}"
        )
        policy = PREEMPT_LOWER_PRIORITY
    condition, preempted, deferred = _conditions(status, errors)
    workload_ref = _workload_ref(spec, errors)
    scheduling_group = _scheduling_group(spec, errors)
    gates = []
    for i, raw in enumerate(as_list(spec.get("schedulingGates"), "spec.schedulingGates", errors)):
        gate = as_map(raw, f"spec.schedulingGates[{i}]", errors)
        gates.append(str(gate.get("name", "")))
    node_features = infer_for_scheduling(spec, errors)
    return PodInfo(
        uid=str(meta.get("uid", "")),
        namespace=namespace,
        name=str(meta.get("name", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        node_name=str(spec.get("nodeName") or ""),
        priority=priority,
        phase=str(status.get("phase") or "Pending"),
        deleting=bool(meta.get("deletionTimestamp")),
        scheduling_gates=tuple(gates),
        requests=reqs.requests,
        nonzero_cpu=reqs.nonzero[0],
        nonzero_memory=reqs.nonzero[1],
        host_ports=_host_ports(spec, errors),
        tolerations=tuple(tolerations),
        node_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
        required_terms=required,
        preferred_terms=preferred,
        scheduled_condition=condition,
        nominated_node_name=str(status.get("nominatedNodeName") or ""),
        creation_timestamp=str(meta.get("creationTimestamp") or ""),
        start_time=str(status.get("startTime") or ""),
        preemption_policy=str(policy),
        preempted=preempted,
        resize_deferred=deferred,
        errors=tuple(dict.fromkeys(errors)),
        labels=labels,
        controller=controller,
        spread_constraints=spread,
        pod_affinity=pod_affinity,
        images=images,
        image_volumes=image_volumes,
        volumes=volumes,
        resource_claims=resource_claims,
        claim_statuses=claim_statuses,
        workload_ref=workload_ref,
        scheduling_group=scheduling_group,
        node_features=node_features,
        raw=obj if keep_raw and not spec.get("nodeName") and isinstance(obj, Mapping) else None,
        fingerprint=_fingerprint(spec, meta),
        score_nonzero=reqs.score_nonzero,
        spec_requests=reqs.spec_requests,
        extended_containers=parse_extended_containers(spec),
        resize_digest=resize_digest(status),
    )


def _workload_ref(spec: Mapping[str, Any], errors: list[str]) -> tuple[str, str, str] | None:
    raw = spec.get("workloadRef")
    if raw is None:
        return None
    ref = as_map(raw, "spec.workloadRef", errors)
    fields = []
    for name in ("name", "podGroup", "podGroupReplicaKey"):
        value = ref.get(name) or ""
        if not isinstance(value, str):
            errors.append(f"spec.workloadRef.{name}: expected a string, got {value!r}")
            value = ""
        fields.append(value)
    if not fields[0] or not fields[1]:
        errors.append("spec.workloadRef: name and podGroup are required")
        return None
    return fields[0], fields[1], fields[2]


def _scheduling_group(spec: Mapping[str, Any], errors: list[str]) -> str | None:
    """`spec.schedulingGroup`: a union of which `podGroupName` is the one member (an API
    server of v1.35, or one with GenericWorkload off, drops the field)."""
    raw = spec.get("schedulingGroup")
    if raw is None:
        return None
    group = as_map(raw, "spec.schedulingGroup", errors)
    name = group.get("podGroupName")
    if name is None:
        return None
    if not isinstance(name, str) or not name:
        errors.append(
            f"spec.schedulingGroup.podGroupName: expected a non-empty string, got {name!r}"
        )
        return None
    return name


def _conditions(
    status: Mapping[str, Any], errors: list[str]
) -> tuple[tuple[str, str, str] | None, bool, bool]:
    """The PodScheduled condition (status, reason, message), whether a DisruptionTarget
    condition says a scheduler is preempting the pod and whether its resize is deferred."""
    condition = None
    preempted = False
    seen_disruption = False
    deferred: bool | None = None
    for i, raw in enumerate(as_list(status.get("conditions"), "status.conditions", errors)):
        c = as_map(raw, f"status.conditions[{i}]", errors)
        if c.get("type") == "PodScheduled":
            condition = (
                str(c.get("status", "")),
                str(c.get("reason", "")),
                str(c.get("message", "")),
            )
        elif c.get("type") == "DisruptionTarget" and not seen_disruption:
            # The first such condition decides, as kube-scheduler reads it.
            seen_disruption = True
            preempted = c.get("status") == "True" and c.get("reason") == PREEMPTION_BY_SCHEDULER
        elif c.get("type") == "PodResizePending" and deferred is None:
            # Only the first PodResizePending condition counts, whatever its status.
            deferred = c.get("reason") == "Deferred"
    return condition, preempted, bool(deferred)


def _fingerprint(spec: Mapping[str, Any], meta: Mapping[str, Any]) -> int:
    """A digest of everything a PodInfo takes from a pod but its status, its labels and the
    metadata that changes on its own (resourceVersion, deletionTimestamp): equal digests,
    equal parses of those parts."""
    try:
        return hash(orjson.dumps((spec, meta.get("ownerReferences"), meta.get("uid"))))
    except (TypeError, orjson.JSONEncodeError):
        return 0


def reparse_pod(
    obj: Any, old: PodInfo, *, keep_raw: bool = False, rule: RequestsRule = V1_35
) -> PodInfo:
    """`parse_pod` for a new version of `old`: when only its status (but what an in-place
    resize reports of its containers' resources), labels (and
    resourceVersion or deletionTimestamp) changed, which is what most updates of a bound pod
    are (the kubelet's phase and conditions), or it was just bound (`spec.nodeName` set,
    nothing else of the spec changed: what a Binding does, the API server adding the node's
    `topology.kubernetes.io` labels on the way), `old` with those fields replaced, at a
    fraction of the cost; otherwise a full parse."""
    if not isinstance(obj, Mapping) or not old.fingerprint or old.errors:
        return parse_pod(obj, keep_raw=keep_raw, rule=rule)
    meta, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status")
    if not (isinstance(meta, Mapping) and isinstance(spec, Mapping)):
        return parse_pod(obj, keep_raw=keep_raw, rule=rule)
    if status is None:
        status = {}
    if not isinstance(status, Mapping):
        return parse_pod(obj, keep_raw=keep_raw, rule=rule)
    if resize_digest(status) != old.resize_digest:
        # An in-place resize moved what the kubelet reports: the requests change.
        return parse_pod(obj, keep_raw=keep_raw, rule=rule)
    fingerprint = _fingerprint(spec, meta)
    node_name = old.node_name
    if fingerprint != old.fingerprint:
        bound = spec.get("nodeName")
        if (
            old.node_name
            or not isinstance(bound, str)
            or not bound
            or _fingerprint({k: v for k, v in spec.items() if k != "nodeName"}, meta)
            != old.fingerprint
        ):
            return parse_pod(obj, keep_raw=keep_raw, rule=rule)
        node_name = bound
    errors: list[str] = []
    labels = old.labels
    raw_labels = meta.get("labels")
    if (raw_labels if raw_labels is not None else {}) != labels:
        labels = _labels(raw_labels, "metadata.labels", errors)
    condition, preempted, deferred = _conditions(status, errors)
    claim_statuses = old.claim_statuses
    if old.resource_claims or status.get("resourceClaimStatuses"):
        _, claim_statuses = parse_pod_claims({}, status, errors)
    if errors:
        return parse_pod(obj, keep_raw=keep_raw, rule=rule)
    return _status_update(
        old,
        {
            "node_name": node_name,
            "fingerprint": fingerprint,
            "resource_version": str(meta.get("resourceVersion", "")),
            "phase": str(status.get("phase") or "Pending"),
            "deleting": bool(meta.get("deletionTimestamp")),
            "scheduled_condition": condition,
            "nominated_node_name": str(status.get("nominatedNodeName") or ""),
            "start_time": str(status.get("startTime") or ""),
            "preempted": preempted,
            "resize_deferred": deferred,
            "claim_statuses": claim_statuses,
            "labels": labels,
            "raw": obj if keep_raw and not spec.get("nodeName") else None,
        },
    )


#: Every PodInfo field, in order.
_FIELDS: Final = tuple(f.name for f in dataclasses.fields(PodInfo))
_set: Final = object.__setattr__


def _status_update(old: PodInfo, changes: Mapping[str, Any]) -> PodInfo:
    """`dataclasses.replace(old, **changes)` without its call of `__init__` (a watch event of
    every pod goes through it); `changes` are values of the right types, already parsed."""
    new = object.__new__(PodInfo)
    for name in _FIELDS:
        _set(new, name, changes[name] if name in changes else getattr(old, name))
    return new
