"""A pod's effective requests, as component-helpers' `resource.PodRequests` computes them for
the kube-scheduler of a release (InPlacePodVerticalScaling GA, PodLevelResources beta and on in
all three; InPlacePodLevelResourcesVerticalScaling alpha and off in 1.35, beta and on from
1.36).

v1.35 and v1.36 read a running pod per container: the requests are the spec's, except for a
container (or a sidecar: an init container with `restartPolicy: Always`) whose status reports
`resources`: then the largest, per resource, of the spec, `status...resources.requests` (what
the kubelet actuated) and `allocatedResources` (what it admitted), the spec left out while a
`PodResizePending` condition says `Infeasible`. So a resize counts at the larger of before and
after until it is done, and a resize that can never be done holds no room. Containers
aggregate as the sidecar KEP says (the sum of containers and sidecars, at least each init
container over the sidecars started before it); `spec.resources.requests` replaces the
aggregate for cpu, memory and hugepages; overhead is added last.

v1.37 (`AggregateContainerRequests`, ungated) aggregates first and takes the maximum after:
three whole-pod aggregates by the same formula, one over the spec, one over what was
allocated (a container's `allocatedResources`, else its spec) and one over what runs (its
`resources.requests`, else `allocatedResources`, else its spec), every container read, plain
init containers too; then their largest per resource, the spec's left out (and a container
without status counting nothing) while a resize is infeasible. A maximum of sums is not a sum
of maxima: a pod whose container A is resized down from 2 cpus to 1 while B goes up from 1 to
2 holds 3 cpus in 1.37 and 4 before.

InPlacePodLevelResourcesVerticalScaling (`RequestsRule.pod_level_status`) makes pod-level
requests follow the pod's status (`status.resources.requests`, `status.allocatedResources`)
the same way: in 1.36 each resource the spec's pod-level requests name is replaced by the
largest of the three; in 1.37 every supported resource of that largest is, and the pod-level
status maps, when both are reported, stand for the allocated and actuated container aggregates.

Pods are parsed once, in the model, before (and without) the scheduling framework: the release
is not a plugin's concern but a reading's. So the reading is chosen where a pod is parsed: the
pod informer's parse is given the `RequestsRule` of the release ascheduler behaves as
(`RequestsRule.of(features)`), which every `PodInfo` of that process is then read with; the
cache, the node table and the plugins keep counting `requests` as they always have. The rule
defaults to v1.35's, which is what a parse that names none (tools, tests) gets.

kube-scheduler reads one pod in four ways, and `PodRequests` keeps each one:
- `requests`: what a pod on a node holds (the node's sums, and the requested side of scoring);
- `nonzero`: what it holds for scoring cpu and memory (`NodeInfo`'s non-zero sums), where a
  container without a cpu or memory request counts at 100m / 200Mi, except that with
  pod-level requests set only a resource that neither level requests is defaulted;
- `score_nonzero`: the pod being scheduled, as NodeResourcesFit scores it: its containers'
  spec with the per-container defaults, and neither pod-level requests nor status (Fit builds
  its `resourceAllocationScorer` without the PodLevelResources and InPlacePodVerticalScaling
  switches that BalancedAllocation's sets, in all three releases, so `PodRequests` skips both
  there); differs from `nonzero` only with pod-level requests or status resources;
- `spec_requests`: the pod being scheduled, as NodeResourcesFit filters it: the spec only
  (a pending pod has nothing actuated); differs from `requests` only with status resources.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ascheduler.features import POD_LEVEL_RESIZE, Features
from ascheduler.model.fields import as_list, as_map
from ascheduler.model.quantity import QuantityError, parse_resource, saturating_add

#: kube-scheduler's defaults for containers that request no cpu / memory, used for scoring only.
DEFAULT_MILLI_CPU_REQUEST: Final = 100
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024
_DEFAULTS: Final[Mapping[str, int]] = {
    "cpu": DEFAULT_MILLI_CPU_REQUEST,
    "memory": DEFAULT_MEMORY_REQUEST,
}
#: The pod condition a kubelet sets while a resize waits, and its reason when it never can be.
RESIZE_PENDING: Final = "PodResizePending"
INFEASIBLE: Final = "Infeasible"

#: Resource lists keep explicit zeros: kube-scheduler's defaults look at which names are
#: present, not at their values.
Resources = dict[str, int]


@dataclass(frozen=True, slots=True)
class RequestsRule:
    """How a release reads a running pod's requests from its status (module docstring)."""

    #: v1.37: the largest of whole-pod aggregates (spec, allocated, actuated), every
    #: container's status read; else v1.35's per-container largest.
    aggregates: bool = False
    #: InPlacePodLevelResourcesVerticalScaling: pod-level requests follow the pod's status.
    pod_level_status: bool = False

    @classmethod
    def of(cls, features: Features) -> RequestsRule:
        """The rule of the release and gates ascheduler behaves as."""
        return cls(aggregates=features.since(1, 37), pod_level_status=POD_LEVEL_RESIZE in features)


