"""DynamicResources' Filter, as columns over the nodes, and what its Score and explain read.

An allocated claim admits the nodes its allocation's node selector admits (`resourceclaim not
available on the node`); claims to allocate are counted per node from the device table
(`dra.store`): for each request, the devices its class and request selectors select that are
free and reachable from the node. Where requests cannot compete for a device (one request, or
candidate sets that do not overlap) and no constraint ties them, a node fits exactly when each
request's count is met (its first fitting `firstAvailable` subrequest is the one the search
would take); otherwise the nodes that pass the counts run the exact search (`dra.allocator`)
one by one, under the per-node deadline `filterTimeout` (`timed out trying to allocate
devices`). A node that fails says `cannot allocate all claims` (or `invalid resource pools
were encountered`), unresolvable as in kube-scheduler, so preemption never evicts pods for
devices.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ascheduler.dra.allocator import (
    INVALID_POOLS,
    AllocationError,
    Allocator,
    InvalidPools,
    Pool,
    Timeout,
    uses_disabled_features,
)
from ascheduler.dra.cel import SelectorCache
from ascheduler.dra.sharing import CapacityView, multi_rows, shared_only_rows, static_fit
from ascheduler.dra.store import DeviceTable, ResourceObjects
from ascheduler.dra.taints import tolerated_rows
from ascheduler.framework import BoolArray, IntArray, NodeTable, Seconds
from ascheduler.model.dra import (
    ALL,
    ALLOCATION_RESULTS_MAX,
    FIRST_AVAILABLE_MAX,
    Allocation,
    Request,
    ResourceClaim,
)
from ascheduler.plugins.dynamicresources.state import (
    CANNOT_ALLOCATE,
    NAME,
    TIMED_OUT,
    _State,
)


@dataclass(slots=True)
class Counted:
    """A request (or subrequest) counted per node: how many devices it needs, and per row how
    many it can have."""

    key: tuple[int, int, int]
    request: Request
    candidates: BoolArray  # per device row
    errors: BoolArray  # per device row: a selector failed on it
    counts: IntArray  # per node row
    all_selected: IntArray | None = None  # per node row, All requests: every selected device


def filter_allocations(
    objects: ResourceObjects,
    selectors: SelectorCache,
    filter_timeout: Seconds,
    s: _State,
    nodes: NodeTable,
    open_rows: BoolArray,
    capacity: CapacityView | None = None,
) -> list[tuple[str, BoolArray]]:
    """The rejections of the claims to allocate, over the rows still open; the allocations
    the search found, and the scores, go into `s`. With consumable capacity on (`capacity`),
    a device that allows multiple allocations may be short of capacity or shared between
    requests, which counting cannot tell: where one is a candidate, the search decides."""
    n = nodes.n
    table = objects.table()
    claims = [s.claims[i] for i in s.to_allocate]
    if uses_disabled_features(claims, objects.features):
        # Refused on every node alike, with the words of the search's setup.
        Allocator(
            claims,
            objects.device_class,
            selectors,
            objects.allocated,
            (),
            "",
            features=objects.features,
        ).validate()
    device_rows = _device_rows(nodes, table)
    counted = _count_claims(objects, selectors, claims, table, nodes, device_rows, capacity)
    # Necessary per request: some subrequest can have its devices.
    fits = open_rows.copy()
    for per_request in counted:
        for subs in per_request:
            fits &= np.logical_or.reduce([enough(c) for c in subs]) if subs else True
    exact_needed = _needs_search(claims, counted)
    if capacity is not None and not exact_needed:
        multi = multi_rows(table)
        exact_needed = any((c.candidates & multi).any() for pr in counted for s_ in pr for c in s_)
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
    search |= fits & counter_rows(nodes, table, device_rows, counted)
    if not exact_needed:
        s.scores = _first_available_scores(claims, counted, n)
    cannot = open_rows & ~fits & ~search
    timed_out = np.zeros(n, dtype=np.bool_)
    invalid = cannot & invalid_rows
    cannot &= ~invalid_rows
    if search.any():
        if s.scores is None:
            s.scores = np.zeros(n, dtype=np.int64)
        deadline = filter_timeout
        searches = objects.searches
        if len(searches) > SEARCHES_KEPT:
            searches.clear()
        # What every search of this attempt reads besides the node and its pools.
        common = (table.serial, objects.class_generation, capacity is not None, _specs(claims))
        stamps = objects.pool_stamps
        for row in np.flatnonzero(search).tolist():
            info = nodes.infos[row]
            pools: list[Pool] | None = None
            named = table.local_pools(info.name)
            if named is None:
                pools = table.pools_for(info.name, info.labels)
                named = tuple((p.driver, p.name) for p in pools)
            key = (common, info.name, tuple((k, stamps.get(k, 0)) for k in named))
            if key in searches:
                cached = searches[key]
                found = None if cached is None else list(cached)
            else:
                if pools is None:
                    pools = table.pools_for(info.name, info.labels)
                allocator = Allocator(
                    claims,
                    objects.device_class,
                    selectors,
                    objects.allocated,
                    pools,
                    info.name,
                    deadline=time.monotonic() + deadline if deadline > 0 else None,
                    features=objects.features,
                    capacity=capacity,
                )
                try:
                    found = allocator.allocate()
                except InvalidPools:
                    invalid[row] = True
                    continue
                except Timeout:
                    timed_out[row] = True
                    continue
                searches[key] = None if found is None else tuple(found)
            if found is None:
                cannot[row] = True
                continue
            s.found[info.name] = found
            s.scores[row] = _score_of(claims, found)
    return [(CANNOT_ALLOCATE, cannot), (INVALID_POOLS, invalid), (TIMED_OUT, timed_out)]


#: How many searches `ResourceObjects.searches` keeps before it starts again.
SEARCHES_KEPT = 20_000


def _specs(claims: Sequence[ResourceClaim]) -> str:
    """What a search reads of the claims: their requests, constraints and configuration
    (two claims from one template search alike), as one hashable text."""
    return repr([(c.requests, c.constraints, c.config) for c in claims])


def _count_claims(
    objects: ResourceObjects,
    selectors: SelectorCache,
    claims: Sequence[ResourceClaim],
    table: DeviceTable,
    nodes: NodeTable,
    device_rows: IntArray,
    capacity: CapacityView | None = None,
) -> list[list[list[Counted]]]:
    """Per claim, per request, per subrequest: its devices counted on every node."""
    counted = []
    for ci, claim in enumerate(claims):
        per_request = []
        for ri, req in enumerate(claim.requests):
            wanted = req.first_available or ((req.exactly,) if req.exactly else ())
            per_request.append(
                [
                    _count(
                        objects,
                        selectors,
                        table,
                        nodes,
                        device_rows,
                        (ci, ri, si),
                        claim,
                        sub,
                        capacity,
                    )
                    for si, sub in enumerate(wanted)
                ]
            )
        counted.append(per_request)
    return counted


def explain_counts(
    objects: ResourceObjects,
    selectors: SelectorCache,
    s: _State,
    nodes: NodeTable,
    capacity: CapacityView | None = None,
) -> list[list[list[Counted]]]:
    """The counts explain reports, for the claims to allocate (Filter keeps none)."""
    table = objects.table()
    claims = [s.claims[i] for i in s.to_allocate]
    rows = _device_rows(nodes, table)
    return _count_claims(objects, selectors, claims, table, nodes, rows, capacity)


def _count(
    objects: ResourceObjects,
    selectors: SelectorCache,
    table: DeviceTable,
    nodes: NodeTable,
    device_rows: IntArray,
    key: tuple[int, int, int],
    claim: ResourceClaim,
    request: Request,
    capacity: CapacityView | None = None,
) -> Counted:
    klass = objects.device_class(request.class_name)
    selected = table.usable.copy()
    errors = np.zeros(table.n, dtype=np.bool_)
    if klass is not None:
        for expression in (*klass.selectors, *request.selectors):
            if expression is None:
                raise AllocationError(
                    f"claim {claim.namespace}/{claim.name}, request {request.name}: CEL "
                    "expression empty (unsupported selector type?)"
                )
            match, failed = selectors.column(expression, table, selected)
            errors |= failed
            selected &= match
    busy = table.allocated
    if capacity is not None:
        # Shares do not hold their device; a request's capacity asks must fit it unshared.
        if capacity.shares.shared:
            busy = busy & ~shared_only_rows(table, capacity.shares)
        if request.capacity is not None:
            fit, failed = static_fit(table, request, capacity.rules)
            errors |= failed & selected
            selected &= fit
    free = selected if request.admin_access else selected & ~busy
    tolerated = tolerated_rows(
        table.tainted, lambda row: table.candidates[row].spec.taints, request.tolerations
    )
    if tolerated is not None:
        free = free & tolerated  # an All request's selected devices still count them
    counts = _per_node(nodes, table, device_rows, free)
    all_selected = None
    if request.mode == ALL:
        all_selected = _per_node(nodes, table, device_rows, selected)
    return Counted(key, request, free, errors & ~busy, counts, all_selected)


def terms_rows(nodes: NodeTable, terms: tuple[Any, ...]) -> BoolArray:
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
        for reach in table.counter_reach:  # partitionable: counter slices reach nodes too
            if not flags[reach.pool]:
                continue
            if reach.everywhere:
                hit[:] = True
            elif reach.node:
                row = nodes.index.get(reach.node)
                if row is not None:
                    hit[row] = True
            else:
                hit |= _placement_rows(nodes, table, reach.place)
        nodes.remember(key, hit)
    return hit


def counter_rows(
    nodes: NodeTable, table: DeviceTable, device_rows: IntArray, counted: list[list[list[Counted]]]
) -> BoolArray:
    """Rows that reach a counter-consuming device some request could take: its counter
    sets may be short (`dra.counters`), which counting cannot tell, so the search decides
    there (counts stay an upper bound, so rows they reject stay rejected)."""
    if not table.consumes.any():
        return np.zeros(nodes.n, dtype=np.bool_)
    wanted = np.zeros(table.n, dtype=np.bool_)
    for per_request in counted:
        for subs in per_request:
            for c in subs:
                wanted |= c.candidates
    return _rows_with(nodes, table, device_rows, wanted & table.consumes)


def _over_limit(counted: list[list[list[Counted]]], n: int) -> BoolArray:
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


def need(c: Counted, row: int) -> str:
    """`request gpu (class gpu.example.com) needs 2 device(s), 1 free here`."""
    head = f"request {c.request.name} (class {c.request.class_name})"
    free = int(c.counts[row])
    if c.request.mode == ALL:
        assert c.all_selected is not None
        if not c.all_selected[row]:
            return f"{head} needs all its devices, and selects none here"
        return f"{head} needs all its devices, {free} of {int(c.all_selected[row])} free here"
    return f"{head} needs {c.request.count} device(s), {free} free here"


def enough(c: Counted) -> BoolArray:
    if c.request.mode == ALL:
        assert c.all_selected is not None
        ok: BoolArray = (c.all_selected > 0) & (c.counts == c.all_selected)
        return ok
    need: BoolArray = c.counts >= c.request.count
    return need


def _needs_search(claims: Sequence[ResourceClaim], counted: list[list[list[Counted]]]) -> bool:
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
    claims: Sequence[ResourceClaim], counted: list[list[list[Counted]]], n: int
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
                fits = enough(c) & ~taken
                scores[fits] += FIRST_AVAILABLE_MAX - i
                taken |= fits
    return scores if any_first else None


def allocated_score(claims: Sequence[ResourceClaim], to_allocate: Sequence[int]) -> int:
    """kube-scheduler's computeScore (1.36 on) for the claims allocated before this cycle:
    each one's own chosen subrequests, the same on every node."""
    new = set(to_allocate)
    done = [
        (c, c.allocation) for i, c in enumerate(claims) if i not in new and c.allocation is not None
    ]
    if not done:
        return 0
    return _score_of([c for c, _ in done], [a for _, a in done])


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
