"""Dynamic Resource Allocation objects (resource.k8s.io/v1) as DynamicResources reads them:
DeviceClasses, ResourceSlices, ResourceClaims, ResourceClaimTemplates, and a pod's
`spec.resourceClaims` with `status.resourceClaimStatuses`.

Parsing never raises. A field that cannot be read is recorded in the object's `errors` with
its path; the plugin reports the object by kind, name and that error on the pods that depend
on it, and everything else is scheduled. What the allocator writes back (a claim's
`status.allocation`) is built from these records; opaque device configuration is carried as
the API server sent it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from ascheduler.model.affinity import NodeSelectorTerm, SpecError, parse_term
from ascheduler.model.dra_capacity import (
    Amount,
    RequestPolicy,
    amounts_to_api,
    distinct_attribute,
    parse_amounts,
    parse_capacity_requests,
    parse_policies,
    parse_share_id,
)
from ascheduler.model.dra_counters import (
    CounterConsumption,
    CounterSet,
    parse_consumptions,
    parse_counter_sets,
)
from ascheduler.model.dra_taints import DeviceTaint, parse_taints
from ascheduler.model.quantity import QuantityError, parse_fraction

GROUP: Final = "resource.k8s.io"
#: The finalizer the scheduler puts on a claim it allocates.
FINALIZER: Final = "resource.kubernetes.io/delete-protection"
EXACT_COUNT: Final = "ExactCount"
ALL: Final = "All"
#: API limits the allocator enforces (resourceapi.AllocationResultsMaxSize,
#: ResourceClaimReservedForMaxSize, FirstAvailableDeviceRequestMaxSize).
ALLOCATION_RESULTS_MAX: Final = 32
RESERVED_FOR_MAX: Final = 256
FIRST_AVAILABLE_MAX: Final = 8

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


@dataclass(frozen=True, slots=True, order=False)
class Semver:
    """A semantic version 2.0.0 (a device attribute's `version`, CEL's `semver()`)."""

    text: str
    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()

    def _pre_key(self) -> tuple[Any, ...]:
        # A version without pre-release ranks above the same one with it; numeric
        # identifiers rank below alphanumeric ones.
        if not self.pre:
            return (1,)
        return (0, *((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre))

    def compare(self, other: Semver) -> int:
        a = (self.major, self.minor, self.patch, self._pre_key())
        b = (other.major, other.minor, other.patch, other._pre_key())
        return (a > b) - (a < b)


def parse_semver(text: object) -> Semver:
    if not isinstance(text, str):
        raise ValueError(f"not a semantic version: {text!r}")
    match = _SEMVER.match(text)
    if match is None:
        raise ValueError(f"not a semantic version: {text!r}")
    pre = tuple(int(p) if p.isdigit() else p for p in (match[4] or "").split(".") if p)
    return Semver(text, int(match[1]), int(match[2]), int(match[3]), pre)


#: A device attribute's value: exactly one of int, bool, string, version.
AttributeValue = int | bool | str | Semver


@dataclass(frozen=True, slots=True)
class Quantity:
    """A capacity value: its text as written and its exact value."""

    text: str
    value: Fraction


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    #: Attribute name as written (qualified `domain/id`, or just `id` for the driver's
    #: own domain) -> value.
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    capacity: Mapping[str, Quantity] = field(default_factory=dict)
    #: Per-device node selection (slices with `perDeviceNodeSelection`).
    node_name: str = ""
    node_terms: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    #: Features off in kube-scheduler v1.35 by default: a device that needs them is never
    #: allocated (binding conditions, counters), or its taints are not checked.
    #: `bindingConditions` / `bindingFailureConditions` (DRADeviceBindingConditions: the
    #: pod binds once the first are all True on the claim, never once one of the second is).
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False
    consumes_counters: bool = False
    allow_multiple_allocations: bool = False
    #: Its `taints` (`dra.taints` adds those of DeviceTaintRules, or drops them all while
    #: `DRADeviceTaints` is off).
    taints: tuple[DeviceTaint, ...] = ()
    #: `consumesCounters` (partitionable devices, `model.dra_counters`).
    consumes: tuple[CounterConsumption, ...] = ()
    #: `capacity[name].requestPolicy` where set (`model.dra_capacity`).
    request_policies: Mapping[str, RequestPolicy] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    resource_version: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    #: Where the devices are: one node, the nodes a selector admits, all nodes, or per
    #: device (`perDeviceNodeSelection`).
    node_name: str = ""
    node_terms: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    shared_counters: bool = False
    devices: tuple[Device, ...] = ()
    #: `sharedCounters` (partitionable devices, `model.dra_counters`).
    counter_sets: tuple[CounterSet, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def pool_id(self) -> tuple[str, str]:
        return (self.driver, self.pool)

    @property
    def network(self) -> bool:
        """Not bound to one node (a selector or all nodes)."""
        return not self.node_name


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    resource_version: str
    #: CEL expressions (None where a selector has no `cel`, an unsupported selector type).
    selectors: tuple[str | None, ...] = ()
    #: `spec.config`, each entry as sent (`{"opaque": {...}}`).
    config: tuple[Mapping[str, Any], ...] = ()
    errors: tuple[str, ...] = ()
    #: `spec.extendedResourceName` (DRAExtendedResource), and `metadata.creationTimestamp`,
    #: which decides between two classes naming the same one (`dra.extended`).
    extended_resource_name: str | None = None
    created: str = ""


@dataclass(frozen=True, slots=True)
class Request:
    """One device request: a claim's `exactly`, or one of its `firstAvailable`."""

    name: str
    class_name: str
    selectors: tuple[str | None, ...] = ()
    mode: str = EXACT_COUNT
    count: int = 1
    #: None where the field is absent (the allocator tells "absent" from false).
    admin_access: bool | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    #: `capacity.requests`; None where `capacity` is absent.
    capacity: Mapping[str, Amount] | None = None


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    name: str
    exactly: Request | None = None
    first_available: tuple[Request, ...] = ()


