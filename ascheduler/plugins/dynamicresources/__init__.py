"""DynamicResources: a pod's ResourceClaims must be allocated devices its node can reach
(kube-scheduler v1.35's plugin, structured parameters, its default feature gates).

PreEnqueue holds a pod until every claim it names exists (`state.pod_claims`). PreFilter
rejects a pod whose claims are being deleted, reserved for 256 consumers already, being
allocated by an earlier cycle, or name a DeviceClass that does not exist. Filter counts the
claims' devices per node and searches where counting cannot decide (`counting`).

Score: kube-scheduler's preference for earlier `firstAvailable` subrequests (8 - index per
request), normalized. Reserve runs the exact search for the chosen node and holds its
allocation in memory (in flight: no other pod gets those devices); Unreserve drops it, and
undoes what a failed binding cycle wrote. PreBind writes the claims, under device locks when
they are on (`binding`). PostFilter deallocates one allocated claim that kept the pod off
every node and that no other pod uses, as kube-scheduler does, so the next attempt can
allocate it afresh. From 1.37 (with GenericWorkload) its PodGroupPostFilter answers for a group
whose attempt failed, before the pod group preemption: Unschedulable, `deallocation and
deletion of ResourceClaims completed` (the allocations its members' Reserve held are released
with their Unreserve; claims allocated before the attempt are left as they are).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any, Final

import numpy as np

from ascheduler.dra.allocator import AllocationError, Allocator, InvalidPools, Timeout
from ascheduler.dra.sharing import capacity_view
from ascheduler.dra.store import ResourceObjects
from ascheduler.features import DRA_PRIORITIZED_LIST, SCHEDULER_PREEMPTION_FOR_RESIZE
from ascheduler.framework import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    ExplainFilterPlugin,
    FilterResult,
    GateKeysPlugin,
    Handle,
    IntArray,
    NodeTable,
    PodGroupPostFilterPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHintPlugin,
    Registration,
    Rejection,
    ReservePlugin,
    ScorePlugin,
    Status,
    default_normalize,
    slot_released,
)
from ascheduler.model import PodInfo
from ascheduler.model.dra import FINALIZER, Allocation, ResourceClaim
from ascheduler.model.podgroups import SchedulingGroup
from ascheduler.plugins.dynamicresources import bindingconditions
from ascheduler.plugins.dynamicresources.binding import ClaimWriter
from ascheduler.plugins.dynamicresources.counting import (
    Counted,
    allocated_score,
    enough,
    explain_counts,
    filter_allocations,
    need,
    terms_rows,
)
from ascheduler.plugins.dynamicresources.extended import (
    all_requests_claim,
    delete_stale,
    filter_extended,
    prepare,
    release,
    settle,
    stale_status,
)
from ascheduler.plugins.dynamicresources.state import (
    CLAIMS_RELEASED,
    DEALLOCATED,
    IN_USE,
    NAME,
    NO_NEW_CLAIMS,
    NOT_AVAILABLE,
    SELECTORS_PENDING,
    STATE_NOT_FOUND,
    STILL_NOT,
    TIMED_OUT,
    ClaimsUnavailable,
    DynamicResourcesArgs,
    _State,
    check_requests,
    claim_status,
    pod_claims,
)

#: Where explain keeps the per-node device counts of the claims to allocate.
_COUNTS: Final = f"{NAME}/explain-counts"


class DynamicResources(
    PreEnqueuePlugin,
    GateKeysPlugin,
    PreFilterPlugin,
    ExplainFilterPlugin,
    PostFilterPlugin,
    PodGroupPostFilterPlugin,
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
        self.writer = ClaimWriter(handle, self.objects)
        #: Consumable capacity: None while its gate is off (`dra.sharing`).
        self.capacity = capacity_view(handle.features, self.objects.shares)

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
        return bool(claim_status(old) != claim_status(new))

    # -- scheduling cycle ----------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        # As kube-scheduler's plugin does: an empty state first, recording that PreFilter ran
        # (PostFilter tells that from not having run); the claims join it if PreFilter passes.
        state.write(NAME, _State([], [], []))
        extended = prepare(self.handle.features, pod, self.objects)
        if not pod.resource_claims and extended is None:
            return None, SKIP
        try:
            claims = pod_claims(pod, self.objects)
        except ClaimsUnavailable as exc:
            return None, Status.unschedulable(str(exc), resolvable=False)
        if not claims and extended is None:
            return None, SKIP
        s = _State(claims, [], [None] * len(claims), extended=extended)
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
            status = check_requests(self.objects, claim)
            if not status.ok:
                return None, status
        if extended is not None and (stale := stale_status(extended, pod, self.objects)):
            return None, stale
        # A slice changed since PreEnqueue: the costly results missing count as timed out
        # on their nodes this time, and the pod is woken once they are known.
        known = [s.claims[i] for i in s.to_allocate]
        if extended is not None:
            known.append(all_requests_claim(pod, extended, self.objects))
        self._selectors_known(pod, known)
        state.write(NAME, s)
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        s: _State | None = state.read(NAME)
        if s is None:
            return None
        n = nodes.n
        not_available = np.zeros(n, dtype=np.bool_)
        for i, terms in enumerate(s.available_on):
            if terms is None:
                continue
            rows = terms_rows(nodes, terms)
            if not rows.all():
                s.unavailable.add(i)
                not_available |= ~rows
        unusable = bindingconditions.unusable_claims(
            s.claims, self.handle.features, self.args.binding_timeout
        )
        if unusable:
            s.unavailable.update(unusable)
            not_available[:] = True
        rejections: list[Rejection] = []
        rejected = not_available.copy()
        if not_available.any():
            rejections.append(
                Rejection(NOT_AVAILABLE, not_available, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
            )
        if s.to_allocate or s.extended is not None:
            try:
                if s.extended is not None:
                    extra = filter_extended(
                        self.objects,
                        self.selectors,
                        self.args.filter_timeout,
                        s,
                        pod,
                        nodes,
                        ~rejected,
                        self.capacity,
                    )
                else:
                    extra = filter_allocations(
                        self.objects,
                        self.selectors,
                        self.args.filter_timeout,
                        s,
                        nodes,
                        ~rejected,
                        self.capacity,
                    )
            except AllocationError as exc:
                return FilterResult.single(str(exc), np.ones(n, dtype=np.bool_), Code.ERROR)
            for reason, rows in extra:
                rejections.append(Rejection(reason, rows, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
                rejected |= rows
        return FilterResult.of(rejected, *rejections)

    def explain(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> list[str]:
        """An allocated claim whose devices the node cannot reach; per request of the claims
        to allocate, the devices it needs and how many of those its class and selectors
        select that are free and reachable from the node."""
        s: _State | None = state.read(NAME)
        if s is None:
            return []
        lines = []
        for i, terms in enumerate(s.available_on):
            if terms is not None and not terms_rows(nodes, terms)[row]:
                lines.append(
                    f"resourceclaim {s.claims[i].name} is allocated devices this node cannot reach"
                )
        if not s.to_allocate or nodes.names[row] in s.found:
            return lines
        counted: list[list[list[Counted]]] | None = state.read(_COUNTS)
        if counted is None:
            counted = explain_counts(self.objects, self.selectors, s, nodes, self.capacity)
            state.write(_COUNTS, counted)
        short = False
        for ci, per_request in enumerate(counted):
            claim = s.claims[s.to_allocate[ci]]
            for subs in per_request:
                if not subs or any(enough(c)[row] for c in subs):
                    continue
                short = True
                lines.append(
                    f"resourceclaim {claim.name}: " + "; or ".join(need(c, row) for c in subs)
                )
        if not short:
            lines.append(
                "each request's devices are here, but no allocation of them meets the claims' "
                "constraints together (or the search timed out)"
            )
        return lines

    def pod_group_post_filter(self, group: SchedulingGroup | None, pod: PodInfo) -> Status:
        """1.37: a failed group's claims are released (Unschedulable, so the pod group
        preemption is asked next)."""
        return Status.unschedulable(CLAIMS_RELEASED)

    def post_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, diagnosis: Diagnosis
    ) -> PostFilterResult:
        if pod.resize_deferred and SCHEDULER_PREEMPTION_FOR_RESIZE in self.handle.features:
            # A deferred resize skipped PreFilter: nothing to deallocate, and no error for
            # the missing state (kube-scheduler returns before reading it).
            return PostFilterResult(Status.unschedulable())
        s: _State | None = state.read(NAME)
        if s is None:
            # PreFilter never ran: an earlier PreFilter rejected the pod outright. kube-
            # scheduler's plugin fails reading its state, and that error ends PostFilter (no
            # preemption), its text closing the pod's message.
            return PostFilterResult(Status.error(STATE_NOT_FOUND))
        # 1.37 rejects without a word where earlier releases said why (no claims, nothing
        # to deallocate): the pod's message no longer carries it before preemption's.
        quiet = self.handle.features.since(1, 37)
        stale = delete_stale(s, pod, self.writer, state.dry_run)
        if stale is not None:
            return PostFilterResult(stale)
        if not s.claims and s.extended is None:
            return PostFilterResult(Status.unschedulable(*(() if quiet else (NO_NEW_CLAIMS,))))
        for i in sorted(s.unavailable):
            claim = s.claims[i]
            users = claim.reserved_for
            if not users or (len(users) == 1 and users[0].uid == pod.uid):
                if not state.dry_run:
                    self.writer.spawn(self.writer.deallocate(claim))
                return PostFilterResult(Status.unschedulable(DEALLOCATED))
        return PostFilterResult(Status.unschedulable(*(() if quiet else (STILL_NOT,))))

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        """Score without PreScore, as kube-scheduler's: never skipped, so a pod without
        claims to allocate, or whose claims have no `firstAvailable` choice, scores 0 on
        every node. From 1.36 the claims the pod has allocated already (a shared one, say)
        add their own chosen subrequests' score on every node, beside the new allocations';
        with `DRAPrioritizedList` off it is 0."""
        s: _State | None = state.read(NAME)
        features = self.handle.features
        if s is None or (not s.to_allocate and s.scores is None):
            return np.zeros(feasible.size, dtype=np.int64)
        if DRA_PRIORITIZED_LIST not in features:
            return np.zeros(feasible.size, dtype=np.int64)
        out: IntArray = (
            s.scores[feasible] if s.scores is not None else np.zeros(feasible.size, np.int64)
        )
        if features.since(1, 36):
            allocated = allocated_score(s.claims, s.to_allocate)
            if allocated:
                out = out + allocated
        return out

    def normalize(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize(scores)

    # -- reserve -------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        s: _State | None = state.read(NAME)
        if s is not None and s.extended is not None:
            info = self.handle.nodes.node(node)
            if info is not None:
                settle(s, pod, info, self.objects)
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
            features=self.objects.features,
            capacity=self.capacity,
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
        release(s, pod, self.writer)
        written = [(s.claims[i], ours) for i, ours in sorted(s.written.items())]
        s.written.clear()
        if written:
            self.writer.spawn_release(pod, written)

    # -- binding cycle -------------------------------------------------------------------

    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Work only for a pod with claims (its own, or the one backing its extended
        resources)."""
        s: _State | None = state.read(NAME)
        return SUCCESS if s is not None and (s.claims or s.extended is not None) else SKIP

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        s: _State | None = state.read(NAME)
        if s is None:
            return SUCCESS
        status = await self.writer.pre_bind(s, pod, node)
        timeout = self.args.binding_timeout
        if not status.ok or timeout is None or not bindingconditions.enabled(self.handle.features):
            return status
        # The claims are written and no device lock is held: wait for their devices'
        # binding conditions without the binding slot.
        async with slot_released(state):
            return await bindingconditions.wait_ready(
                list(s.claims),
                lambda c: self.objects.claim(c.namespace, c.name),
                timeout,
                pod.key,
                node,
            )


def new(args: DynamicResourcesArgs, handle: Handle) -> DynamicResources:
    return DynamicResources(args, handle)


REGISTRATION: Final = Registration(
    NAME,
    new,
    DynamicResourcesArgs,
    check=bindingconditions.args_problems,
    release_defaults=bindingconditions.with_binding_timeout,
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
