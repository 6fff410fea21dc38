"""The Dynamic Resource Allocation objects DynamicResources reads, kept by their informers:
DeviceClasses, ResourceSlices, ResourceClaims (with the assumptions and in-flight
allocations kube-scheduler keeps) and ResourceClaimTemplates.

**Devices as columns.** Every device of every usable slice is a row of a device table
(`DeviceTable`), rebuilt when the slices change (rarely, next to scheduling): where it is
(one node, or a group of nodes a network-attached slice reaches), whether its pool can be
allocated from, and whether it is allocated. A selector's CEL expression is evaluated once
per device per table (`selector_column`), so the Filter's per-node work is numpy over these
columns; the exact search (`dra.allocator`) runs only where counting cannot decide.

**Allocated devices** are those named by a claim's allocation as the cache has it (the
informer's version, or one this scheduler wrote and assumed ahead of the informer), plus the
allocations Reserve made that PreBind has not written yet (kube-scheduler's in-flight
allocations). Admin-access results never make a device busy. With consumable capacity on,
a result with a `shareID` is a share of its device, not a hold on it: `shares` tells them
apart and sums what the shares consume (`dra.sharing`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import structlog

from ascheduler.dra.allocator import Candidate, DeviceId, Pool
from ascheduler.dra.cel import SelectorCache
from ascheduler.dra.counters import PoolCounters, pool_counters
from ascheduler.dra.sharing import Shares
from ascheduler.dra.taints import DeviceTaints, blocked_column
from ascheduler.features import (
    DRA_DEVICE_BINDING_CONDITIONS,
    DRA_PARTITIONABLE_DEVICES,
    Features,
)
from ascheduler.model import version_number
from ascheduler.model.affinity import NodeSelectorTerm
from ascheduler.model.dra import (
    Allocation,
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from ascheduler.model.dra_taints import DeviceTaintRule

log = structlog.get_logger(__name__)
_SERIALS = itertools.count()

BoolArray = np.ndarray[Any, np.dtype[np.bool_]]
IntArray = np.ndarray[Any, np.dtype[np.int64]]


def busy_devices(allocation: Allocation | None) -> tuple[DeviceId, ...]:
    if allocation is None:
        return ()
    return tuple(d.device_id for d in allocation.devices if not d.admin_access)


@dataclass(slots=True)
class PoolState:
    driver: str
    name: str
    generation: int
    slices: list[ResourceSlice] = field(default_factory=list)
    incomplete: bool = False
    invalid: bool = False
    #: Its counter sets, while partitionable devices are on (`dra.counters`).
    counters: PoolCounters | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a network-attached slice's devices are: all nodes, or those its selector admits."""

    all_nodes: bool
    terms: tuple[NodeSelectorTerm, ...] | None

    def admits(self, name: str, labels: Mapping[str, str]) -> bool:
        if self.all_nodes:
            return True
        return self.terms is not None and any(t.matches(name, labels) for t in self.terms)


@dataclass(frozen=True, slots=True)
class CounterReach:
    """Where a counter slice of an incomplete or invalid pool reaches: kube sees a pool from
    every node one of its slices reaches (a counter slice reaches every node before 1.37),
    and such a pool fails an All request there, or says invalid pools there."""

    pool: int
    node: str = ""
    place: int = -1
    everywhere: bool = False