#: v1.35's reading (its defaults: the pod-level gate off).
V1_35: Final = RequestsRule()


@dataclass(frozen=True, slots=True)
class PodRequests:
    requests: Resources
    nonzero: tuple[int, int]
    score_nonzero: tuple[int, int] | None
    spec_requests: Resources | None


@dataclass(frozen=True, slots=True)
class _Container:
    spec: Resources
    #: v1.35: max(spec, actuated, allocated) or, infeasible, max(actuated, allocated); None
    #: when the status does not report the container's resources.
    status: Resources | None
    init: bool
    sidecar: bool
    #: v1.37's per-source lists: what was allocated and what runs, None where Go's is nil
    #: (an infeasible resize without status); the spec's under the v1.35 rule.
    allocated: Resources | None = None
    actuated: Resources | None = None


@dataclass(frozen=True, slots=True)
class _Status:
    """A container status: `resources` reported at all, its requests (None: absent) and
    `allocatedResources` (None: absent)."""

    reported: bool
    actuated: Resources | None
    allocated: Resources | None


@dataclass(frozen=True, slots=True)
class _PodStatus:
    """The pod-level status maps (InPlacePodLevelResourcesVerticalScaling): `status.resources`
    present, its requests and `status.allocatedResources` (None: absent)."""

    reported: bool
    actuated: Resources | None
    allocated: Resources | None


def parse_resources(raw: Any, path: str, errors: list[str]) -> Resources:
    """A resource list (`requests: {cpu: 500m}`) in base units, cpu in millicores; a value
    that is not a non-negative quantity is left out and recorded in `errors`."""
    out: Resources = {}
    for name, text in as_map(raw, path, errors).items():
        try:
            value = parse_resource(str(name), text)
        except QuantityError as exc:
            errors.append(f"{path}.{name}: {exc}")
            continue
        if value < 0:
            errors.append(f"{path}.{name}: negative quantity {text!r}")
            continue
        out[str(name)] = value
    return out


def _optional(raw: Any, path: str, errors: list[str]) -> Resources | None:
    """A resource list that may be absent (Go's nil), which differs from an empty one."""
    return None if raw is None else parse_resources(raw, path, errors)


def _add(total: Resources, extra: Mapping[str, int]) -> None:
    for name, value in extra.items():
        total[name] = saturating_add(total.get(name, 0), value)


def _max_into(total: Resources, other: Mapping[str, int] | None) -> None:
    """kube's `maxResourceList`: a name not yet present is added, also at zero."""
    for name, value in (other or {}).items():
        if name not in total or value > total[name]:
            total[name] = value


def _largest(*lists: Mapping[str, int] | None) -> Resources:
    """kube's `max(a, b...)`: per resource the largest of the lists (nil ones skipped)."""
    out: Resources = {}
    for each in lists:
        _max_into(out, each)
    return out


def resize_infeasible(status: Mapping[str, Any]) -> bool:
    """component-helpers' `IsPodResizeInfeasible`: the first PodResizePending condition
    decides."""
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return False
    for c in conditions:
        if isinstance(c, Mapping) and c.get("type") == RESIZE_PENDING:
            return c.get("reason") == INFEASIBLE
    return False


