"""A pod's effective requests, as component-helpers' `resource.PodRequests` computes them for
kube-scheduler v1.35 (InPlacePodVerticalScaling GA, PodLevelResources beta and on,
InPlacePodLevelResourcesVerticalScaling alpha and off).

Per container the requests are the spec's, except for a container (or a sidecar: an init
container with `restartPolicy: Always`) whose status reports `resources`: then the largest,
per resource, of the spec, `status...resources.requests` (what the kubelet actuated) and
`allocatedResources` (what it admitted), the spec left out while a `PodResizePending`
condition says `Infeasible`. So a resize counts at the larger of before and after until it is
done, and a resize that can never be done holds no room. Containers aggregate as the sidecar
KEP says (the sum of containers and sidecars, at least each init container over the sidecars
started before it); `spec.resources.requests` replaces the aggregate for cpu, memory and
hugepages (its status is not read: that is the gate that is off); overhead is added last.

kube-scheduler reads one pod in four ways, and `PodRequests` keeps each one:
- `requests`: what a pod on a node holds (the node's sums, and the requested side of scoring);
- `nonzero`: what it holds for scoring cpu and memory (`NodeInfo`'s non-zero sums), where a
  container without a cpu or memory request counts at 100m / 200Mi, except that with
  pod-level requests set only a resource that neither level requests is defaulted;
- `score_nonzero`: the pod being scheduled, as NodeResourcesFit scores it: its containers'
  spec with the per-container defaults, and neither pod-level requests nor status (v1.35's
  Fit builds its `resourceAllocationScorer` without the PodLevelResources and
  InPlacePodVerticalScaling switches that BalancedAllocation's sets, so `PodRequests` skips
  both there); differs from `nonzero` only with pod-level requests or status resources;
- `spec_requests`: the pod being scheduled, as NodeResourcesFit filters it: the spec only
  (a pending pod has nothing actuated); differs from `requests` only with status resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

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
class PodRequests:
    requests: Resources
    nonzero: tuple[int, int]
    score_nonzero: tuple[int, int] | None
    spec_requests: Resources | None


@dataclass(frozen=True, slots=True)
class _Container:
    spec: Resources
    #: max(spec, actuated, allocated) or, infeasible, max(actuated, allocated); None when the
    #: status does not report the container's resources.
    status: Resources | None
    init: bool
    sidecar: bool


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


def _add(total: Resources, extra: Mapping[str, int]) -> None:
    for name, value in extra.items():
        total[name] = saturating_add(total.get(name, 0), value)


def _max_into(total: Resources, other: Mapping[str, int]) -> None:
    """kube's `maxResourceList`: a name not yet present is added, also at zero."""
    for name, value in other.items():
        if name not in total or value > total[name]:
            total[name] = value


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
    status: Mapping[str, Any], errors: list[str]
) -> dict[str, tuple[Resources, Resources] | None]:
    """Container name -> (actuated, allocated), or None for a status that reports no
    `resources` (kube reads a status only when its `Resources` is set, `{}` included; a
    later status of the same name replaces an earlier one, init containers' last)."""
    out: dict[str, tuple[Resources, Resources] | None] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        path = f"status.{key}"
        for i, raw in enumerate(as_list(status.get(key), path, errors)):
            cs = as_map(raw, f"{path}[{i}]", errors)
            name = str(cs.get("name", ""))
            resources = cs.get("resources")
            if resources is None:
                out[name] = None
                continue
            resources = as_map(resources, f"{path}[{i}].resources", errors)
            actuated = parse_resources(
                resources.get("requests"), f"{path}[{i}].resources.requests", errors
            )
            allocated = parse_resources(
                cs.get("allocatedResources"), f"{path}[{i}].allocatedResources", errors
            )
            out[name] = (actuated, allocated)
    return out