class DeviceTable:
    """Every device of the usable slices, as rows (see the module docstring)."""

    def __init__(
        self,
        slices: Iterable[ResourceSlice],
        *,
        partitionable: bool = False,
        counters_everywhere: bool = False,
        binding_conditions: bool = False,
    ) -> None:
        """`partitionable`: `DRAPartitionableDevices` on (counter sets, counter-consuming
        devices and per-device node selection; off in kube-scheduler v1.35 by default, so
        such slices are left out and such devices never allocated). `counters_everywhere`:
        counter slices reach every node (kube's GatherPools before 1.37).
        `binding_conditions`: DRADeviceBindingConditions on (devices with binding
        conditions may be allocated)."""
        #: Unique per table, for caches of what is computed from one (never reused, as an
        #: `id()` may be once the table is gone).
        self.serial = next(_SERIALS)
        self.pools: dict[tuple[str, str], PoolState] = {}
        for s in slices:
            if not partitionable and (s.per_device_node_selection or s.shared_counters):
                continue
            placed = s.node_name or s.all_nodes or s.node_terms is not None
            if not placed and not (partitionable and s.per_device_node_selection):
                continue  # reaches no node
            pool = self.pools.get(s.pool_id)
            if pool is None or s.generation > pool.generation:
                pool = self.pools[s.pool_id] = PoolState(s.driver, s.pool, s.generation)
            elif s.generation < pool.generation:
                continue
            pool.slices.append(s)
        self.candidates: list[Candidate] = []
        #: Per row: the node name (local devices) or "" (network-attached).
        node_of: list[str] = []
        placement_of: list[int] = []
        pool_of: list[int] = []
        usable: list[bool] = []
        self.placements: list[Placement] = []
        placement_index: dict[Placement, int] = {}
        self.pool_list: list[PoolState] = []
        consumes: list[bool] = []
        self.counter_reach: list[CounterReach] = []

        def place_of(all_nodes: bool, terms: tuple[NodeSelectorTerm, ...] | None) -> int:
            if not all_nodes and terms is None:
                return -1  # reaches no node
            key = Placement(all_nodes, terms)
            place = placement_index.setdefault(key, len(self.placements))
            if place == len(self.placements):
                self.placements.append(key)
            return place

        for pid in sorted(self.pools):
            pool = self.pools[pid]
            pool.slices.sort(key=lambda s: s.name)
            pool.incomplete = len(pool.slices) != pool.slices[0].slice_count
            device_slices = [s for s in pool.slices if not (partitionable and s.shared_counters)]
            names = [d.name for s in device_slices for d in s.devices]
            pool.invalid = len(names) != len(set(names))
            if partitionable:
                pool.counters = pool_counters(pool.driver, pool.name, pool.slices)
                # kube validates the counters of complete pools only (an incomplete pool is
                # not allocated from, and its counter sets may simply not have come yet).
                pool.invalid |= bool(pool.counters.invalid) and not pool.incomplete
            pi = len(self.pool_list)
            self.pool_list.append(pool)
            if partitionable and (pool.incomplete or pool.invalid):
                for s in pool.slices:
                    if not s.shared_counters:
                        continue
                    if counters_everywhere:
                        self.counter_reach.append(CounterReach(pi, everywhere=True))
                    elif s.node_name:
                        self.counter_reach.append(CounterReach(pi, node=s.node_name))
                    elif (place := place_of(s.all_nodes, s.node_terms)) >= 0:
                        self.counter_reach.append(CounterReach(pi, place=place))
            for s in device_slices:
                place = -1 if s.node_name else place_of(s.all_nodes, s.node_terms)
                for position, d in enumerate(s.devices):
                    self.candidates.append(
                        Candidate(len(self.candidates), s.driver, s.pool, d, s, position)
                    )
                    if s.per_device_node_selection:  # partitionable: each device says where
                        node_of.append(d.node_name)
                        placement_of.append(
                            -1 if d.node_name else place_of(d.all_nodes, d.node_terms)
                        )
                    else:
                        node_of.append(s.node_name)
                        placement_of.append(place)
                    pool_of.append(pi)
                    usable.append(
                        not pool.incomplete
                        and not pool.invalid
                        and (binding_conditions or not d.binding_conditions)
                        and (partitionable or not d.consumes_counters)
                    )
                    consumes.append(partitionable and d.consumes_counters)
        self.n = len(self.candidates)
        self.node_of = node_of
        self.placement_of: IntArray = np.array(placement_of, dtype=np.int64)
        self.pool_of: IntArray = np.array(pool_of, dtype=np.int64)
        self.usable: BoolArray = np.array(usable, dtype=np.bool_)
        #: Per row: a taint keeps it from requests that do not tolerate it (`dra.taints`).
        self.tainted: BoolArray = blocked_column([c.spec for c in self.candidates])
        #: Per row: it consumes counters (partitionable devices on): counting cannot tell
        #: whether its counter sets still have enough, only the search can.
        self.consumes: BoolArray = np.array(consumes, dtype=np.bool_) & self.usable
        #: Per pool (as `pool_of` numbers them): incomplete, invalid.
        self.pool_incomplete: BoolArray = np.array(
            [p.incomplete for p in self.pool_list], dtype=np.bool_
        )
        self.pool_invalid: BoolArray = np.array([p.invalid for p in self.pool_list], dtype=np.bool_)
        self.index: dict[DeviceId, int] = {c.id: c.index for c in self.candidates}
        #: Rows per local node name, and rows per placement.
        self.rows_of_node: dict[str, list[int]] = {}
        for i, name in enumerate(node_of):
            if name:
                self.rows_of_node.setdefault(name, []).append(i)
        self.allocated: BoolArray = np.zeros(self.n, dtype=np.bool_)
        self._local_pools: dict[str, tuple[tuple[str, str], ...]] = {}

    def local_pools(self, node: str) -> tuple[tuple[str, str], ...] | None:
        """The (driver, pool) of every pool the node reaches, when the table has only
        node-local devices and no counter slice reaching further (what `pools_for` would
        return, named, without making the pools); None otherwise."""
        if self.placements or self.counter_reach:
            return None
        found = self._local_pools.get(node)
        if found is None:
            pools = sorted({int(self.pool_of[i]) for i in self.rows_of_node.get(node, ())})
            found = tuple((self.pool_list[p].driver, self.pool_list[p].name) for p in pools)
            self._local_pools[node] = found
        return found

    def pools_for(self, node: str, labels: Mapping[str, str]) -> list[Pool]:
        """The pools a node reaches, with their devices that reach it, in table order."""
        rows: list[int] = list(self.rows_of_node.get(node, ()))
        admitted = [p.admits(node, labels) for p in self.placements]
        if any(admitted):
            rows.extend(
                i
                for i in np.flatnonzero(self.placement_of >= 0).tolist()
                if admitted[int(self.placement_of[i])]
            )
            rows.sort()
        pools: dict[int, Pool] = {}
        for i in rows:
            pi = int(self.pool_of[i])
            pool = pools.get(pi)
            if pool is None:
                state = self.pool_list[pi]
                pool = pools[pi] = Pool(
                    state.driver,
                    state.name,
                    state.incomplete,
                    state.invalid,
                    counters=state.counters,
                )
            pool.devices.append(self.candidates[i])
        for reach in self.counter_reach:
            if reach.pool in pools:
                continue
            if (
                reach.everywhere
                or reach.node == node
                or (reach.place >= 0 and admitted[reach.place])
            ):
                state = self.pool_list[reach.pool]
                pools[reach.pool] = Pool(
                    state.driver,
                    state.name,
                    state.incomplete,
                    state.invalid,
                    counters=state.counters,
                )
        return [pools[k] for k in sorted(pools)]