def _statuses(
    status: Mapping[str, Any], rule: RequestsRule, errors: list[str]
) -> tuple[dict[str, _Status], dict[str, _Status]]:
    """Container name -> its status, as v1.35 finds it (a later status of the same name
    replaces an earlier one, init containers' last) and as v1.37 does (`findContainerStatus`:
    the first, containers' before init containers'). v1.35 reads a status only when its
    `resources` is set (`{}` included), so under its rule `allocatedResources` is parsed only
    there."""
    last: dict[str, _Status] = {}
    first: dict[str, _Status] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        path = f"status.{key}"
        for i, raw in enumerate(as_list(status.get(key), path, errors)):
            cs = as_map(raw, f"{path}[{i}]", errors)
            name = str(cs.get("name", ""))
            resources = cs.get("resources")
            if resources is None:
                allocated = None
                if rule.aggregates:
                    allocated = _optional(
                        cs.get("allocatedResources"), f"{path}[{i}].allocatedResources", errors
                    )
                found = _Status(False, None, allocated)
            else:
                resources = as_map(resources, f"{path}[{i}].resources", errors)
                found = _Status(
                    True,
                    _optional(resources.get("requests"), f"{path}[{i}].resources.requests", errors),
                    _optional(
                        cs.get("allocatedResources"), f"{path}[{i}].allocatedResources", errors
                    ),
                )
            last[name] = found
            first.setdefault(name, found)
    return last, first


def _pod_status(status: Mapping[str, Any], errors: list[str]) -> _PodStatus | None:
    """The pod-level status maps, None when the pod's status reports neither."""
    resources = status.get("resources")
    allocated = status.get("allocatedResources")
    if resources is None and allocated is None:
        return None
    actuated = None
    if resources is not None:
        actuated = _optional(
            as_map(resources, "status.resources", errors).get("requests"),
            "status.resources.requests",
            errors,
        )
    return _PodStatus(
        resources is not None,
        actuated,
        _optional(allocated, "status.allocatedResources", errors),
    )


def _containers(
    spec: Mapping[str, Any], status: Mapping[str, Any], rule: RequestsRule, errors: list[str]
) -> tuple[list[_Container], bool, bool]:
    """The containers, whether a resize is infeasible, and whether the status says anything
    the rule reads (else every reading is the spec's)."""
    last, first = _statuses(status, rule, errors) if status else ({}, {})
    reported = any(s.reported for s in last.values())
    if rule.aggregates:
        # Every container's status is read, reported `resources` or not, and the condition
        # alone empties the spec-backed lists.
        infeasible = resize_infeasible(status) if status else False
        reads_status = bool(first) or infeasible
    else:
        infeasible = resize_infeasible(status) if reported else False
        reads_status = reported
    out = []
    for key in ("containers", "initContainers"):
        init = key == "initContainers"
        for i, raw in enumerate(as_list(spec.get(key), f"spec.{key}", errors)):
            c = as_map(raw, f"spec.{key}[{i}]", errors)
            if not c:
                continue
            path = f"spec.{key}[{i}].resources"
            resources = as_map(c.get("resources"), path, errors)
            requests = parse_resources(resources.get("requests"), f"{path}.requests", errors)
            sidecar = init and c.get("restartPolicy") == "Always"
            name = str(c.get("name", ""))
            if rule.aggregates:
                out.append(_aggregated(requests, first.get(name), infeasible, init, sidecar))
                continue
            effective = None
            found = last.get(name) if (sidecar or not init) else None
            if found is not None and found.reported:
                effective = {} if infeasible else dict(requests)
                _max_into(effective, found.actuated)
                _max_into(effective, found.allocated)
            out.append(_Container(requests, effective, init, sidecar))
    return out, infeasible, reads_status


def _aggregated(
    requests: Resources, found: _Status | None, infeasible: bool, init: bool, sidecar: bool
) -> _Container:
    """A container as v1.37 reads it (`containerAllocatedRequests`,
    `containerActuatedRequests`)."""
    fallback = None if infeasible else requests
    allocated = found.allocated if found is not None else None
    actuated = found.actuated if found is not None else None
    return _Container(
        requests,
        None,
        init,
        sidecar,
        allocated=allocated if allocated is not None else fallback,
        actuated=actuated
        if actuated is not None
        else allocated
        if allocated is not None
        else fallback,
    )


