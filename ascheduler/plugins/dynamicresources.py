"""DynamicResources: a pod's ResourceClaims must be allocated devices its node can reach
(kube-scheduler v1.35's plugin, structured parameters, its default feature gates).

PreEnqueue holds a pod until every claim it names exists: `resourceClaimName` directly, a
`resourceClaimTemplateName` once the resourceclaim controller has created the claim and
written its name into `status.resourceClaimStatuses` (the claim must be owned by the pod).
PreFilter rejects a pod whose claims are being deleted, reserved for 256 consumers already,
being allocated by an earlier cycle, or name a DeviceClass that does not exist.

Filter, as columns over the nodes: an allocated claim admits the nodes its allocation's node
selector admits (`resourceclaim not available on the node`); claims to allocate are counted
per node from the device table (`dra.store`): for each request, the devices its class and
request selectors select that are free and reachable from the node. Where requests cannot
compete for a device (one request, or candidate sets that do not overlap) and no constraint
ties them, a node fits exactly when each request's count is met (its first fitting
`firstAvailable` subrequest is the one the search would take); otherwise the nodes that pass
the counts run the exact search (`dra.allocator`) one by one, under the per-node deadline
`filterTimeout` (`timed out trying to allocate devices`). A node that fails says `cannot
allocate all claims` (or `invalid resource pools were encountered`), unresolvable as in
kube-scheduler, so preemption never evicts pods for devices.

Score: kube-scheduler's preference for earlier `firstAvailable` subrequests (8 - index per
request), normalized. Reserve runs the exact search for the chosen node and holds its
allocation in memory (in flight: no other pod gets those devices); Unreserve drops it.
PreBind writes each claim: the finalizer (an update), then `status.allocation` and the pod in
`status.reservedFor` (an update of the status with the claim's resourceVersion, so a
concurrent writer conflicts instead of being overwritten; on a conflict the claim is read
again and the write retried unless someone allocated it meanwhile). A claim already reserved
for the pod is reused only if its allocation admits the node being bound: several instances
on one schedulerName may run binding cycles for one pod at once, and the allocation decides
where the pod may go (`dra.reservations`); otherwise PreBind fails and the pod is tried again.
Unreserve undoes only the claim writes of its own cycle, and only those the pod will not use,
as the API server shows the pod: none once it is bound where the allocation admits it. With
node locks on, new allocations are written under the locks of their node and network-attached
pools, after the API server's claims show none of their devices taken (`locks.devicelocks`),
so several instances never allocate one device twice. PostFilter deallocates one allocated
claim that kept the pod off every node and that no other pod uses, as kube-scheduler does, so
the next attempt can allocate it afresh.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import structlog

from ascheduler.dra.allocator import (
    INVALID_POOLS,
    AllocationError,
    Allocator,
    InvalidPools,
    Timeout,
)
from ascheduler.dra.reservations import Placed, Reuse, placed, release, reuse
from ascheduler.dra.store import DeviceTable, ResourceObjects
from ascheduler.framework import (
    DEVICE_POOL_LABEL_PREFIX,
    DeviceTaken,
    Known,
    KubeClient,
    KubeError,
    LockContended,
    lock_wait_message,
    pool_label,
)
from ascheduler.framework.args import Seconds
from ascheduler.framework.errors import PluginArgsError
from ascheduler.framework.handle import Handle
from ascheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    ExplainFilterPlugin,
    FilterResult,
    GateKeysPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHintPlugin,
    Rejection,
    ReservePlugin,
    ScorePlugin,
    Status,
    default_normalize,
)
from ascheduler.framework.nodes import BoolArray, IntArray, NodeTable
from ascheduler.framework.registry import Registration
from ascheduler.model import PodInfo
from ascheduler.model.dra import (
    ALL,
    ALLOCATION_RESULTS_MAX,
    FINALIZER,
    FIRST_AVAILABLE_MAX,
    Allocation,
    Request,
    ResourceClaim,
    parse_resource_claim,
)

log = structlog.get_logger(__name__)

NAME: Final = "DynamicResources"
CANNOT_ALLOCATE: Final = "cannot allocate all claims"
NOT_AVAILABLE: Final = "resourceclaim not available on the node"
TIMED_OUT: Final = "timed out trying to allocate devices"
#: Why a pod waits before its cycle (PreEnqueue; never shown as a condition).
SELECTORS_PENDING: Final = "waiting for costly device selectors to be evaluated"
#: Where explain keeps the per-node device counts of the claims to allocate.
_COUNTS: Final = f"{NAME}/explain-counts"
IN_USE: Final = "resourceclaim in use"
NO_NEW_CLAIMS: Final = "no new claims to deallocate"
#: The error kube-scheduler's cycle state gives for a key never written.
STATE_NOT_FOUND: Final = "not found"
STILL_NOT: Final = "still not schedulable"
DEALLOCATED: Final = "deallocation of ResourceClaim completed"
CLAIM_NOT_CREATED: Final = "ResourceClaim not created yet"
API_UNSUPPORTED: Final = "none of the supported fields are set"
#: How often PreBind retries a claim write that conflicted (client-go's DefaultRetry).
WRITE_ATTEMPTS: Final = 5


DEFAULT_FILTER_TIMEOUT: Final = Seconds(10.0)


@dataclass(frozen=True, slots=True)
class DynamicResourcesArgs:
    """kube-scheduler's `DynamicResourcesArgs`: `filterTimeout` (DRASchedulerFilterTimeout,
    on by default: 10s, 0 turns it off) bounds the search on one node. `bindingTimeout`
    belongs to device binding conditions, alpha and off: setting it is refused, as
    kube-scheduler refuses it."""

    filter_timeout: Seconds = DEFAULT_FILTER_TIMEOUT
    binding_timeout: Seconds | None = None

    def __post_init__(self) -> None:
        if self.filter_timeout < 0:
            raise PluginArgsError("filterTimeout: must be zero or positive")
        if self.binding_timeout is not None:
            raise PluginArgsError(
                "bindingTimeout: Forbidden: DRADeviceBindingConditions or "
                "DRAResourceClaimDeviceStatus feature gate is disabled"
            )


class ClaimsUnavailable(Exception):
    """A pod's claims cannot be resolved (the message is kube-scheduler's)."""


def go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def pod_claims(pod: PodInfo, objects: ResourceObjects) -> list[ResourceClaim]:
    """The claims of `pod`, in `spec.resourceClaims` order, skipping those the controller
    decided need no claim; ClaimsUnavailable with kube-scheduler's message otherwise."""
    out = []
    for pc in pod.resource_claims:
        must_own = False
        if pc.claim_name is not None:
            name: str | None = pc.claim_name
        elif pc.template_name is not None:
            for claim_of, generated in pod.claim_statuses:
                if claim_of == pc.name:
                    name, must_own = generated, True
                    break
            else:
                raise ClaimsUnavailable(f'pod "{pod.namespace}/{pod.name}": {CLAIM_NOT_CREATED}')
        else:
            raise ClaimsUnavailable(
                f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim {go_quote(pc.name)}: '
                f"{API_UNSUPPORTED}"
            )
        if name is None:
            continue
        claim = objects.claim(pod.namespace, name)
        if claim is None:
            raise ClaimsUnavailable(f"resourceclaim.resource.k8s.io {go_quote(name)} not found")
        if claim.deleting:
            raise ClaimsUnavailable(f"resourceclaim {go_quote(claim.name)} is being deleted")
        if must_own and claim.owner_pod_uid != pod.uid:
            raise ClaimsUnavailable(
                f"ResourceClaim {claim.namespace}/{claim.name} was not created for pod "
                f"{pod.namespace}/{pod.name} (pod is not owner)"
            )
        out.append(claim)
    return out