def _containers(
    spec: Mapping[str, Any], status: Mapping[str, Any], errors: list[str]
) -> list[_Container]:
    reported = _statuses(status, errors) if status else {}
    infeasible = resize_infeasible(status) if any(reported.values()) else False
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
            effective = None
            found = reported.get(str(c.get("name", ""))) if (sidecar or not init) else None
            if found is not None:
                actuated, allocated = found
                effective = {} if infeasible else dict(requests)
                _max_into(effective, actuated)
                _max_into(effective, allocated)
            out.append(_Container(requests, effective, init, sidecar))
    return out


def _with_missing(requests: Resources, missing: Mapping[str, int] | None) -> Resources:
    """kube's `applyNonMissing`: the defaults for the names the container does not list."""
    if not missing:
        return requests
    out = dict(requests)
    for name, value in missing.items():
        if name not in requests:
            out[name] = value
    return out


def _aggregate(
    containers: list[_Container],
    pod_level: Resources | None,
    overhead: Resources,
    *,
    use_status: bool,
    missing: Mapping[str, int] | None = None,
) -> Resources:
    """`PodRequests` with the options named: containers, sidecars and init containers by the
    sidecar KEP, pod-level requests replacing the aggregate, overhead added."""
    total: Resources = {}
    sidecars: Resources = {}
    init_max: Resources = {}
    for c in containers:
        req = c.status if use_status and c.status is not None else c.spec
        req = _with_missing(req, missing)
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
    if pod_level:
        total.update(pod_level)
    _add(total, overhead)
    return total


def _supported_pod_level(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def pod_requests(
    spec: Mapping[str, Any], status: Mapping[str, Any], errors: list[str]
) -> PodRequests:
    """The four readings of a pod's requests (see the module docstring); errors name the
    field that could not be read, which then counts as absent."""
    containers = _containers(spec, status, errors)
    pod_resources = as_map(spec.get("resources"), "spec.resources", errors)
    pod_level = {
        name: value
        for name, value in parse_resources(
            pod_resources.get("requests"), "spec.resources.requests", errors
        ).items()
        if _supported_pod_level(name)
    }
    overhead = parse_resources(spec.get("overhead"), "spec.overhead", errors)
    uses_status = any(c.status is not None for c in containers)

    requests = _aggregate(containers, pod_level, overhead, use_status=True)
    if pod_level:
        # kube's `getNonMissingContainerRequests`: only what neither level requests.
        missing = {k: v for k, v in _DEFAULTS.items() if k not in requests}
        nonzero_list = (
            _aggregate(containers, pod_level, overhead, use_status=True, missing=missing)
            if missing
            else requests
        )
    else:
        nonzero_list = _aggregate(containers, None, overhead, use_status=True, missing=_DEFAULTS)
    scored = (
        nonzero_list
        if not pod_level and not uses_status
        else _aggregate(containers, None, overhead, use_status=False, missing=_DEFAULTS)
    )
    nonzero = (nonzero_list.get("cpu", 0), nonzero_list.get("memory", 0))
    score_nonzero = (scored.get("cpu", 0), scored.get("memory", 0))

    spec_requests = None
    if uses_status:
        spec_only = _aggregate(containers, pod_level, overhead, use_status=False)
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
    """A digest of everything `pod_requests` reads of a pod's status (each container
    status's `resources.requests`, whether it reports `resources` at all, its
    `allocatedResources`, and whether a resize is infeasible); 0 when no status reports
    resources, the usual case before a pod runs. Equal digests, equal readings: an update
    of a pod's status that keeps the digest keeps its requests. Every watch event of a
    running pod computes it, so it hashes tuples of the API's strings, serializing
    nothing; -1 for what cannot be read (a full parse reports it)."""
    parts: list[Any] = []
    for key in ("containerStatuses", "initContainerStatuses"):
        statuses = status.get(key)
        if not isinstance(statuses, list):
            continue
        for cs in statuses:
            if not isinstance(cs, Mapping):
                return -1
            resources = cs.get("resources")
            if resources is None:
                continue
            requests = resources.get("requests") if isinstance(resources, Mapping) else resources
            parts.append((cs.get("name"), _items(requests), _items(cs.get("allocatedResources"))))
    if not parts:
        return 0
    try:
        return hash((tuple(parts), resize_infeasible(status))) or 1
    except TypeError:
        return -1