class ResourceObjects:
    """The informers' DRA objects with the allocation bookkeeping (module docstring)."""

    def __init__(self, features: Features | None = None) -> None:
        #: The release's gates (which slices and devices the device table takes).
        self.features = features if features is not None else Features.defaults()
        self.classes: dict[str, DeviceClass] = {}
        self.slices: dict[str, ResourceSlice] = {}
        self.templates: dict[str, ResourceClaimTemplate] = {}
        #: Claims as the informer last brought them, and as the cache answers (an assumed
        #: version written by this scheduler, newer than the informer's, or the informer's).
        self.informed: dict[str, ResourceClaim] = {}
        self.latest: dict[str, ResourceClaim] = {}
        #: Allocations reserved but not written yet, by claim uid.
        self.in_flight: dict[str, ResourceClaim] = {}
        #: How many claims (cached or in flight) hold each device.
        self._holders: dict[DeviceId, int] = {}
        #: The same results sorted into dedicated ones and shares (`dra.sharing`).
        self.shares = Shares()
        self._table: DeviceTable | None = None
        #: The devices' taints as the allocator sees them, and the DeviceTaintRules.
        self.taints = DeviceTaints.of(self.features)
        #: Compiled selectors and their results per device (shared by every profile).
        self.selectors = SelectorCache()
        #: Bumped when slices or classes change (a new table, new selector results).
        self.slice_generation = 0
        self.class_generation = 0
        #: Per pool (driver, pool name): a stamp renewed whenever an allocation holding one
        #: of its devices comes, goes or changes (cached, in flight or undone), so that a
        #: node's pools' stamps tell whether anything a search there reads has changed.
        self.pool_stamps: dict[tuple[str, str], int] = {}
        self._stamps = itertools.count(1)
        #: Filter's exact searches by what they read (`plugins.dynamicresources.counting`):
        #: the claims' specs, the table, the classes, the node and its pools' stamps.
        self.searches: dict[Hashable, tuple[Allocation, ...] | None] = {}
        self.handlers: dict[str, Any] = {
            "DeviceClass": _Handler(self._class_changed),
            "ResourceSlice": _Handler(self._slice_changed),
            "ResourceClaim": _Handler(self._claim_changed),
            "ResourceClaimTemplate": _Handler(self._template_changed),
            "DeviceTaintRule": _Handler(self.taint_rule_changed),
        }

    # -- informer events -----------------------------------------------------------------

    def _class_changed(self, old: DeviceClass | None, new: DeviceClass | None) -> None:
        if new is None:
            if old is not None:
                self.classes.pop(old.name, None)
        else:
            self.classes[new.name] = new
        self.class_generation += 1

    def _slice_changed(self, old: ResourceSlice | None, new: ResourceSlice | None) -> None:
        if new is None:
            if old is not None:
                self.slices.pop(old.name, None)
        else:
            self.slices[new.name] = new
        self.slice_generation += 1
        self._table = None

    def taint_rule_changed(self, old: DeviceTaintRule | None, new: DeviceTaintRule | None) -> bool:
        """A DeviceTaintRule added, updated or deleted: whether some device's taints changed
        (only then is the table rebuilt; a rule's status updates change nothing)."""
        changed = self.taints.changes_devices(old, new, self.slices.values())
        self.taints.rule_changed(old, new)
        if changed:
            self.slice_generation += 1
            self._table = None
        return changed

    def _template_changed(
        self, old: ResourceClaimTemplate | None, new: ResourceClaimTemplate | None
    ) -> None:
        if new is None:
            if old is not None:
                self.templates.pop(old.key, None)
        else:
            self.templates[new.key] = new

    def _claim_changed(self, old: ResourceClaim | None, new: ResourceClaim | None) -> None:
        if new is None:
            if old is None:
                return
            self.informed.pop(old.key, None)
            self._set_latest(old.key, None)
            return
        self.informed[new.key] = new
        current = self.latest.get(new.key)
        if (
            current is not None
            and current.uid == new.uid
            and version_number(new) < version_number(current)
        ):
            return  # an assumed version newer than this one stands
        self._set_latest(new.key, new)

    def _set_latest(self, key: str, claim: ResourceClaim | None) -> None:
        before = self.latest.get(key)
        if claim is None:
            self.latest.pop(key, None)
        else:
            self.latest[key] = claim
        self._count(busy_devices(before.allocation) if before else (), -1)
        self._count(busy_devices(claim.allocation) if claim else (), 1)
        self.shares.count(before.allocation if before else None, -1)
        self.shares.count(claim.allocation if claim else None, 1)
        self._touch(before.allocation if before else None)
        self._touch(claim.allocation if claim else None)

    def _touch(self, allocation: Allocation | None) -> None:
        """New stamps for the pools of the allocation's devices."""
        if allocation is None or not allocation.devices:
            return
        stamp = next(self._stamps)
        for d in allocation.devices:
            self.pool_stamps[(d.driver, d.pool)] = stamp

    def _count(self, devices: Iterable[DeviceId], sign: int) -> None:
        table = self._table
        for device in devices:
            held = self._holders.get(device, 0) + sign
            if held > 0:
                self._holders[device] = held
            else:
                self._holders.pop(device, None)
            if table is not None:
                row = table.index.get(device)
                if row is not None:
                    table.allocated[row] = held > 0

    # -- reads ---------------------------------------------------------------------------

    def claim(self, namespace: str, name: str) -> ResourceClaim | None:
        return self.latest.get(f"{namespace}/{name}")

    def device_class(self, name: str) -> DeviceClass | None:
        return self.classes.get(name)

    def allocated(self, device: DeviceId) -> bool:
        return device in self._holders

    def allocated_devices(self) -> Iterator[DeviceId]:
        return iter(self._holders)

    def table(self) -> DeviceTable:
        table = self._table
        if table is None:
            table = self._table = DeviceTable(
                self.taints.slices(self.slices.values()),
                partitionable=DRA_PARTITIONABLE_DEVICES in self.features,
                counters_everywhere=not self.features.since(1, 37),
                binding_conditions=DRA_DEVICE_BINDING_CONDITIONS in self.features,
            )
            self.selectors.forget({(s.name, s.resource_version) for s in self.slices.values()})
            for device in self._holders:
                row = table.index.get(device)
                if row is not None:
                    table.allocated[row] = True
        return table

    # -- the scheduler's own allocations -------------------------------------------------

    def has_pending_allocation(self, uid: str) -> bool:
        return uid in self.in_flight

    def signal_pending(self, claim: ResourceClaim) -> None:
        """Reserve: `claim` (with its allocation) counts as allocated from now on."""
        self.remove_pending(claim.uid)
        self.in_flight[claim.uid] = claim
        self._count(busy_devices(claim.allocation), 1)
        self.shares.count(claim.allocation, 1)
        self._touch(claim.allocation)

    def remove_pending(self, uid: str) -> bool:
        claim = self.in_flight.pop(uid, None)
        if claim is None:
            return False
        self._count(busy_devices(claim.allocation), -1)
        self.shares.count(claim.allocation, -1)
        self._touch(claim.allocation)
        return True

    def assume_written(self, claim: ResourceClaim) -> None:
        """A claim this scheduler just wrote, ahead of the informer."""
        current = self.latest.get(claim.key)
        if current is not None and version_number(current) >= version_number(claim):
            return
        self._set_latest(claim.key, claim)

    def restore(self, namespace: str, name: str) -> None:
        """The informer's version again (an assumption undone)."""
        key = f"{namespace}/{name}"
        self._set_latest(key, self.informed.get(key))


class _Handler:
    """Informer callbacks -> one `changed(old, new)` function."""

    def __init__(self, changed: Callable[[Any, Any], object]) -> None:
        self._changed = changed

    def on_add(self, obj: Any) -> None:
        self._changed(None, obj)

    def on_update(self, old: Any, new: Any) -> None:
        self._changed(old, new)

    def on_delete(self, obj: Any) -> None:
        self._changed(obj, None)
