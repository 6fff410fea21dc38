"""Partitionable devices: counter sets parsed, validated per pool, and never overdrawn by the
allocator (by allocated devices of any claim, wherever they are, and by the search itself);
with the gate off (1.35) counter slices are left out and counter-consuming devices never
allocated."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ascheduler.dra.allocator import Allocator, InvalidPools
from ascheduler.dra.counters import CounterLedger, pool_counters
from ascheduler.dra.store import ResourceObjects
from ascheduler.features import Features, Release
from ascheduler.model.dra import parse_device_class, parse_resource_claim, parse_resource_slice
from tests.unit.dra.helpers import DRIVER, allocated, claim, device_class, exactly

ON = Features.defaults(Release(1, 36))
OFF = Features.defaults(Release(1, 35))
Json = dict[str, Any]


def counter_slice(name: str, pool: str, sets: dict[str, dict[str, str]], *, node: str) -> Json:
    return {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2},
            "nodeName": node,
            "sharedCounters": [
                {"name": n, "counters": {c: {"value": v} for c, v in counters.items()}}
                for n, counters in sets.items()
            ],
        },
    }


def partition(name: str, counter_set: str, **counters: str) -> Json:
    return {
        "name": name,
        "consumesCounters": [
            {"counterSet": counter_set, "counters": {c: {"value": v} for c, v in counters.items()}}
        ],
    }


def device_slice(name: str, pool: str, devices: list[Json], **where: Any) -> Json:
    spec: Json = {
        "driver": DRIVER,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2},
        "devices": devices,
    }
    if "node" in where:
        spec["nodeName"] = where["node"]
    else:
        spec["perDeviceNodeSelection"] = True
    return {"metadata": {"name": name, "resourceVersion": "1"}, "spec": spec}


MIG = [
    counter_slice("gpu-0-counters", "gpu-0", {"gpu-0": {"memory": "40Gi"}}, node="n1"),
    device_slice(
        "gpu-0-parts",
        "gpu-0",
        [
            partition("full", "gpu-0", memory="40Gi"),
            partition("half-0", "gpu-0", memory="20Gi"),
            partition("half-1", "gpu-0", memory="20Gi"),
        ],
        node="n1",
    ),
]


def objects(*slices: Json, features: Features = ON, claims: tuple[Json, ...] = ()) -> Any:
    store = ResourceObjects(features)
    for raw in slices:
        store.handlers["ResourceSlice"].on_add(parse_resource_slice(raw))
    store.handlers["DeviceClass"].on_add(
        parse_device_class(device_class("gpu", f'device.driver == "{DRIVER}"'))
    )
    for raw in claims:
        store.handlers["ResourceClaim"].on_add(parse_resource_claim(raw))
    return store


def allocate(store: ResourceObjects, node: str, *claims: Json) -> list[list[str]] | None:
    table = store.table()
    found = Allocator(
        [parse_resource_claim(c) for c in claims],
        store.device_class,
        store.selectors,
        store.allocated,
        table.pools_for(node, {}),
        node,
    ).allocate()
    return None if found is None else [[d.device for d in a.devices] for a in found]


def one(name: str, count: int = 1) -> Json:
    return claim(name, exactly("r", count=count))


# -- parsing -----------------------------------------------------------------------------


def test_counter_sets_and_consumption_are_parsed_exactly() -> None:
    counters = parse_resource_slice(MIG[0])
    assert counters.shared_counters
    assert not counters.errors
    assert counters.counter_sets[0].name == "gpu-0"
    assert counters.counter_sets[0].counters == {"memory": Fraction(40 * 2**30)}
    parts = parse_resource_slice(MIG[1])
    assert [d.consumes_counters for d in parts.devices] == [True, True, True]
    assert parts.devices[1].consumes[0].counters == {"memory": Fraction(20 * 2**30)}


def test_bad_counters_are_errors_with_their_path_never_exceptions() -> None:
    raw = device_slice("bad", "p", [partition("d", "s", memory="lots")], node="n1")
    raw["spec"]["devices"][0]["consumesCounters"].append("nope")
    raw["spec"]["sharedCounters"] = {"name": "s"}
    parsed = parse_resource_slice(raw)
    assert "spec.devices[0].consumesCounters[0].counters[memory].value: not a quantity: 'lots'" in (
        parsed.errors
    )
    assert "spec.devices[0].consumesCounters[1]: expected an object" in parsed.errors
    assert "spec.sharedCounters: expected a list" in parsed.errors


# -- pools -------------------------------------------------------------------------------


def test_a_pool_is_invalid_when_a_device_names_a_missing_set_or_counter() -> None:
    sets = parse_resource_slice(MIG[0])
    for consumed, reason in (
        (partition("d", "other", memory="1"), "counter set other not found"),
        (partition("d", "gpu-0", cores="1"), "counter cores not found in counter set gpu-0"),
    ):
        devices = parse_resource_slice(device_slice("d", "gpu-0", [consumed], node="n1"))
        assert pool_counters(DRIVER, "gpu-0", [sets, devices]).invalid == reason
    twice = pool_counters(DRIVER, "gpu-0", [sets, sets])
    assert twice.invalid == "duplicate counter set name gpu-0"


def test_an_invalid_counter_pool_fails_the_node_as_invalid_pools() -> None:
    bad = device_slice("gpu-0-parts", "gpu-0", [partition("full", "gone", memory="1")], node="n1")
    store = objects(MIG[0], bad)
    try:
        allocate(store, "n1", one("c"))
    except InvalidPools:
        pass
    else:
        raise AssertionError("an invalid pool must be reported")


def test_the_ledger_refuses_what_would_overdraw_and_gives_back() -> None:
    sets = parse_resource_slice(MIG[0])
    parts = parse_resource_slice(MIG[1])
    counters = pool_counters(DRIVER, "gpu-0", [sets, parts])
    full, half, _ = (d.consumes for d in parts.devices)
    ledger = CounterLedger(lambda _device: False)
    assert ledger.take(counters, half)
    assert not ledger.take(counters, full)
    assert ledger.take(counters, half)
    ledger.give_back(counters, half)
    ledger.give_back(counters, half)
    assert ledger.take(counters, full)


# -- the allocator -----------------------------------------------------------------------


def test_the_full_partition_first_then_no_half_fits() -> None:
    store = objects(*MIG)
    assert allocate(store, "n1", one("a")) == [["full"]]
    taken = objects(
        *MIG, claims=(claim("a", exactly("r"), allocation=allocated("n1", ("gpu-0", "full"))),)
    )
    assert allocate(taken, "n1", one("b")) is None


def test_two_halves_fit_together_but_not_with_the_full_one() -> None:
    store = objects(*MIG)
    assert allocate(store, "n1", one("a", count=2)) == [["half-0", "half-1"]]
    # Two claims of one device each: the first takes the full partition, so the second
    # cannot have a half; the search backtracks to two halves.
    assert allocate(store, "n1", one("a"), one("b")) == [["half-0"], ["half-1"]]
    assert allocate(store, "n1", one("a", count=3)) is None


def shared_set() -> tuple[Json, Json]:
    """A counter set on n1 and two devices drawing on it, one on n1 and one on n2."""
    sets = counter_slice("shared-counters", "shared", {"s": {"memory": "2"}}, node="n1")
    per_device = device_slice(
        "shared-parts",
        "shared",
        [
            {**partition("on-n1", "s", memory="2"), "nodeName": "n1"},
            {**partition("on-n2", "s", memory="1"), "nodeName": "n2"},
        ],
    )
    return sets, per_device


def test_counters_taken_by_a_device_on_another_node_count_too() -> None:
    sets, per_device = shared_set()
    store = objects(sets, per_device)
    assert allocate(store, "n1", one("a")) == [["on-n1"]]
    assert allocate(store, "n2", one("a")) == [["on-n2"]]
    busy = claim("x", exactly("r"), allocation=allocated(None, ("shared", "on-n2")))
    store = objects(sets, per_device, claims=(busy,))
    assert allocate(store, "n1", one("a")) is None
    assert allocate(store, "n2", one("a")) is None


def test_gate_off_ignores_counter_slices_and_never_allocates_partitions() -> None:
    store = objects(*MIG, features=OFF)
    assert allocate(store, "n1", one("a")) is None
    table = store.table()
    assert not table.consumes.any()
    assert not table.usable.any()


def test_devices_without_counters_are_untouched_by_the_gate() -> None:
    plain = device_slice("plain", "plain", [{"name": "d0"}], node="n1")
    plain["spec"]["pool"]["resourceSliceCount"] = 1
    for features in (ON, OFF):
        assert allocate(objects(plain, features=features), "n1", one("a")) == [["d0"]]


def test_per_device_node_selection_is_what_the_allocation_writes() -> None:
    sets = counter_slice("shared-counters", "shared", {"s": {"memory": "2"}}, node="n1")
    per_device = device_slice(
        "shared-parts",
        "shared",
        [
            {**partition("local", "s", memory="1"), "nodeName": "n2"},
            {**partition("anywhere", "s", memory="1"), "allNodes": True},
        ],
    )
    store = objects(sets, per_device)
    table = store.table()

    def written(node: str) -> Any:
        found = Allocator(
            [parse_resource_claim(claim("c", exactly("r")))],
            store.device_class,
            store.selectors,
            store.allocated,
            table.pools_for(node, {}),
            node,
        ).allocate()
        assert found is not None
        return [d.device for d in found[0].devices], found[0].node_selector

    local = {"key": "metadata.name", "operator": "In", "values": ["n2"]}
    assert written("n2") == (["local"], {"nodeSelectorTerms": [{"matchFields": [local]}]})
    assert written("n1") == (["anywhere"], None)
    assert written("n3") == (["anywhere"], None)


def test_a_set_overdrawn_already_blocks_every_partition_of_the_pool() -> None:
    """kube checks every counter of every set of the pool: a set allocated devices overdraw
    (its slice shrank meanwhile) blocks devices consuming only from another set."""
    sets = counter_slice(
        "two-counters", "two", {"small": {"memory": "1"}, "other": {"memory": "4"}}, node="n1"
    )
    parts = device_slice(
        "two-parts",
        "two",
        [partition("big", "small", memory="2"), partition("elsewhere", "other", memory="1")],
        node="n1",
    )
    assert allocate(objects(sets, parts), "n1", one("a")) == [["elsewhere"]]
    busy = claim("x", exactly("r"), allocation=allocated("n1", ("two", "big")))
    assert allocate(objects(sets, parts, claims=(busy,)), "n1", one("a")) is None


def test_an_invalid_counter_pool_is_seen_where_its_counter_slice_reaches() -> None:
    """kube sees a pool from every node one of its slices reaches; before 1.37 a counter
    slice reaches every node."""
    bad = device_slice("gpu-0-parts", "gpu-0", [partition("full", "gone", memory="1")], node="n1")
    for features, seen in ((ON, {"n1", "n2"}), (Features.defaults(Release(1, 37)), {"n1"})):
        table = objects(MIG[0], bad, features=features).table()
        assert {n for n in ("n1", "n2") if table.pools_for(n, {})} == seen
        assert all(p.invalid for n in seen for p in table.pools_for(n, {}))


def test_a_nodes_local_pools_are_named_as_the_search_would_get_them() -> None:
    sets, per_device = shared_set()
    table = objects(*MIG, sets, per_device).table()
    for node in ("n1", "n2", "n3"):
        pools = table.pools_for(node, {})
        assert table.local_pools(node) == tuple((p.driver, p.name) for p in pools)
    assert table.local_pools("n1") == ((DRIVER, "gpu-0"), (DRIVER, "shared"))
    assert table.local_pools("n3") == ()
    # a device placed by labels reaches nodes the table cannot name without asking
    placed = device_slice(
        "placed", "placed", [{**partition("p", "s", memory="1"), "allNodes": True}]
    )
    assert objects(*MIG, placed).table().local_pools("n1") is None