@dataclass(slots=True)
class _Counted:
    """A request (or subrequest) counted per node: how many devices it needs, and per row how
    many it can have."""

    key: tuple[int, int, int]
    request: Request
    candidates: BoolArray  # per device row
    errors: BoolArray  # per device row: a selector failed on it
    counts: IntArray  # per node row
    all_selected: IntArray | None = None  # per node row, All requests: every selected device


def _pool_labels(labels: Any, allocation: Allocation) -> dict[str, str]:
    """A claim's labels with one per pool `allocation` draws from (`locks.devicelocks`), and none
    left from an earlier allocation."""
    out = {
        str(k): str(v)
        for k, v in (labels.items() if isinstance(labels, dict) else ())
        if not str(k).startswith(DEVICE_POOL_LABEL_PREFIX)
    }
    for d in allocation.devices:
        out[pool_label(d.driver, d.pool)] = "true"
    return out


@dataclass(slots=True)
class _State:
    claims: list[ResourceClaim]
    to_allocate: list[int]
    #: Per claim: the node selector terms of its allocation (None: any node).
    available_on: list[Any]
    unavailable: set[int] = field(default_factory=set)
    #: Per node row: the firstAvailable score (None: nothing to score).
    scores: IntArray | None = None
    #: Exact allocations found by Filter's search, by node name.
    found: dict[str, list[Allocation]] = field(default_factory=dict)
    #: Set by Reserve, written by PreBind (claim index -> allocation).
    allocations: dict[int, Allocation] = field(default_factory=dict)
    #: The claims whose reservation PreBind wrote, with the allocation it wrote beside it
    #: (None: the claim was allocated already): all a failed cycle may undo.
    written: dict[int, Allocation | None] = field(default_factory=dict)