@dataclass(frozen=True, slots=True)
class Constraint:
    #: The requests (or `request/subrequest`) it applies to; empty: all.
    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    #: A share of a device that allows multiple allocations: its `shareID` and what it
    #: consumes of the device's capacity (`consumedCapacity`).
    share_id: str | None = None
    consumed_capacity: Mapping[str, Amount] | None = None

    @property
    def device_id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "request": self.request,
            "driver": self.driver,
            "pool": self.pool,
            "device": self.device,
        }
        if self.admin_access is not None:
            out["adminAccess"] = self.admin_access
        if self.tolerations:
            out["tolerations"] = [dict(t) for t in self.tolerations]
        if self.binding_conditions:
            out["bindingConditions"] = list(self.binding_conditions)
        if self.binding_failure_conditions:
            out["bindingFailureConditions"] = list(self.binding_failure_conditions)
        if self.share_id is not None:
            out["shareID"] = self.share_id
        if self.consumed_capacity:
            out["consumedCapacity"] = amounts_to_api(self.consumed_capacity)
        return out


@dataclass(frozen=True, slots=True)
class Allocation:
    """A claim's `status.allocation`."""

    devices: tuple[AllocatedDevice, ...] = ()
    #: `devices.config` entries as written.
    config: tuple[Mapping[str, Any], ...] = ()
    #: `nodeSelector` terms; None: available on every node.
    node_terms: tuple[NodeSelectorTerm, ...] | None = None
    #: `nodeSelector` as written (what Filter matches and what is written back).
    node_selector: Mapping[str, Any] | None = None
    #: `allocationTimestamp` as written (RFC 3339), where binding conditions time out from.
    timestamp: str = ""

    def admits(self, node: str, labels: Mapping[str, str]) -> bool:
        """Whether a pod on `node` may use these devices: no selector (available everywhere),
        or one of its terms matches the node by name or labels. An allocation made here
        carries only the selector as it will be written; it is read the same way."""
        terms = self.node_terms
        if terms is None and self.node_selector is not None:
            terms = _node_selector(self.node_selector, "nodeSelector", [])
        if terms is None:
            return True
        return any(t.matches(node, labels) for t in terms)

    def to_api(self) -> dict[str, Any]:
        devices: dict[str, Any] = {"results": [d.to_api() for d in self.devices]}
        if self.config:
            devices["config"] = [dict(c) for c in self.config]
        out: dict[str, Any] = {"devices": devices}
        if self.node_selector is not None:
            out["nodeSelector"] = self.node_selector
        if self.timestamp:
            out["allocationTimestamp"] = self.timestamp
        return out


