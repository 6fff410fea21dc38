"""The structured-parameters allocator: picks concrete devices for a pod's claims on one node,
with kube-scheduler v1.35's rules (its `incubating` allocator, the one its default feature
gates select: DRAPrioritizedList and DRAAdminAccess on, partitionable devices off). Device
taints are those `dra.taints` leaves on the devices (none while DRADeviceTaints is off).

The search is kube-scheduler's: claims in order, each claim's requests in order, each
request's devices one after another; for each required device, every device the node can
reach is tried in pool order (not in use, class and request selectors match, the claim's
constraints hold), recursing into the next one and backtracking when that fails. The first
full solution wins. `firstAvailable` requests try their subrequests in order. A request for
`All` devices takes every selectable device of the node's pools, which must then all be free.
With partitionable devices on (1.36 on), a device consuming counters is taken only while the
counter sets of its pool allow it (`dra.counters`); with them off, never.

Errors (an unknown selector or constraint type, a missing class, a CEL expression that does
not compile or fails at run time, a pool being updated under an `All` request) abort the
allocation with kube-scheduler's words (`AllocationError`); "no solution" is None.

Which of several equivalent devices gets picked is deterministic here (pools by driver and
name, slices by name, devices in slice order); kube-scheduler walks pools in map order, so
it may pick a different one of equivalent devices, never a different node verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from ascheduler.dra import messages
from ascheduler.dra.capacity import CapacityError
from ascheduler.dra.counters import CounterLedger, PoolCounters
from ascheduler.dra.distinct import DistinctAttribute
from ascheduler.dra.sharing import CapacityView, Session
from ascheduler.dra.taints import prevents_allocation
from ascheduler.features import (
    DRA_ADMIN_ACCESS,
    DRA_DEVICE_BINDING_CONDITIONS,
    DRA_PRIORITIZED_LIST,
    Features,
)
from ascheduler.model.affinity import NodeSelectorTerm
from ascheduler.model.dra import (
    ALL,
    ALLOCATION_RESULTS_MAX,
    EXACT_COUNT,
    AllocatedDevice,
    Allocation,
    AttributeValue,
    ClaimRequest,
    DeviceClass,
    Request,
    ResourceClaim,
    ResourceSlice,
    Semver,
)
from ascheduler.model.dra import Device as DeviceSpec
from ascheduler.model.dra_capacity import Amount

DeviceId = tuple[str, str, str]
#: (claim index, request index, subrequest index)
RequestKey = tuple[int, int, int]


class AllocationError(Exception):
    """Allocation cannot proceed for a reason in the claim, its classes or the slices (an
    error status in kube-scheduler: the pod's attempt fails, it is retried with backoff)."""


class Timeout(Exception):
    """The search on this node ran past its deadline (`filterTimeout`)."""


class InvalidPools(Exception):
    """No solution, and the node had a pool with duplicate device names (kube-scheduler's
    `invalid resource pools were encountered`, unschedulable on that node)."""


INVALID_POOLS: Final = "invalid resource pools were encountered"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A device one node can reach."""

    #: Its row in the device table (what selector results are cached by).
    index: int
    driver: str
    pool: str
    spec: DeviceSpec
    slice: ResourceSlice
    #: Its index in the slice's devices.
    position: int = 0

    @property
    def id(self) -> DeviceId:
        return (self.driver, self.pool, self.spec.name)


@dataclass(slots=True)
class Pool:
    """A pool as one node sees it (the slices of its newest generation that reach it)."""

    driver: str
    name: str
    incomplete: bool = False
    invalid: bool = False
    devices: list[Candidate] = field(default_factory=list)
    #: Its counter sets (`dra.counters`); None while partitionable devices are off.
    counters: PoolCounters | None = None

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


class Selectors(Protocol):
    """Evaluates a selector's CEL expression on a device (cached by the caller)."""

    def matches(self, expression: str, device: Candidate) -> bool:
        """Raises CompileError or EvalError (their text is the reason)."""


class CompileError(Exception):
    pass


class EvalError(Exception):
    pass


@dataclass(slots=True)
class _RequestData:
    request: Request
    parent: str  # the parent request's name for a subrequest, else ""
    klass: DeviceClass
    num_devices: int
    all_devices: list[Candidate] | None = None

    @property
    def name(self) -> str:
        return f"{self.parent}/{self.request.name}" if self.parent else self.request.name


@dataclass(slots=True)
class _Result:
    request: _RequestData
    device: Candidate
    #: A share of a device that allows multiple allocations (`dra.sharing`).
    share_id: str | None = None
    consumed: dict[str, Amount] | None = None


class _MatchAttribute:
    """All devices of the constraint's requests share one value of an attribute."""

    __slots__ = ("attribute", "count", "requests", "value")

    def __init__(self, requests: tuple[str, ...], attribute: str) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute
        self.value: AttributeValue | None = None
        self.count = 0

    def _applies(self, base: str, sub: str) -> bool:
        if not self.requests:
            return True
        return base in self.requests or (bool(sub) and f"{base}/{sub}" in self.requests)

    def add(self, base: str, sub: str, device: Candidate) -> bool:
        if not self._applies(base, sub):
            return True
        value = lookup_attribute(device, self.attribute)
        if value is None:
            return False
        if self.count == 0:
            self.value = value
            self.count = 1
            return True
        if not _same(value, self.value):
            return False
        self.count += 1
        return True

    def remove(self, base: str, sub: str) -> None:
        if self._applies(base, sub):
            self.count -= 1


def _same(a: AttributeValue, b: AttributeValue | None) -> bool:
    # Values compare only within one type (an int 1 never matches a bool true or "1").
    if type(a) is not type(b):
        return False
    if isinstance(a, Semver):
        assert isinstance(b, Semver)
        return a.text == b.text
    return a == b


def lookup_attribute(device: Candidate, name: str) -> AttributeValue | None:
    """A fully qualified attribute of a device; the driver's own domain may be left out in
    the slice."""
    attrs = device.spec.attributes
    if name in attrs:
        return attrs[name]
    domain, sep, ident = name.partition("/")
    if not sep or domain != device.driver:
        return None
    return attrs.get(ident)


def claim_ref(claim: ResourceClaim) -> str:
    return f"{claim.namespace}/{claim.name}"


def uses_disabled_features(claims: Sequence[ResourceClaim], features: Features) -> bool:
    """Whether a claim asks for what a gate that is off refuses (subrequests, admin access):
    kube-scheduler's allocator then fails the claims on every node, with the words
    `Allocator.validate` raises. The API server drops those fields from claims made while
    its gate is off; claims made before meet this."""
    prioritized = DRA_PRIORITIZED_LIST in features
    admin = DRA_ADMIN_ACCESS in features
    for claim in claims:
        for req in claim.requests:
            if req.first_available and not prioritized:
                return True
            if not admin and any(
                r is not None and r.admin_access for r in (req.exactly, *req.first_available)
            ):
                return True
    return False


class Allocator:
    """One search for one node: `allocate()` once."""

    def __init__(
        self,
        claims: Sequence[ResourceClaim],
        classes: Callable[[str], DeviceClass | None],
        selectors: Selectors,
        allocated: Callable[[DeviceId], bool],
        pools: Sequence[Pool],
        node_name: str,
        *,
        deadline: float | None = None,
        features: Features | None = None,
        capacity: CapacityView | None = None,
    ) -> None:
        self.claims = claims
        self.classes = classes
        self.selectors = selectors
        self.features = features if features is not None else Features.defaults()
        #: DRADeviceBindingConditions: devices with binding conditions may be allocated,
        #: their pools tried after the others
        #: (`plugins.dynamicresources.bindingconditions`).
        self.binding_conditions = DRA_DEVICE_BINDING_CONDITIONS in self.features
        #: With consumable capacity on: devices held alone are in use, shares are counted.
        self.session: Session | None = capacity.session() if capacity is not None else None
        self.allocated = capacity.allocated if capacity is not None else allocated
        self.pools = order_pools(pools) if self.binding_conditions else pools
        self.node_name = node_name
        self.requests: dict[RequestKey, _RequestData] = {}
        self.selected_sub: dict[tuple[int, int], int] = {}
        self.constraints: list[list[_MatchAttribute | DistinctAttribute]] = []
        self.allocating: dict[DeviceId, set[int]] = {}
        self.results: list[list[_Result]] = [[] for _ in claims]
        self._matches: dict[tuple[RequestKey, int], bool] = {}
        #: How many devices the search tried (kube-scheduler's allocateOne invocations).
        self.steps = 0
        #: time.monotonic() past which the search gives up (Timeout).
        self.deadline = deadline
        self._counters = {(p.driver, p.name): p.counters for p in pools}
        self._ledger = CounterLedger(allocated)

    # -- setup ---------------------------------------------------------------------------

    def _validate(self, key: RequestKey, request: Request, parent: str) -> _RequestData:
        claim = self.claims[key[0]]
        name = f"{parent}/{request.name}" if parent else request.name
        for i, selector in enumerate(request.selectors):
            if selector is None:
                raise AllocationError(
                    f"claim {claim_ref(claim)}, request {name}, selector #{i}: CEL expression "
                    "empty (unsupported selector type?)"
                )
        if request.admin_access and DRA_ADMIN_ACCESS not in self.features:
            raise AllocationError(
                f"claim {claim_ref(claim)}, request {name}: admin access is requested, but the "
                "feature is disabled"
            )
        if not request.class_name:
            raise AllocationError(
                f"claim {claim_ref(claim)}, request {name}: missing device class name "
                "(unsupported request type?)"
            )
        klass = self.classes(request.class_name)
        if klass is None:
            raise AllocationError(
                f"claim {claim_ref(claim)}, request {name}: could not retrieve device class "
                f'{request.class_name}: deviceclass.resource.k8s.io "{request.class_name}" '
                "not found"
            )
        data = _RequestData(request, parent, klass, 0)
        if request.mode == EXACT_COUNT:
            data.num_devices = request.count
        elif request.mode == ALL:
            devices: list[Candidate] = []
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocationError(
                        f"claim {claim_ref(claim)}, request {name}: asks for all devices, but "
                        f"resource pool {pool.id} is currently being updated"
                    )
                if pool.invalid:
                    raise AllocationError(
                        f"claim {claim_ref(claim)}, request {name}: asks for all devices, but "
                        f"resource pool {pool.id} is currently invalid"
                    )
                devices.extend(
                    d
                    for d in pool.devices
                    if self._selectable(key, data, d) and self._fits_unshared(key[0], data, d)
                )
            data.all_devices = devices
            data.num_devices = len(devices)
        else:
            raise AllocationError(
                f"claim {claim_ref(claim)}, request {name}: unsupported count mode {request.mode}"
            )
        return data

    def validate(self) -> None:
        """The claims' requests checked as the search's setup checks them (AllocationError,
        in kube-scheduler's order and words), without searching."""
        self._prepare()

    def _gates(self, claim: ResourceClaim, req: ClaimRequest) -> None:
        """A request's subrequests while DRAPrioritizedList is off, refused as kube-
        scheduler's allocator refuses them before the request's own validation. (Capacity
        requests with DRAConsumableCapacity off are refused only by some of its allocator
        variants, picked by the other gates; ascheduler ignores them, as the variant of each
        release's defaults does.)"""
        if req.first_available and DRA_PRIORITIZED_LIST not in self.features:
            raise AllocationError(
                f"claim {claim_ref(claim)}, request {req.name}: has subrequests, but the "
                "DRAPrioritizedList feature is disabled"
            )

    def _prepare(self) -> None:
        per_request = messages.claim_limit_per_request(self.features)
        for ci, claim in enumerate(self.claims):
            minimum = 0
            for ri, req in enumerate(claim.requests):
                self._gates(claim, req)
                if req.first_available:
                    least = None
                    for si, sub in enumerate(req.first_available):
                        data = self._validate((ci, ri, si), sub, req.name)
                        self.requests[(ci, ri, si)] = data
                        least = data.num_devices if least is None else min(least, data.num_devices)
                    adding = least or 0
                elif req.exactly is not None:
                    data = self._validate((ci, ri, 0), req.exactly, "")
                    self.requests[(ci, ri, 0)] = data
                    adding = data.num_devices
                else:
                    raise AllocationError(
                        f"claim {claim_ref(claim)}, request {req.name}: unknown request type"
                    )
                if per_request and adding > ALLOCATION_RESULTS_MAX - minimum:
                    raise AllocationError(
                        messages.claim_limit_error(
                            self.features,
                            claim_ref(claim),
                            req.name,
                            adding,
                            minimum,
                            ALLOCATION_RESULTS_MAX,
                        )
                    )
                minimum += adding
            if minimum > ALLOCATION_RESULTS_MAX:
                raise AllocationError(
                    messages.claim_limit_error(
                        self.features, claim_ref(claim), "", minimum, 0, ALLOCATION_RESULTS_MAX
                    )
                )
            constraints: list[_MatchAttribute | DistinctAttribute] = []
            for i, c in enumerate(claim.constraints):
                if c.match_attribute is None and c.distinct_attribute and self.session:
                    strict = self.session.rules.strict
                    constraints.append(
                        DistinctAttribute(
                            c.requests, c.distinct_attribute, lookup_attribute, strict=strict
                        )
                    )
                    continue
                if c.match_attribute is None:
                    raise AllocationError(
                        f"claim {claim_ref(claim)}, constraint #{i}: empty constraint "
                        "(unsupported constraint type?)"
                    )
                constraints.append(_MatchAttribute(c.requests, c.match_attribute))
            self.constraints.append(constraints)

    # -- selection -----------------------------------------------------------------------

    def _selectable(self, key: RequestKey, data: _RequestData, device: Candidate) -> bool:
        cache_key = (key, device.index)
        hit = self._matches.get(cache_key)
        if hit is not None:
            return hit
        if device.spec.binding_conditions and not self.binding_conditions:
            self._matches[cache_key] = False
            return False
        claim = self.claims[key[0]]
        ok = self._all_match(data.klass.selectors, device, f"class {data.klass.name}")
        if ok:
            ok = self._all_match(data.request.selectors, device, f"claim {claim_ref(claim)}")
        self._matches[cache_key] = ok
        return ok

    def _all_match(self, selectors: tuple[str | None, ...], device: Candidate, owner: str) -> bool:
        for i, expression in enumerate(selectors):
            if expression is None:
                raise AllocationError(f"{owner}: selector #{i}: CEL expression empty")
            try:
                if not self.selectors.matches(expression, device):
                    return False
            except CompileError as exc:
                raise AllocationError(f"{owner}: selector #{i}: CEL compile error: {exc}") from None
            except EvalError as exc:
                raise AllocationError(
                    messages.cel_runtime_error(self.features, owner, i, device.id, str(exc))
                ) from None
        return True

    def _capacity_error(
        self, ci: int, data: _RequestData, device: str, exc: CapacityError, what: str = "checking"
    ) -> AllocationError:
        return AllocationError(
            f"claim {claim_ref(self.claims[ci])}, request {data.request.name}: {what} capacity "
            f"for device {device}: {exc}"
        )

    def _fits_unshared(self, ci: int, data: _RequestData, device: Candidate) -> bool:
        """An All request lists only the devices its capacity asks fit unshared."""
        if self.session is None:
            return True
        try:
            return self.session.fits_unshared(data.request, device.spec)
        except CapacityError as exc:
            raise self._capacity_error(ci, data, device.spec.name, exc) from None

    def _fits(self, ci: int, data: _RequestData, device: Candidate) -> bool:
        if self.session is None:
            return True
        try:
            return self.session.fits(data.request, device)
        except CapacityError as exc:
            raise self._capacity_error(ci, data, "/".join(device.id), exc) from None

    def _in_use(self, device: DeviceId) -> bool:
        return self.allocated(device) or bool(self.allocating.get(device))

    def _take(self, ci: int, data: _RequestData, device: Candidate, must: bool) -> bool:
        """Mark the device allocated for the claim if it is free and its constraints hold."""
        claim = self.claims[ci]
        admin = bool(data.request.admin_access) and not data.parent
        multi = self.session is not None and device.spec.allow_multiple_allocations
        if admin:
            if not multi and ci in self.allocating.get(device.id, ()):
                return False
        elif self._in_use(device.id):
            return False
        if device.spec.taints and prevents_allocation(device.spec.taints, data.request.tolerations):
            return False
        if device.spec.consumes_counters and not self._take_counters(device):
            return False
        base, sub = (data.parent, data.request.name) if data.parent else (data.request.name, "")
        constraints = self.constraints[ci]
        for i, constraint in enumerate(constraints):
            if not constraint.add(base, sub, device):
                if must:
                    raise AllocationError(
                        f"claim {claim_ref(claim)}, request {data.request.name}: cannot add "
                        f"device {'/'.join(device.id)} because a claim constraint would not be "
                        "satisfied"
                    )
                for earlier in constraints[:i]:
                    earlier.remove(base, sub)
                self._give_back_counters(device)
                return False
        if not multi:
            self.allocating.setdefault(device.id, set()).add(ci)
        share_id, consumed = None, None
        if self.session is not None:
            try:
                ok = self.session.fits(data.request, device)
            except CapacityError as exc:
                self._undo(ci, base, sub, device, multi)
                what = "rechecking"
                raise self._capacity_error(ci, data, "/".join(device.id), exc, what) from None
            if not ok:
                self._undo(ci, base, sub, device, multi)
                return False
            if multi:
                share_id, consumed = self.session.take(data.request, device)
        self.results[ci].append(_Result(data, device, share_id, consumed))
        return True

    def _undo(self, ci: int, base: str, sub: str, device: Candidate, multi: bool) -> None:
        for constraint in self.constraints[ci]:
            constraint.remove(base, sub)
        self._give_back_counters(device)
        if not multi:
            self.allocating[device.id].discard(ci)

    def _give_back(self, ci: int, data: _RequestData, device: Candidate) -> None:
        base, sub = (data.parent, data.request.name) if data.parent else (data.request.name, "")
        for constraint in self.constraints[ci]:
            constraint.remove(base, sub)
        result = self.results[ci].pop()
        if result.consumed is not None and self.session is not None:
            self.session.give_back(device.id, result.consumed)
        elif device.id in self.allocating:
            self.allocating[device.id].discard(ci)
        self._give_back_counters(device)

    def _take_counters(self, device: Candidate) -> bool:
        """A counter-consuming device: never while partitionable devices are off, else only
        if its counters fit what is left (`dra.counters`)."""
        counters = self._counters.get((device.driver, device.pool))
        return counters is not None and self._ledger.take(counters, device.spec.consumes)

    def _give_back_counters(self, device: Candidate) -> None:
        counters = self._counters.get((device.driver, device.pool))
        if counters is not None and device.spec.consumes_counters:
            self._ledger.give_back(counters, device.spec.consumes)

    # -- the search ----------------------------------------------------------------------

    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool) -> bool:
        """kube-scheduler's allocateOne; raises _TooMany where the results limit was hit."""
        self.steps += 1
        if self.deadline is not None and not self.steps & 0xFF and time.monotonic() > self.deadline:
            raise Timeout
        if ci >= len(self.claims):
            return True
        claim = self.claims[ci]
        if ri >= len(claim.requests):
            try:
                return self._one(ci + 1, 0, 0, 0, False)
            except _TooMany:
                return False
        data = self.requests[(ci, ri, si)]
        if not in_sub and data.parent:
            all_too_many = True
            sub = 0
            while (ci, ri, sub) in self.requests:
                try:
                    done = self._one(ci, ri, sub, di, True)
                except _TooMany:
                    sub += 1
                    continue
                all_too_many = False
                if done:
                    self.selected_sub[(ci, ri)] = sub
                    return True
                sub += 1
            if all_too_many:
                raise _TooMany
            return False
        request = data.request
        if request.mode == ALL and not data.all_devices:
            return False
        if di >= data.num_devices:
            return self._one(ci, ri + 1, 0, 0, False)
        if len(self.results[ci]) + data.num_devices - di > ALLOCATION_RESULTS_MAX:
            raise _TooMany
        if request.mode == ALL:
            assert data.all_devices is not None
            device = data.all_devices[di]
            if not self._take(ci, data, device, True):
                return False
            try:
                done = self._one(ci, ri, si, di + 1, in_sub)
            except BaseException:
                self._give_back(ci, data, device)
                raise
            if not done:
                self._give_back(ci, data, device)
            return done
        admin = bool(request.admin_access) and not data.parent
        key = (ci, ri, si)
        for pool in self.pools:
            if pool.incomplete or pool.invalid:
                continue
            for device in pool.devices:
                if admin:
                    if ci in self.allocating.get(device.id, ()):
                        continue
                elif self._in_use(device.id):
                    continue
                if not self._selectable(key, data, device):
                    continue
                if not self._fits(ci, data, device):
                    continue
                if not self._take(ci, data, device, False):
                    continue
                try:
                    done = self._one(ci, ri, si, di + 1, in_sub)
                except BaseException:
                    self._give_back(ci, data, device)
                    raise
                if done:
                    return True
                self._give_back(ci, data, device)
        return False

    def allocate(self) -> list[Allocation] | None:
        """One allocation per claim, or None when the node has no solution (InvalidPools
        when it also had an invalid pool)."""
        self._prepare()
        try:
            done = self._one(0, 0, 0, 0, False)
        except _TooMany:
            done = False
        if not done:
            if any(p.invalid for p in self.pools):
                raise InvalidPools(INVALID_POOLS)
            return None
        return [self._result(ci) for ci in range(len(self.claims))]

    # -- results -------------------------------------------------------------------------

    def _result(self, ci: int) -> Allocation:
        claim = self.claims[ci]
        devices = tuple(
            AllocatedDevice(
                request=r.request.name,
                driver=r.device.driver,
                pool=r.device.pool,
                device=r.device.spec.name,
                admin_access=True
                if (r.request.request.admin_access and not r.request.parent)
                else None,
                tolerations=r.request.request.tolerations,
                binding_conditions=r.device.spec.binding_conditions
                if self.binding_conditions
                else (),
                binding_failure_conditions=r.device.spec.binding_failure_conditions
                if self.binding_conditions
                else (),
                share_id=r.share_id,
                consumed_capacity=r.consumed,
            )
            for r in self.results[ci]
        )
        config: list[Mapping[str, Any]] = []
        class_ranges: dict[str, tuple[int, int]] = {}
        for ri, req in enumerate(claim.requests):
            si = self.selected_sub.get((ci, ri), 0) if req.first_available else 0
            data = self.requests[(ci, ri, si)]
            name = data.name
            span = class_ranges.get(data.klass.name)
            if span is not None:
                for i in range(*span):
                    entry = dict(config[i])
                    entry["requests"] = [*entry["requests"], name]
                    config[i] = entry
                continue
            start = len(config)
            for c in data.klass.config:
                config.append({"source": "FromClass", "requests": [name], **c})
            class_ranges[data.klass.name] = (start, len(config))
        for c in claim.config:
            wanted = c.get("requests") or []
            entry = {k: v for k, v in c.items() if k != "requests"}
            if not wanted:
                config.append({"source": "FromClaim", **entry})
                continue
            for ri, req in enumerate(claim.requests):
                if req.name in wanted:
                    config.append({"source": "FromClaim", "requests": list(wanted), **entry})
                    continue
                if not req.first_available:
                    continue
                sub = req.first_available[self.selected_sub.get((ci, ri), 0)]
                if f"{req.name}/{sub.name}" in wanted:
                    config.append({"source": "FromClaim", "requests": list(wanted), **entry})
        return Allocation(
            devices=devices,
            config=tuple(config),
            node_selector=self._node_selector(ci),
        )

    def _node_selector(self, ci: int) -> dict[str, Any] | None:
        fields: list[Any] = []
        expressions: list[Any] = []
        for r in self.results[ci]:
            s = r.device.slice
            # With per-device node selection, the device says where it is.
            where = r.device.spec if s.per_device_node_selection else s
            if where.node_name or (self.binding_conditions and r.device.spec.binds_to_node):
                return {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {
                                    "key": "metadata.name",
                                    "operator": "In",
                                    "values": [where.node_name or self.node_name],
                                }
                            ]
                        }
                    ]
                }
            raw = _raw_terms(where.node_terms)
            if raw is None or len(raw) != 1:
                continue
            for target, source in ((fields, "matchFields"), (expressions, "matchExpressions")):
                for req in raw[0].get(source) or ():
                    if not any(_same_requirement(req, have) for have in target):
                        target.append(req)
        if not fields and not expressions:
            return None
        term: dict[str, Any] = {}
        if fields:
            term["matchFields"] = fields
        if expressions:
            term["matchExpressions"] = expressions
        return {"nodeSelectorTerms": [term]}