class DynamicResources(
    PreEnqueuePlugin,
    GateKeysPlugin,
    PreFilterPlugin,
    ExplainFilterPlugin,
    PostFilterPlugin,
    ScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    QueueingHintPlugin,
):
    name = NAME

    def __init__(self, args: DynamicResourcesArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.objects: ResourceObjects = handle.resources
        self.selectors = handle.resources.selectors
        self._cleanups: set[asyncio.Task[None]] = set()
        #: Per pod uid: the undoing of a failed cycle's claim writes, which the pod's next
        #: PreBind waits for (it could otherwise reuse a reservation about to go).
        self._releasing: dict[str, asyncio.Task[None]] = {}

    # -- queueing ------------------------------------------------------------------------

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.resource_claims:
            return SUCCESS
        try:
            claims = pod_claims(pod, self.objects)
        except ClaimsUnavailable as exc:
            return Status.unschedulable(str(exc), resolvable=False)
        if not self._selectors_known(pod, claims):
            return Status.unschedulable(SELECTORS_PENDING, resolvable=False)
        return SUCCESS

    def _selectors_known(self, pod: PodInfo, claims: Sequence[ResourceClaim]) -> bool:
        """Whether the costly selectors of the claims to allocate have their results for
        every device (`dra.cel`); if not, their evaluation starts off the event loop and the
        pod is woken when it ends. One with no loop to run on (a dry run) is never known."""
        expressions: list[str] = []
        for claim in claims:
            if claim.allocation is not None:
                continue
            for req in claim.requests:
                for sub in req.first_available or ((req.exactly,) if req.exactly else ()):
                    klass = self.objects.device_class(sub.class_name)
                    if klass is not None:
                        expressions += [e for e in klass.selectors if e is not None]
                    expressions += [e for e in sub.selectors if e is not None]
        if not any(self.selectors.costly(e) for e in expressions):
            return True
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        uid = pod.uid
        timeout = self.args.filter_timeout
        return self.selectors.ensure(
            expressions,
            self.objects.table(),
            timeout=timeout if timeout > 0 else None,
            done=lambda: self.handle.wake((uid,)),
        )

    def gate_keys(self, pod: PodInfo, event: ClusterEvent) -> frozenset[str] | None:
        """A pod held back waits for the claims it names to exist (or to stop being
        deleted): only events about those claims can let it in, no node, slice or class
        event can. (A claim a template will make has no name until the pod's status gives it
        one: that is an update of the pod itself, which always asks PreEnqueue again.)"""
        if event not in (ClusterEvent.RESOURCE_CLAIM_ADD, ClusterEvent.RESOURCE_CLAIM_UPDATE):
            return frozenset()
        names = [pc.claim_name for pc in pod.resource_claims if pc.claim_name is not None]
        names += [generated for _, generated in pod.claim_statuses if generated is not None]
        return frozenset(f"{pod.namespace}/{name}" for name in names)

    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        if event in (ClusterEvent.RESOURCE_CLAIM_ADD, ClusterEvent.RESOURCE_CLAIM_UPDATE):
            return self._claim_hint(pod, old, new)
        return True

    def _claim_hint(self, pod: PodInfo, old: ResourceClaim | None, new: ResourceClaim) -> bool:
        """kube-scheduler's isSchedulableAfterClaimChange."""
        try:
            claims = pod_claims(pod, self.objects)
        except ClaimsUnavailable:
            return False
        if old is not None and old.allocation is not None and new.allocation is None:
            return True  # deallocated: its devices may be free now
        if not any(c.uid == new.uid for c in claims):
            return False
        if old is None:
            return True
        return bool(_status(old) != _status(new))

    # -- scheduling cycle ----------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        # As kube-scheduler's plugin does: an empty state first, recording that PreFilter ran
        # (PostFilter tells that from not having run); the claims join it if PreFilter passes.
        state.write(NAME, _State([], [], []))
        if not pod.resource_claims:
            return None, SKIP
        try:
            claims = pod_claims(pod, self.objects)
        except ClaimsUnavailable as exc:
            return None, Status.unschedulable(str(exc), resolvable=False)
        if not claims:
            return None, SKIP
        s = _State(claims, [], [None] * len(claims))
        for i, claim in enumerate(claims):
            if claim.errors:
                return None, Status.unschedulable(
                    f"resourceclaim {claim.namespace}/{claim.name}: {claim.errors[0]}",
                    resolvable=False,
                )
            if claim.allocation is not None:
                if not claim.can_be_reserved and not claim.reserved_for_pod(pod.uid):
                    return None, Status.unschedulable(IN_USE, resolvable=False)
                s.available_on[i] = claim.allocation.node_terms
                continue
            s.to_allocate.append(i)
            if self.objects.has_pending_allocation(claim.uid):
                return None, Status.unschedulable(
                    f"resource claim {claim.namespace}/{claim.name} is in the process of being "
                    "allocated",
                    resolvable=False,
                )
            status = self._check_requests(claim)
            if not status.ok:
                return None, status
        # A slice changed since PreEnqueue: the costly results missing count as timed out
        # on their nodes this time, and the pod is woken once they are known.
        self._selectors_known(pod, [s.claims[i] for i in s.to_allocate])
        state.write(NAME, s)
        return None, SUCCESS

    def _check_requests(self, claim: ResourceClaim) -> Status:
        """Every request's classes exist (the claim limit is the allocator's, at Filter, as
        in kube-scheduler)."""
        for req in claim.requests:
            if req.exactly is not None:
                status = self._check_class(req.exactly.class_name, req.name)
            elif req.first_available:
                status = SUCCESS
                for sub in req.first_available:
                    status = self._check_class(sub.class_name, f"{req.name}/{sub.name}")
                    if not status.ok:
                        break
            else:
                return Status.unschedulable(
                    f"resource claim {claim.namespace}/{claim.name}, request {req.name}: "
                    "unknown request type",
                    resolvable=False,
                )
            if not status.ok:
                return status
        return SUCCESS

    def _check_class(self, name: str, request: str) -> Status:
        if not name:
            return Status.error(f"request {request}: unsupported request type")
        if self.objects.device_class(name) is None:
            return Status.unschedulable(
                f"request {request}: device class {name} does not exist", resolvable=False
            )
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        s: _State | None = state.read(NAME)
        if s is None:
            return None
        n = nodes.n
        not_available = np.zeros(n, dtype=np.bool_)
        for i, terms in enumerate(s.available_on):
            if terms is None:
                continue
            rows = _terms_rows(nodes, terms)
            if not rows.all():
                s.unavailable.add(i)
                not_available |= ~rows
        rejections: list[Rejection] = []
        rejected = not_available.copy()
        if not_available.any():
            rejections.append(
                Rejection(NOT_AVAILABLE, not_available, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
            )
        if s.to_allocate:
            try:
                extra = self._filter_allocations(s, nodes, ~rejected)
            except AllocationError as exc:
                return FilterResult.single(str(exc), np.ones(n, dtype=np.bool_), Code.ERROR)
            for reason, rows in extra:
                rejections.append(Rejection(reason, rows, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
                rejected |= rows
        return FilterResult.of(rejected, *rejections)

    def _filter_allocations(
        self, s: _State, nodes: NodeTable, open_rows: BoolArray
    ) -> list[tuple[str, BoolArray]]:
        """The rejections of the claims to allocate, over the rows still open."""
        n = nodes.n
        table = self.objects.table()
        claims = [s.claims[i] for i in s.to_allocate]
        device_rows = _device_rows(nodes, table)
        counted = self._count_claims(claims, table, nodes, device_rows)
        # Necessary per request: some subrequest can have its devices.
        fits = open_rows.copy()
        for per_request in counted:
            for subs in per_request:
                fits &= np.logical_or.reduce([_enough(c) for c in subs]) if subs else True
        exact_needed = _needs_search(claims, counted)
        errors = np.zeros(n, dtype=np.bool_)
        for per_request in counted:
            for subs in per_request:
                for c in subs:
                    if c.errors.any():
                        errors |= _rows_with(nodes, table, device_rows, c.errors)
        has_all = any(c.request.mode == ALL for pr in counted for subs in pr for c in subs)
        invalid_rows = _rows_with_pools(nodes, table, device_rows, incomplete=False)
        # The search decides where counting may be wrong, and where it fails the pod as
        # kube-scheduler's does: a selector failed on a device, a claim asks for more devices
        # than a claim may have, an All request meets a pool being updated or invalid.
        search = open_rows & errors
        if exact_needed:
            search |= fits
        search |= open_rows & _over_limit(counted, n)
        if has_all:
            incomplete = _rows_with_pools(nodes, table, device_rows, incomplete=True)
            search |= open_rows & (incomplete | invalid_rows)
        if not exact_needed:
            s.scores = _first_available_scores(claims, counted, n)
        cannot = open_rows & ~fits & ~search
        timed_out = np.zeros(n, dtype=np.bool_)
        invalid = cannot & invalid_rows
        cannot &= ~invalid_rows
        if search.any():
            if s.scores is None:
                s.scores = np.zeros(n, dtype=np.int64)
            deadline = self.args.filter_timeout
            for row in np.flatnonzero(search).tolist():
                info = nodes.infos[row]
                allocator = Allocator(
                    claims,
                    self.objects.device_class,
                    self.selectors,
                    self.objects.allocated,
                    table.pools_for(info.name, info.labels),
                    info.name,
                    deadline=time.monotonic() + deadline if deadline > 0 else None,
                )
                try:
                    found = allocator.allocate()
                except InvalidPools:
                    invalid[row] = True
                    continue
                except Timeout:
                    timed_out[row] = True
                    continue
                if found is None:
                    cannot[row] = True
                    continue
                s.found[info.name] = found
                s.scores[row] = _score_of(claims, found)
        return [(CANNOT_ALLOCATE, cannot), (INVALID_POOLS, invalid), (TIMED_OUT, timed_out)]

    def explain(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> list[str]:
        """An allocated claim whose devices the node cannot reach; per request of the claims
        to allocate, the devices it needs and how many of those its class and selectors
        select that are free and reachable from the node."""
        s: _State | None = state.read(NAME)
        if s is None:
            return []
        lines = []
        for i, terms in enumerate(s.available_on):
            if terms is not None and not _terms_rows(nodes, terms)[row]:
                lines.append(
                    f"resourceclaim {s.claims[i].name} is allocated devices this node cannot reach"
                )
        if not s.to_allocate or nodes.names[row] in s.found:
            return lines
        counted: list[list[list[_Counted]]] | None = state.read(_COUNTS)
        if counted is None:
            counted = self._explain_counts(s, nodes)
            state.write(_COUNTS, counted)
        short = False
        for ci, per_request in enumerate(counted):
            claim = s.claims[s.to_allocate[ci]]
            for subs in per_request:
                if not subs or any(_enough(c)[row] for c in subs):
                    continue
                short = True
                lines.append(
                    f"resourceclaim {claim.name}: " + "; or ".join(_need(c, row) for c in subs)
                )
        if not short:
            lines.append(
                "each request's devices are here, but no allocation of them meets the claims' "
                "constraints together (or the search timed out)"
            )
        return lines

    def _explain_counts(self, s: _State, nodes: NodeTable) -> list[list[list[_Counted]]]:
        table = self.objects.table()
        claims = [s.claims[i] for i in s.to_allocate]
        return self._count_claims(claims, table, nodes, _device_rows(nodes, table))

    def _count_claims(
        self,
        claims: Sequence[ResourceClaim],
        table: DeviceTable,
        nodes: NodeTable,
        device_rows: IntArray,
    ) -> list[list[list[_Counted]]]:
        """Per claim, per request, per subrequest: its devices counted on every node."""
        counted = []
        for ci, claim in enumerate(claims):
            per_request = []
            for ri, req in enumerate(claim.requests):
                wanted = req.first_available or ((req.exactly,) if req.exactly else ())
                per_request.append(
                    [
                        self._count(table, nodes, device_rows, (ci, ri, si), claim, sub)
                        for si, sub in enumerate(wanted)
                    ]
                )
            counted.append(per_request)
        return counted

    def _count(
        self,
        table: DeviceTable,
        nodes: NodeTable,
        device_rows: IntArray,
        key: tuple[int, int, int],
        claim: ResourceClaim,
        request: Request,
    ) -> _Counted:
        klass = self.objects.device_class(request.class_name)
        selected = table.usable.copy()
        errors = np.zeros(table.n, dtype=np.bool_)
        if klass is not None:
            for expression in (*klass.selectors, *request.selectors):
                if expression is None:
                    raise AllocationError(
                        f"claim {claim.namespace}/{claim.name}, request {request.name}: CEL "
                        "expression empty (unsupported selector type?)"
                    )
                match, failed = self.selectors.column(expression, table, selected)
                errors |= failed
                selected &= match
        free = selected if request.admin_access else selected & ~table.allocated
        counts = _per_node(nodes, table, device_rows, free)
        all_selected = None
        if request.mode == ALL:
            all_selected = _per_node(nodes, table, device_rows, selected)
        return _Counted(key, request, free, errors & ~table.allocated, counts, all_selected)

    def post_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, diagnosis: Diagnosis
    ) -> PostFilterResult:
        s: _State | None = state.read(NAME)
        if s is None:
            # PreFilter never ran: an earlier PreFilter rejected the pod outright. kube-
            # scheduler's plugin fails reading its state, and that error ends PostFilter (no
            # preemption), its text closing the pod's message.
            return PostFilterResult(Status.error(STATE_NOT_FOUND))
        if not s.claims:
            return PostFilterResult(Status.unschedulable(NO_NEW_CLAIMS))
        for i in sorted(s.unavailable):
            claim = s.claims[i]
            users = claim.reserved_for
            if not users or (len(users) == 1 and users[0].uid == pod.uid):
                if not state.dry_run:
                    self._spawn(self._deallocate(claim))
                return PostFilterResult(Status.unschedulable(DEALLOCATED))
        return PostFilterResult(Status.unschedulable(STILL_NOT))

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        """Score without PreScore, as kube-scheduler's: never skipped, so a pod without
        claims, or whose claims have no `firstAvailable` choice, scores 0 on every node."""
        s: _State | None = state.read(NAME)
        if s is None or s.scores is None:
            return np.zeros(feasible.size, dtype=np.int64)
        out: IntArray = s.scores[feasible]
        return out

    def normalize(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize(scores)

    # -- reserve -------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        s: _State | None = state.read(NAME)
        if s is None or not s.to_allocate:
            return SUCCESS
        found: list[Allocation] | Status | None = s.found.get(node)
        if found is None:
            found = self._allocate_on(s, node)
        if isinstance(found, Status):
            return found
        for i, allocation in zip(s.to_allocate, found, strict=True):
            s.allocations[i] = allocation
            claim = s.claims[i]
            finalizers = (
                claim.finalizers
                if FINALIZER in claim.finalizers
                else (*claim.finalizers, FINALIZER)
            )
            self.objects.signal_pending(
                dataclasses.replace(claim, allocation=allocation, finalizers=finalizers)
            )
        return SUCCESS

    def _allocate_on(self, s: _State, node: str) -> list[Allocation] | Status:
        info = self.handle.nodes.node(node)
        if info is None:
            return Status.error(f"node {node} not found")
        table = self.objects.table()
        allocator = Allocator(
            [s.claims[i] for i in s.to_allocate],
            self.objects.device_class,
            self.selectors,
            self.objects.allocated,
            table.pools_for(info.name, info.labels),
            info.name,
        )
        try:
            found = allocator.allocate()
        except (AllocationError, InvalidPools) as exc:
            return Status.error(str(exc))
        except Timeout:
            return Status.error(TIMED_OUT)
        if found is None:
            return Status.error("claim allocation not found for node")
        return found

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        s: _State | None = state.read(NAME)
        if s is None:
            return
        for claim in s.claims:
            if self.objects.remove_pending(claim.uid):
                self.objects.restore(claim.namespace, claim.name)
        # Only what this cycle wrote is undone (`dra.reservations`): a reservation found in
        # place may be another instance's, for a bind of this pod that is going through.
        written = [(s.claims[i], ours) for i, ours in sorted(s.written.items())]
        s.written.clear()
        if written:
            self._spawn_release(pod, written)

    # -- binding cycle -------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        s: _State | None = state.read(NAME)
        if s is None:
            return SUCCESS
        locks = self.handle.device_locks
        if locks is None or not s.allocations:
            return await self._write_claims(s, pod, node)
        local, pools = self._lock_targets(s)
        busy = [
            d.device_id for a in s.allocations.values() for d in a.devices if not d.admin_access
        ]
        try:
            cached = self.handle.nodes.node(node)
            known = (
                Known(cached.resource_version, cached.annotations) if cached is not None else None
            )
            async with locks.hold(node if local else None, pools, pod, known=known) as held:
                await locks.check(busy, [s.claims[i].uid for i in s.allocations])
                if not held.writable():
                    return Status.error("device locks: the hold ran out of time")
                async with asyncio.timeout(held.remaining()):
                    return await self._write_claims(s, pod, node)
        except DeviceTaken as exc:
            log.info("device_taken", pod=pod.key, node=node, error=str(exc))
            return Status.error(f"{exc} (by another scheduler)")
        except LockContended as exc:  # another instance allocates there: wait, no error
            return Status.pending(f"device lock: {lock_wait_message(node, exc)}")
        except KubeError as exc:
            return Status.error(f"device lock: {exc}")
        except TimeoutError:
            return Status.error("device locks: the claim writes were cut off with the hold")

    def _lock_targets(self, s: _State) -> tuple[bool, list[tuple[str, str]]]:
        """Whether the new allocations use node-local devices, and the network-attached pools
        they draw from (a device no longer in the table counts as both)."""
        table = self.objects.table()
        local = False
        pools: set[tuple[str, str]] = set()
        for allocation in s.allocations.values():
            for d in allocation.devices:
                if d.admin_access:
                    continue
                row = table.index.get(d.device_id)
                if row is None or table.node_of[row]:
                    local = True
                if row is None or not table.node_of[row]:
                    pools.add((d.driver, d.pool))
        return local, sorted(pools)

    def _labels(self, node: str) -> Mapping[str, str]:
        """A node's labels as the cache has them (none for a node it does not know: a term
        naming the node still matches it)."""
        info = self.handle.nodes.node(node)
        return info.labels if info is not None else {}

    async def _write_claims(self, s: _State, pod: PodInfo, node: str) -> Status:
        releasing = self._releasing.get(pod.uid)
        if releasing is not None:
            await asyncio.wait({releasing})
        labels = self._labels(node)
        for i, claim in enumerate(s.claims):
            current = self.objects.claim(claim.namespace, claim.name) or claim
            if current.uid == claim.uid:
                found = reuse(current, pod.uid, node, labels)
                if found is Reuse.DONE:
                    continue
                if found is Reuse.ELSEWHERE:
                    log.info("claim_reserved_elsewhere", pod=pod.key, node=node, claim=claim.key)
                    return Status.error(f"claim {claim.key}: {NOT_AVAILABLE}")
            allocation = s.allocations.get(i)
            try:
                s.claims[i], wrote = await self._bind_claim(claim, allocation, pod, node, labels)
            except _WriteFailed as exc:
                return Status.error(str(exc))
            except KubeError as exc:
                return Status.error(f"claim {claim.namespace}/{claim.name}: {exc}")
            finally:
                if i in s.allocations:
                    self.objects.remove_pending(claim.uid)
            if wrote:
                s.written[i] = allocation
        return SUCCESS

    async def _bind_claim(
        self,
        claim: ResourceClaim,
        allocation: Allocation | None,
        pod: PodInfo,
        node: str,
        labels: Mapping[str, str],
    ) -> tuple[ResourceClaim, bool]:
        """The claim as written (or as found reserved for the pod, for this node, by another
        instance meanwhile), and whether this call wrote it."""
        kube = self.handle.kube
        if kube is None:
            raise _WriteFailed("no API client to write the claim with")
        path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/{claim.name}"
        ref = f"{claim.namespace}/{claim.name}"
        body = dict(claim.raw or {})
        refresh = False
        for attempt in range(WRITE_ATTEMPTS):
            if refresh:
                body = await kube.get(path)
                claim = parse_resource_claim(body)
            refresh = True
            if claim.deleting:
                raise _WriteFailed(f"claim {ref} got deleted in the meantime")
            found = reuse(claim, pod.uid, node, labels)
            if found is Reuse.DONE:
                return claim, False
            if found is Reuse.ELSEWHERE:
                raise _WriteFailed(f"claim {ref}: {NOT_AVAILABLE}")
            try:
                if allocation is not None:
                    if claim.allocation is not None:
                        raise _WriteFailed(f"claim {ref} got allocated elsewhere in the meantime")
                    meta = dict(body.get("metadata") or {})
                    labels_now = _pool_labels(meta.get("labels"), allocation)
                    if FINALIZER not in claim.finalizers or labels_now != meta.get("labels"):
                        meta["labels"] = labels_now
                        if FINALIZER not in claim.finalizers:
                            meta["finalizers"] = [*claim.finalizers, FINALIZER]
                        body = (
                            await kube.request("PUT", path, body={**body, "metadata": meta})
                        ).json()
                        claim = parse_resource_claim(body)
                elif claim.allocation is None or not claim.allocation.admits(node, labels):
                    # Allocated at PreFilter, deallocated or reallocated since (by PostFilter
                    # or another instance): the pod must not go where the devices are not.
                    raise _WriteFailed(f"claim {ref}: {NOT_AVAILABLE}")
                status = dict(body.get("status") or {})
                if allocation is not None:
                    status["allocation"] = allocation.to_api()
                status["reservedFor"] = [
                    *(status.get("reservedFor") or []),
                    {"resource": "pods", "name": pod.name, "uid": pod.uid},
                ]
                answer = (
                    await kube.request("PUT", f"{path}/status", body={**body, "status": status})
                ).json()
            except KubeError as exc:
                if exc.conflict and attempt + 1 < WRITE_ATTEMPTS:
                    await asyncio.sleep(0.01 * (attempt + 1))
                    continue
                what = "allocation and reservation" if allocation is not None else "reservation"
                raise _WriteFailed(f"add {what} to claim {ref}: {exc}") from exc
            written = parse_resource_claim(answer)
            self.objects.assume_written(written)
            return written, True
        raise _WriteFailed(f"claim {ref}: too many conflicts")

    async def _deallocate(self, claim: ResourceClaim) -> None:
        kube = self.handle.kube
        if kube is None or claim.raw is None:
            return
        body = dict(claim.raw)
        status = {
            k: v
            for k, v in (body.get("status") or {}).items()
            if k not in ("allocation", "reservedFor", "devices")
        }
        path = (
            f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/"
            f"{claim.name}/status"
        )
        await kube.request("PUT", path, body={**body, "status": status})

    # -- undoing a failed cycle's writes ---------------------------------------------------

    def _spawn_release(
        self, pod: PodInfo, written: list[tuple[ResourceClaim, Allocation | None]]
    ) -> None:
        task = self._spawn(self._release(pod, written, self._releasing.get(pod.uid)))
        if task is not None:
            self._releasing[pod.uid] = task

    async def _release(
        self,
        pod: PodInfo,
        written: list[tuple[ResourceClaim, Allocation | None]],
        before: asyncio.Task[None] | None,
    ) -> None:
        """Undo what a failed binding cycle wrote on `written` (`dra.reservations`): read the
        pod back, then each claim, and write what the plan says with the claim's
        resourceVersion (a conflict reads both again)."""
        try:
            if before is not None:
                await asyncio.wait({before})
            kube = self.handle.kube
            if kube is None:
                return
            for claim, ours in written:
                await self._release_claim(kube, pod, claim, ours)
        finally:
            if self._releasing.get(pod.uid) is asyncio.current_task():
                del self._releasing[pod.uid]

    async def _release_claim(
        self, kube: KubeClient, pod: PodInfo, claim: ResourceClaim, ours: Allocation | None
    ) -> None:
        path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/{claim.name}"
        for attempt in range(WRITE_ATTEMPTS):
            raw_pod = await _read(kube, f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}")
            body = await _read(kube, path)
            if body is None:
                return
            current = parse_resource_claim(body)
            if current.uid != claim.uid:
                return
            where = placed(raw_pod, pod.uid, current, self._labels)
            plan = release(current, pod.uid, ours, where)
            if not plan.unreserve and not plan.deallocate:
                return
            status = dict(body.get("status") or {})
            if plan.deallocate:
                for key in ("allocation", "reservedFor", "devices"):
                    status.pop(key, None)
            else:
                status["reservedFor"] = [
                    r
                    for r in status.get("reservedFor") or []
                    if not (isinstance(r, dict) and r.get("uid") == pod.uid)
                ]
            try:
                answer = (
                    await kube.request("PUT", f"{path}/status", body={**body, "status": status})
                ).json()
            except KubeError as exc:
                if exc.conflict and attempt + 1 < WRITE_ATTEMPTS:
                    continue
                raise
            self.objects.assume_written(parse_resource_claim(answer))
            log.info(
                "resourceclaim_released",
                pod=pod.key,
                claim=claim.key,
                placed=where.value,
                deallocated=plan.deallocate,
            )
            if where is Placed.PENDING:
                await self._keep_if_bound(kube, pod, claim)
            return

    async def _keep_if_bound(self, kube: KubeClient, pod: PodInfo, claim: ResourceClaim) -> None:
        """After the reservation of a pending pod went: if another instance bound the pod
        meanwhile, to a node the allocation admits, relying on that reservation, put it
        back (the bind may have come after the pod was read, so it is read again)."""
        raw_pod = await _read(kube, f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}")
        latest = self.objects.claim(claim.namespace, claim.name) or claim
        if placed(raw_pod, pod.uid, latest, self._labels) is not Placed.USING:
            return
        assert raw_pod is not None
        node = str(raw_pod["spec"]["nodeName"])
        try:
            await self._bind_claim(latest, None, pod, node, self._labels(node))
        except _WriteFailed as exc:
            log.warning("resourceclaim_not_kept", pod=pod.key, claim=claim.key, error=str(exc))

    def _spawn(self, work: Any) -> asyncio.Task[None] | None:
        """A best-effort write outside the cycle (Unreserve and PostFilter cannot await): kept
        until done, its failure logged; the next attempt recovers either way."""
        try:
            task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work)
        except RuntimeError:
            work.close()
            return None
        self._cleanups.add(task)
        task.add_done_callback(self._cleaned)
        return task

    def _cleaned(self, task: asyncio.Task[None]) -> None:
        self._cleanups.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("resourceclaim_write_failed", error=str(task.exception()))


class _WriteFailed(Exception):
    pass


async def _read(kube: KubeClient, path: str) -> Any:
    """An object as the API server has it; None once it is gone."""
    try:
        return await kube.get(path)
    except KubeError as exc:
        if exc.not_found:
            return None
        raise


def _status(claim: ResourceClaim) -> Any:
    raw = claim.raw or {}
    return raw.get("status") if raw else (claim.allocation, claim.reserved_for)


def _terms_rows(nodes: NodeTable, terms: tuple[Any, ...]) -> BoolArray:
    return nodes.rows_where(
        (NAME, "terms", terms), lambda info: any(t.matches(info.name, info.labels) for t in terms)
    )


def _device_rows(nodes: NodeTable, table: DeviceTable) -> IntArray:
    """Per device: its node's row (-1 for network-attached devices or unknown nodes)."""
    key = (NAME, "device-rows", table.serial)
    hit: IntArray | None = nodes.cached(key)
    if hit is None or hit.size != table.n:
        index = nodes.index
        hit = np.fromiter(
            (index.get(name, -1) if name else -1 for name in table.node_of),
            dtype=np.int64,
            count=table.n,
        )
        nodes.remember(key, hit)
    return hit


def _placement_rows(nodes: NodeTable, table: DeviceTable, p: int) -> BoolArray:
    placement = table.placements[p]
    return nodes.rows_where(
        (NAME, "placement", placement), lambda info: placement.admits(info.name, info.labels)
    )


def _per_node(
    nodes: NodeTable, table: DeviceTable, device_rows: IntArray, devices: BoolArray
) -> IntArray:
    """Per node row: how many of `devices` it reaches."""
    local = devices & (device_rows >= 0)
    counts: IntArray = np.bincount(device_rows[local], minlength=nodes.n).astype(np.int64)
    network = devices & (table.placement_of >= 0)
    if network.any():
        per_placement = np.bincount(table.placement_of[network], minlength=len(table.placements))
        for p in np.flatnonzero(per_placement).tolist():
            counts += int(per_placement[p]) * _placement_rows(nodes, table, p)
    return counts


def _rows_with(
    nodes: NodeTable, table: DeviceTable, device_rows: IntArray, devices: BoolArray
) -> BoolArray:
    rows: BoolArray = _per_node(nodes, table, device_rows, devices) > 0
    return rows


def _rows_with_pools(
    nodes: NodeTable, table: DeviceTable, device_rows: IntArray, *, incomplete: bool
) -> BoolArray:
    """Rows that reach a pool that is incomplete (or invalid); cached per table and node
    spec, like the device rows."""
    flags = table.pool_incomplete if incomplete else table.pool_invalid
    if not flags.any():
        return np.zeros(nodes.n, dtype=np.bool_)
    key = (NAME, "pool-rows", table.serial, incomplete)
    hit: BoolArray | None = nodes.cached(key)
    if hit is None or hit.size != nodes.n:
        hit = _rows_with(nodes, table, device_rows, flags[table.pool_of])
        nodes.remember(key, hit)
    return hit


def _over_limit(counted: list[list[list[_Counted]]], n: int) -> BoolArray:
    """Rows where a claim asks for more devices than a claim may have (an All request
    counting every device it selects there; of `firstAvailable`, the fewest)."""
    over = np.zeros(n, dtype=np.bool_)
    for per_request in counted:
        total = np.zeros(n, dtype=np.int64)
        for subs in per_request:
            wanted = [
                c.all_selected
                if c.request.mode == ALL and c.all_selected is not None
                else np.full(n, c.request.count, dtype=np.int64)
                for c in subs
            ]
            if wanted:
                total += np.minimum.reduce(wanted)
        over |= total > ALLOCATION_RESULTS_MAX
    return over


def _need(c: _Counted, row: int) -> str:
    """`request gpu (class gpu.example.com) needs 2 device(s), 1 free here`."""
    head = f"request {c.request.name} (class {c.request.class_name})"
    free = int(c.counts[row])
    if c.request.mode == ALL:
        assert c.all_selected is not None
        if not c.all_selected[row]:
            return f"{head} needs all its devices, and selects none here"
        return f"{head} needs all its devices, {free} of {int(c.all_selected[row])} free here"
    return f"{head} needs {c.request.count} device(s), {free} free here"


def _enough(c: _Counted) -> BoolArray:
    if c.request.mode == ALL:
        assert c.all_selected is not None
        ok: BoolArray = (c.all_selected > 0) & (c.counts == c.all_selected)
        return ok
    need: BoolArray = c.counts >= c.request.count
    return need


def _needs_search(claims: Sequence[ResourceClaim], counted: list[list[list[_Counted]]]) -> bool:
    """Whether counting may be wrong: constraints tie requests, or two requests (of any
    claims) may want the same device."""
    if any(c.constraints for c in claims):
        return True
    masks = [
        np.logical_or.reduce([c.candidates for c in subs]) for pr in counted for subs in pr if subs
    ]
    if len(masks) < 2:
        return False
    total = np.sum(masks, axis=0)
    return bool((total > 1).any())


def _first_available_scores(
    claims: Sequence[ResourceClaim], counted: list[list[list[_Counted]]], n: int
) -> IntArray | None:
    """kube-scheduler's firstAvailable score where counting decides: per request, the first
    subrequest that fits a node is the one its search takes (8 - its index)."""
    scores = np.zeros(n, dtype=np.int64)
    any_first = False
    for claim, per_request in zip(claims, counted, strict=True):
        for req, subs in zip(claim.requests, per_request, strict=True):
            if not req.first_available:
                continue
            any_first = True
            taken = np.zeros(n, dtype=np.bool_)
            for i, c in enumerate(subs):
                fits = _enough(c) & ~taken
                scores[fits] += FIRST_AVAILABLE_MAX - i
                taken |= fits
    return scores if any_first else None


def _score_of(claims: Sequence[ResourceClaim], found: Sequence[Allocation]) -> int:
    """kube-scheduler's computeScore: per allocated subrequest, 8 - its index."""
    score = 0
    for claim, allocation in zip(claims, found, strict=True):
        chosen = {d.request for d in allocation.devices if "/" in d.request}
        for req in claim.requests:
            for i, sub in enumerate(req.first_available):
                if f"{req.name}/{sub.name}" in chosen:
                    score += FIRST_AVAILABLE_MAX - i
    return score


def new(args: DynamicResourcesArgs, handle: Handle) -> DynamicResources:
    return DynamicResources(args, handle)


REGISTRATION: Final = Registration(
    NAME,
    new,
    DynamicResourcesArgs,
    events=frozenset(
        {
            ClusterEvent.NODE_ADD,
            ClusterEvent.NODE_LABEL,
            ClusterEvent.NODE_TAINT,
            ClusterEvent.NODE_ALLOCATABLE,
            ClusterEvent.RESOURCE_CLAIM_ADD,
            ClusterEvent.RESOURCE_CLAIM_UPDATE,
            ClusterEvent.UNSCHEDULED_POD_UPDATE,
            ClusterEvent.DEVICE_CLASS_ADD,
            ClusterEvent.DEVICE_CLASS_UPDATE,
            ClusterEvent.RESOURCE_SLICE_ADD,
            ClusterEvent.RESOURCE_SLICE_UPDATE,
        }
    ),
    default_weight=2,
)