@dataclass(frozen=True, slots=True)
class Consumer:
    """An entry of a claim's `status.reservedFor`."""

    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str
    resource_version: str
    deleting: bool = False
    #: The uid of the controlling owner when that is a Pod (a template's claim).
    owner_pod_uid: str = ""
    finalizers: tuple[str, ...] = ()
    requests: tuple[ClaimRequest, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    #: `spec.devices.config` entries as written (`requests`, `opaque`).
    config: tuple[Mapping[str, Any], ...] = ()
    allocation: Allocation | None = None
    reserved_for: tuple[Consumer, ...] = ()
    #: `status.devices[].conditions` per (driver, pool, device): condition type -> (status,
    #: reason, message) (what binding conditions are checked against).
    device_conditions: Mapping[tuple[str, str, str], Mapping[str, tuple[str, str, str]]] = field(
        default_factory=dict
    )
    errors: tuple[str, ...] = ()
    #: The object as the API server sent it (the base of the scheduler's writes).
    raw: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def reserved_for_pod(self, uid: str) -> bool:
        return any(
            c.resource == "pods" and c.api_group == "" and c.uid == uid for c in self.reserved_for
        )

    @property
    def can_be_reserved(self) -> bool:
        return len(self.reserved_for) < RESERVED_FOR_MAX


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    resource_version: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PodClaim:
    """An entry of a pod's `spec.resourceClaims`."""

    name: str
    claim_name: str | None = None
    template_name: str | None = None


# -- parsing ---------------------------------------------------------------------------------


def _map(raw: Any, path: str, errors: list[str]) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        errors.append(f"{path}: expected an object")
        return {}
    return raw


def _seq(raw: Any, path: str, errors: list[str]) -> Sequence[Any]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        errors.append(f"{path}: expected a list")
        return ()
    return raw


def _str(raw: Any, path: str, errors: list[str]) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        errors.append(f"{path}: expected a string")
        return ""
    return raw


def _int(raw: Any, path: str, errors: list[str], default: int = 0) -> int:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int):
        errors.append(f"{path}: expected an integer")
        return default
    return raw


def _bool(raw: Any, path: str, errors: list[str]) -> bool | None:
    if raw is None:
        return None
    if not isinstance(raw, bool):
        errors.append(f"{path}: expected a boolean")
        return None
    return raw