def _raw_terms(terms: tuple[NodeSelectorTerm, ...] | None) -> list[Mapping[str, Any]] | None:
    if terms is None:
        return None
    return [
        {
            **({"matchExpressions": [_req(r) for r in t.expressions]} if t.expressions else {}),
            **({"matchFields": [_req(r) for r in t.fields]} if t.fields else {}),
        }
        for t in terms
    ]


def _req(r: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"key": r.key, "operator": r.operator}
    if r.values:
        out["values"] = list(r.values)
    return out


def _same_requirement(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return (
        a.get("key") == b.get("key")
        and a.get("operator") == b.get("operator")
        and set(a.get("values") or ()) == set(b.get("values") or ())
    )


class _TooMany(Exception):
    """The claim's results would exceed ALLOCATION_RESULTS_MAX (backtrack harder)."""


def order_pools(pools: Sequence[Pool]) -> list[Pool]:
    """Pools with a device that has binding conditions last, each group in its order
    (kube-scheduler 1.36+'s incubating allocator, `GatherPools`: a first-fit search then
    prefers devices that need no wait at PreBind)."""
    ready = [p for p in pools if not any(d.spec.binding_conditions for d in p.devices)]
    waiting = [p for p in pools if any(d.spec.binding_conditions for d in p.devices)]
    return ready + waiting