def _with_missing(requests: Resources | None, missing: Mapping[str, int] | None) -> Resources:
    """kube's `applyNonMissing`: the defaults for the names the container does not list."""
    if not missing:
        return requests or {}
    out = dict(requests or {})
    for name, value in missing.items():
        if name not in out:
            out[name] = value
    return out


def _sum(
    containers: list[_Container],
    pick: Callable[[_Container], Resources | None],
    missing: Mapping[str, int] | None,
) -> Resources:
    """`aggregateContainerResourcesByFn`: the containers' lists `pick` chooses, aggregated by
    the sidecar KEP."""
    total: Resources = {}
    sidecars: Resources = {}
    init_max: Resources = {}
    for c in containers:
        req = _with_missing(pick(c), missing)
        if not c.init:
            _add(total, req)
        elif c.sidecar:
            _add(total, req)
            _add(sidecars, req)
            _max_into(init_max, sidecars)
        else:
            candidate = dict(req)
            _add(candidate, sidecars)
            _max_into(init_max, candidate)
    _max_into(total, init_max)
    return total


def _spec(c: _Container) -> Resources:
    return c.spec


def _v135(c: _Container) -> Resources:
    return c.status if c.status is not None else c.spec


def _allocated(c: _Container) -> Resources | None:
    return c.allocated


def _actuated(c: _Container) -> Resources | None:
    return c.actuated


@dataclass(frozen=True, slots=True)
class _Pod:
    """What the readings are computed from."""

    containers: list[_Container]
    rule: RequestsRule
    infeasible: bool
    #: Supported pod-level requests (empty: `IsPodLevelRequestsSet` is false), and all of them.
    pod_level: Resources
    pod_level_all: Resources
    pod_status: _PodStatus | None
    overhead: Resources
    #: `IsPodResizeInfeasible` for the pod-level status, read whether or not a container's
    #: status reports resources.
    pod_infeasible: bool = False

    def aggregate(
        self, *, use_status: bool, pod_level: bool = True, missing: Mapping[str, int] | None = None
    ) -> Resources:
        """`PodRequests` with the options named: the containers' aggregate, pod-level
        requests over it, overhead added."""
        if not use_status:
            total = _sum(self.containers, _spec, missing)
        elif not self.rule.aggregates:
            total = _sum(self.containers, _v135, missing)
        else:
            total = self._largest_aggregate(missing)
        if pod_level and self.pod_level:
            self._apply_pod_level(total, use_status=use_status)
        _add(total, self.overhead)
        return total

    def _largest_aggregate(self, missing: Mapping[str, int] | None) -> Resources:
        """v1.37's `AggregateContainerRequests` with status resources."""
        spec = _sum(self.containers, _spec, missing)
        status = self.pod_status
        if (
            self.rule.pod_level_status
            and status is not None
            and status.allocated is not None
            and status.reported
            and status.actuated is not None
        ):
            # The kubelet's pod-level maps are already the aggregates.
            allocated, actuated = status.allocated, status.actuated
        else:
            allocated = _sum(self.containers, _allocated, missing)
            actuated = _sum(self.containers, _actuated, missing)
        if self.infeasible:
            return _largest(actuated, allocated)
        return _largest(spec, actuated, allocated)

    def _apply_pod_level(self, total: Resources, *, use_status: bool) -> None:
        status = self.pod_status
        if not (use_status and self.rule.pod_level_status and status and status.reported):
            total.update(self.pod_level)
            return
        spec = None if self.pod_infeasible else self.pod_level_all
        effective = _largest(spec, status.actuated, status.allocated)
        if self.rule.aggregates:
            # `applyPodLevelResources`: every supported resource of the largest.
            total.update((k, v) for k, v in effective.items() if _supported_pod_level(k))
        else:
            # v1.36: the resources the spec names, each at its largest (0 if none has it).
            total.update((k, effective.get(k, 0)) for k in self.pod_level)