def _node_selector(raw: Any, path: str, errors: list[str]) -> tuple[NodeSelectorTerm, ...] | None:
    if raw is None:
        return None
    sel = _map(raw, path, errors)
    terms = []
    for i, term in enumerate(
        _seq(sel.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms", errors)
    ):
        try:
            terms.append(parse_term(term, f"{path}.nodeSelectorTerms[{i}]"))
        except SpecError as exc:
            errors.append(str(exc))
    return tuple(terms)


def _selectors(raw: Any, path: str, errors: list[str]) -> tuple[str | None, ...]:
    out: list[str | None] = []
    for i, sel in enumerate(_seq(raw, path, errors)):
        s = _map(sel, f"{path}[{i}]", errors)
        cel = s.get("cel")
        if cel is None:
            out.append(None)
            continue
        expr = _map(cel, f"{path}[{i}].cel", errors).get("expression")
        out.append(_str(expr, f"{path}[{i}].cel.expression", errors))
    return tuple(out)


def _attribute(raw: Any, path: str, errors: list[str]) -> AttributeValue | None:
    a = _map(raw, path, errors)
    set_fields = [k for k in ("int", "bool", "string", "version") if a.get(k) is not None]
    if len(set_fields) != 1:
        errors.append(f"{path}: exactly one of int, bool, string or version must be set")
        return None
    kind = set_fields[0]
    value = a[kind]
    if kind == "int":
        return _int(value, f"{path}.int", errors) if not isinstance(value, bool) else None
    if kind == "bool":
        return _bool(value, f"{path}.bool", errors)
    if kind == "string":
        return _str(value, f"{path}.string", errors)
    try:
        return parse_semver(value)
    except ValueError as exc:
        errors.append(f"{path}.version: {exc}")
        return None


def _device(raw: Any, path: str, errors: list[str]) -> Device:
    d = _map(raw, path, errors)
    attributes: dict[str, AttributeValue] = {}
    for name, value in _map(d.get("attributes"), f"{path}.attributes", errors).items():
        parsed = _attribute(value, f"{path}.attributes[{name}]", errors)
        if parsed is not None:
            attributes[str(name)] = parsed
    consumes = parse_consumptions(d.get("consumesCounters"), f"{path}.consumesCounters", errors)
    capacity: dict[str, Quantity] = {}
    for name, value in _map(d.get("capacity"), f"{path}.capacity", errors).items():
        v = _map(value, f"{path}.capacity[{name}]", errors).get("value")
        try:
            capacity[str(name)] = Quantity(str(v), parse_fraction(v))
        except QuantityError as exc:
            errors.append(f"{path}.capacity[{name}].value: {exc}")
    return Device(
        name=_str(d.get("name"), f"{path}.name", errors),
        attributes=attributes,
        capacity=capacity,
        node_name=_str(d.get("nodeName"), f"{path}.nodeName", errors),
        node_terms=_node_selector(d.get("nodeSelector"), f"{path}.nodeSelector", errors),
        all_nodes=bool(_bool(d.get("allNodes"), f"{path}.allNodes", errors)),
        binding_conditions=_strs(d.get("bindingConditions"), f"{path}.bindingConditions", errors),
        binding_failure_conditions=_strs(
            d.get("bindingFailureConditions"), f"{path}.bindingFailureConditions", errors
        ),
        binds_to_node=bool(_bool(d.get("bindsToNode"), f"{path}.bindsToNode", errors)),
        consumes_counters=bool(consumes),
        allow_multiple_allocations=bool(
            _bool(d.get("allowMultipleAllocations"), f"{path}.allowMultipleAllocations", errors)
        ),
        taints=parse_taints(d.get("taints"), f"{path}.taints", errors),
        consumes=consumes,
        request_policies=parse_policies(d.get("capacity"), f"{path}.capacity", errors),
    )


def parse_resource_slice(obj: Any) -> ResourceSlice:
    errors: list[str] = []
    obj = _map(obj, "resourceslice", errors)
    meta = _map(obj.get("metadata"), "metadata", errors)
    spec = _map(obj.get("spec"), "spec", errors)
    pool = _map(spec.get("pool"), "spec.pool", errors)
    devices = tuple(
        _device(d, f"spec.devices[{i}]", errors)
        for i, d in enumerate(_seq(spec.get("devices"), "spec.devices", errors))
    )
    counter_sets = parse_counter_sets(spec.get("sharedCounters"), "spec.sharedCounters", errors)
    return ResourceSlice(
        name=_str(meta.get("name"), "metadata.name", errors),
        resource_version=str(meta.get("resourceVersion", "")),
        driver=_str(spec.get("driver"), "spec.driver", errors),
        pool=_str(pool.get("name"), "spec.pool.name", errors),
        generation=_int(pool.get("generation"), "spec.pool.generation", errors),
        slice_count=_int(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", errors, 1),
        node_name=_str(spec.get("nodeName"), "spec.nodeName", errors),
        node_terms=_node_selector(spec.get("nodeSelector"), "spec.nodeSelector", errors),
        all_nodes=bool(_bool(spec.get("allNodes"), "spec.allNodes", errors)),
        per_device_node_selection=bool(
            _bool(spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection", errors)
        ),
        shared_counters=bool(counter_sets),
        devices=devices,
        counter_sets=counter_sets,
        errors=tuple(dict.fromkeys(errors)),
    )


def parse_device_class(obj: Any) -> DeviceClass:
    errors: list[str] = []
    obj = _map(obj, "deviceclass", errors)
    meta = _map(obj.get("metadata"), "metadata", errors)
    spec = _map(obj.get("spec"), "spec", errors)
    config = tuple(
        _map(c, f"spec.config[{i}]", errors)
        for i, c in enumerate(_seq(spec.get("config"), "spec.config", errors))
    )
    return DeviceClass(
        name=_str(meta.get("name"), "metadata.name", errors),
        resource_version=str(meta.get("resourceVersion", "")),
        selectors=_selectors(spec.get("selectors"), "spec.selectors", errors),
        config=config,
        extended_resource_name=_str(
            spec.get("extendedResourceName"), "spec.extendedResourceName", errors
        )
        or None,
        created=str(meta.get("creationTimestamp") or ""),
        errors=tuple(dict.fromkeys(errors)),
    )


def _request(raw: Mapping[str, Any], name: str, path: str, errors: list[str]) -> Request:
    mode = _str(raw.get("allocationMode"), f"{path}.allocationMode", errors) or EXACT_COUNT
    count = _int(raw.get("count"), f"{path}.count", errors, 1 if mode == EXACT_COUNT else 0)
    if mode == EXACT_COUNT and count < 1:
        errors.append(f"{path}.count: must be greater than zero")
    return Request(
        name=name,
        class_name=_str(raw.get("deviceClassName"), f"{path}.deviceClassName", errors),
        selectors=_selectors(raw.get("selectors"), f"{path}.selectors", errors),
        mode=mode,
        count=count,
        admin_access=_bool(raw.get("adminAccess"), f"{path}.adminAccess", errors),
        tolerations=tuple(
            _map(t, f"{path}.tolerations[{i}]", errors)
            for i, t in enumerate(_seq(raw.get("tolerations"), f"{path}.tolerations", errors))
        ),
        capacity=parse_capacity_requests(raw.get("capacity"), f"{path}.capacity", errors),
    )


def _claim_request(raw: Any, path: str, errors: list[str]) -> ClaimRequest:
    r = _map(raw, path, errors)
    name = _str(r.get("name"), f"{path}.name", errors)
    exactly = None
    if r.get("exactly") is not None:
        exactly = _request(
            _map(r["exactly"], f"{path}.exactly", errors), name, f"{path}.exactly", errors
        )
    subs = []
    for i, sub in enumerate(_seq(r.get("firstAvailable"), f"{path}.firstAvailable", errors)):
        s = _map(sub, f"{path}.firstAvailable[{i}]", errors)
        subs.append(
            _request(
                s,
                _str(s.get("name"), f"{path}.firstAvailable[{i}].name", errors),
                f"{path}.firstAvailable[{i}]",
                errors,
            )
        )
    return ClaimRequest(name, exactly, tuple(subs))


def _allocation(raw: Any, errors: list[str]) -> Allocation | None:
    if raw is None:
        return None
    path = "status.allocation"
    a = _map(raw, path, errors)
    devices = _map(a.get("devices"), f"{path}.devices", errors)
    results = []
    for i, res in enumerate(_seq(devices.get("results"), f"{path}.devices.results", errors)):
        p = f"{path}.devices.results[{i}]"
        r = _map(res, p, errors)
        results.append(
            AllocatedDevice(
                request=_str(r.get("request"), f"{p}.request", errors),
                driver=_str(r.get("driver"), f"{p}.driver", errors),
                pool=_str(r.get("pool"), f"{p}.pool", errors),
                device=_str(r.get("device"), f"{p}.device", errors),
                admin_access=_bool(r.get("adminAccess"), f"{p}.adminAccess", errors),
                binding_conditions=_strs(
                    r.get("bindingConditions"), f"{p}.bindingConditions", errors
                ),
                binding_failure_conditions=_strs(
                    r.get("bindingFailureConditions"), f"{p}.bindingFailureConditions", errors
                ),
                share_id=parse_share_id(r.get("shareID"), f"{p}.shareID", errors),
                consumed_capacity=(
                    parse_amounts(r["consumedCapacity"], f"{p}.consumedCapacity", errors)
                    if r.get("consumedCapacity") is not None
                    else None
                ),
            )
        )
    selector = a.get("nodeSelector")
    return Allocation(
        devices=tuple(results),
        config=tuple(
            _map(c, f"{path}.devices.config[{i}]", errors)
            for i, c in enumerate(_seq(devices.get("config"), f"{path}.devices.config", errors))
        ),
        node_terms=_node_selector(selector, f"{path}.nodeSelector", errors),
        node_selector=selector if isinstance(selector, Mapping) else None,
        timestamp=_str(a.get("allocationTimestamp"), f"{path}.allocationTimestamp", errors),
    )


def _strs(raw: Any, path: str, errors: list[str]) -> tuple[str, ...]:
    return tuple(_str(v, f"{path}[{i}]", errors) for i, v in enumerate(_seq(raw, path, errors)))


def _device_conditions(
    status: Mapping[str, Any], errors: list[str]
) -> dict[tuple[str, str, str], dict[str, tuple[str, str, str]]]:
    out: dict[tuple[str, str, str], dict[str, tuple[str, str, str]]] = {}
    for i, raw in enumerate(_seq(status.get("devices"), "status.devices", errors)):
        p = f"status.devices[{i}]"
        d = _map(raw, p, errors)
        key = tuple(_str(d.get(k), f"{p}.{k}", errors) for k in ("driver", "pool", "device"))
        found = out.setdefault((key[0], key[1], key[2]), {})
        for j, c in enumerate(_seq(d.get("conditions"), f"{p}.conditions", errors)):
            m = _map(c, f"{p}.conditions[{j}]", errors)
            q = f"{p}.conditions[{j}]"
            found[_str(m.get("type"), f"{q}.type", errors)] = (
                _str(m.get("status"), f"{q}.status", errors),
                _str(m.get("reason"), f"{q}.reason", errors),
                _str(m.get("message"), f"{q}.message", errors),
            )
    return out


def _owner_pod(meta: Mapping[str, Any], errors: list[str]) -> str:
    for i, ref in enumerate(_seq(meta.get("ownerReferences"), "metadata.ownerReferences", errors)):
        r = _map(ref, f"metadata.ownerReferences[{i}]", errors)
        if r.get("controller") is True and r.get("kind") == "Pod" and r.get("apiVersion") == "v1":
            return str(r.get("uid", ""))
    return ""


def parse_resource_claim(obj: Any) -> ResourceClaim:
    errors: list[str] = []
    raw = obj if isinstance(obj, Mapping) else None
    obj = _map(obj, "resourceclaim", errors)
    meta = _map(obj.get("metadata"), "metadata", errors)
    spec = _map(obj.get("spec"), "spec", errors)
    status = _map(obj.get("status"), "status", errors)
    devices = _map(spec.get("devices"), "spec.devices", errors)
    requests = tuple(
        _claim_request(r, f"spec.devices.requests[{i}]", errors)
        for i, r in enumerate(_seq(devices.get("requests"), "spec.devices.requests", errors))
    )
    constraints = []
    for i, c in enumerate(_seq(devices.get("constraints"), "spec.devices.constraints", errors)):
        p = f"spec.devices.constraints[{i}]"
        m = _map(c, p, errors)
        reqs = _seq(m.get("requests"), f"{p}.requests", errors)
        constraints.append(
            Constraint(
                requests=tuple(str(r) for r in reqs),
                match_attribute=_str(m.get("matchAttribute"), f"{p}.matchAttribute", errors)
                or None,
                distinct_attribute=distinct_attribute(m, p, errors),
            )
        )
    reserved = []
    for i, c in enumerate(_seq(status.get("reservedFor"), "status.reservedFor", errors)):
        p = f"status.reservedFor[{i}]"
        m = _map(c, p, errors)
        reserved.append(
            Consumer(
                resource=_str(m.get("resource"), f"{p}.resource", errors),
                name=_str(m.get("name"), f"{p}.name", errors),
                uid=_str(m.get("uid"), f"{p}.uid", errors),
                api_group=_str(m.get("apiGroup"), f"{p}.apiGroup", errors),
            )
        )
    finalizers = _seq(meta.get("finalizers"), "metadata.finalizers", errors)
    return ResourceClaim(
        namespace=_str(meta.get("namespace"), "metadata.namespace", errors),
        name=_str(meta.get("name"), "metadata.name", errors),
        uid=_str(meta.get("uid"), "metadata.uid", errors),
        resource_version=str(meta.get("resourceVersion", "")),
        deleting=bool(meta.get("deletionTimestamp")),
        owner_pod_uid=_owner_pod(meta, errors),
        finalizers=tuple(str(f) for f in finalizers),
        requests=requests,
        constraints=tuple(constraints),
        config=tuple(
            _map(c, f"spec.devices.config[{i}]", errors)
            for i, c in enumerate(_seq(devices.get("config"), "spec.devices.config", errors))
        ),
        allocation=_allocation(status.get("allocation"), errors),
        reserved_for=tuple(reserved),
        device_conditions=_device_conditions(status, errors),
        errors=tuple(dict.fromkeys(errors)),
        raw=raw,
    )


def parse_resource_claim_template(obj: Any) -> ResourceClaimTemplate:
    errors: list[str] = []
    meta = _map(_map(obj, "resourceclaimtemplate", errors).get("metadata"), "metadata", errors)
    return ResourceClaimTemplate(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        resource_version=str(meta.get("resourceVersion", "")),
    )


def parse_pod_claims(
    spec: Mapping[str, Any], status: Mapping[str, Any], errors: list[str]
) -> tuple[tuple[PodClaim, ...], tuple[tuple[str, str | None], ...]]:
    """A pod's `spec.resourceClaims` and `status.resourceClaimStatuses` ((name, claim name;
    None where the controller decided no claim is needed))."""
    claims = []
    for i, c in enumerate(_seq(spec.get("resourceClaims"), "spec.resourceClaims", errors)):
        p = f"spec.resourceClaims[{i}]"
        m = _map(c, p, errors)
        claim_name = m.get("resourceClaimName")
        template = m.get("resourceClaimTemplateName")
        claims.append(
            PodClaim(
                name=_str(m.get("name"), f"{p}.name", errors),
                claim_name=_str(claim_name, f"{p}.resourceClaimName", errors)
                if claim_name is not None
                else None,
                template_name=(
                    _str(template, f"{p}.resourceClaimTemplateName", errors)
                    if template is not None
                    else None
                ),
            )
        )
    statuses = []
    for i, s in enumerate(
        _seq(status.get("resourceClaimStatuses"), "status.resourceClaimStatuses", errors)
    ):
        p = f"status.resourceClaimStatuses[{i}]"
        m = _map(s, p, errors)
        name = m.get("resourceClaimName")
        statuses.append(
            (
                _str(m.get("name"), f"{p}.name", errors),
                _str(name, f"{p}.resourceClaimName", errors) if name is not None else None,
            )
        )
    return tuple(claims), tuple(statuses)