def _supported_pod_level(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def pod_requests(
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    errors: list[str],
    rule: RequestsRule = V1_35,
) -> PodRequests:
    """The four readings of a pod's requests (see the module docstring) under `rule`; errors
    name the field that could not be read, which then counts as absent."""
    containers, infeasible, uses_status = _containers(spec, status, rule, errors)
    pod_resources = as_map(spec.get("resources"), "spec.resources", errors)
    pod_level_all = parse_resources(
        pod_resources.get("requests"), "spec.resources.requests", errors
    )
    pod_status = _pod_status(status, errors) if rule.pod_level_status and status else None
    if pod_status is not None and (pod_status.reported or rule.aggregates):
        uses_status = True
    pod = _Pod(
        containers,
        rule,
        infeasible,
        {k: v for k, v in pod_level_all.items() if _supported_pod_level(k)},
        pod_level_all,
        pod_status,
        parse_resources(spec.get("overhead"), "spec.overhead", errors),
        pod_infeasible=pod_status is not None and resize_infeasible(status),
    )

    requests = pod.aggregate(use_status=True)
    if pod.pod_level:
        # kube's `getNonMissingContainerRequests`: only what neither level requests.
        missing = {k: v for k, v in _DEFAULTS.items() if k not in requests}
        nonzero_list = pod.aggregate(use_status=True, missing=missing) if missing else requests
    else:
        nonzero_list = pod.aggregate(use_status=True, missing=_DEFAULTS)
    scored = (
        nonzero_list
        if not pod.pod_level and not uses_status
        else pod.aggregate(use_status=False, pod_level=False, missing=_DEFAULTS)
    )
    nonzero = (nonzero_list.get("cpu", 0), nonzero_list.get("memory", 0))
    score_nonzero = (scored.get("cpu", 0), scored.get("memory", 0))

    spec_requests = None
    if uses_status:
        spec_only = pod.aggregate(use_status=False)
        if spec_only != requests:
            spec_requests = {k: v for k, v in spec_only.items() if v}
    return PodRequests(
        requests={k: v for k, v in requests.items() if v},
        nonzero=nonzero,
        score_nonzero=score_nonzero if score_nonzero != nonzero else None,
        spec_requests=spec_requests,
    )


def _items(value: Any) -> Any:
    """A resource list as a hashable tuple (what the API sends; anything else as it is)."""
    return tuple(value.items()) if isinstance(value, Mapping) else value


def resize_digest(status: Mapping[str, Any]) -> int:
    """A digest of everything `pod_requests` reads of a pod's status under any rule (each
    container status's `resources.requests`, whether it reports `resources` at all, its
    `allocatedResources`, the pod-level `resources` and `allocatedResources`, and whether a
    resize is infeasible); 0 when the status has none of them, the usual case before a pod
    runs. Equal digests, equal readings: an update of a pod's status that keeps the digest
    keeps its requests. Every watch event of a running pod computes it, so it hashes tuples
    of the API's strings, serializing nothing; -1 for what cannot be read (a full parse
    reports it)."""
    parts: list[Any] = []
    for key in ("containerStatuses", "initContainerStatuses"):
        statuses = status.get(key)
        if not isinstance(statuses, list):
            continue
        for cs in statuses:
            if not isinstance(cs, Mapping):
                return -1
            resources = cs.get("resources")
            allocated = cs.get("allocatedResources")
            if resources is None and allocated is None:
                continue
            requests = resources.get("requests") if isinstance(resources, Mapping) else resources
            parts.append((cs.get("name"), resources is None, _items(requests), _items(allocated)))
    resources = status.get("resources")
    allocated = status.get("allocatedResources")
    if resources is not None or allocated is not None:
        requests = resources.get("requests") if isinstance(resources, Mapping) else resources
        parts.append((None, resources is None, _items(requests), _items(allocated)))
    if not parts:
        return 0
    try:
        return hash((tuple(parts), resize_infeasible(status))) or 1
    except TypeError:
        return -1
