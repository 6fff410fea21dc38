"""DynamicResources: PreEnqueue and PreFilter messages, the columnar Filter against the exact
search, Reserve's in-flight allocations, the firstAvailable score, and the claim hint."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from ascheduler.cache import Cache
from ascheduler.features import (
    DRA_ADMIN_ACCESS,
    DRA_PRIORITIZED_LIST,
    SUPPORTED,
    Features,
    Release,
)
from ascheduler.framework import (
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    PreScorePlugin,
    Status,
)
from ascheduler.locks.devicelocks import LABEL_PREFIX, pool_label
from ascheduler.model import parse_pod
from ascheduler.model.dra import (
    AllocatedDevice,
    Allocation,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
)
from ascheduler.plugins.dynamicresources.binding import _pool_labels
from ascheduler.plugins.dynamicresources.state import (
    CANNOT_ALLOCATE,
    NO_NEW_CLAIMS,
    NOT_AVAILABLE,
    SELECTORS_PENDING,
    STATE_NOT_FOUND,
    TIMED_OUT,
    _State,
)
from tests.kit import explained, make_cache, make_plugin, node, pod, rejected_reasons
from tests.unit.dra.helpers import (
    DRIVER,
    allocated,
    claim,
    device,
    device_class,
    exactly,
    first_available,
    slice_,
)

NAME = "DynamicResources"


def cluster(
    gpus: dict[str, int], *classes: dict[str, Any], features: Features | None = None
) -> Cache:
    cache = make_cache([node(n) for n in ("n1", "n2", "n3", "n4")], features=features)
    for name, count in gpus.items():
        cache.resources.handlers["ResourceSlice"].on_add(
            parse_resource_slice(
                slice_(
                    name,
                    [device(f"g{i}", model="a100" if i % 2 else "t4") for i in range(count)],
                    node=name,
                )
            )
        )
    for raw in classes or (device_class("gpu", f'device.driver == "{DRIVER}"'),):
        cache.resources.handlers["DeviceClass"].on_add(parse_device_class(raw))
    return cache


def add_claim(cache: Cache, raw: dict[str, Any]) -> None:
    cache.resources.handlers["ResourceClaim"].on_add(parse_resource_claim(raw))


def claiming(*names: str, uid: str = "pod-uid") -> dict[str, Any]:
    raw = pod("x", namespace="ns")
    raw["metadata"]["uid"] = uid
    raw["spec"]["resourceClaims"] = [
        {"name": f"c{i}", "resourceClaimName": n} for i, n in enumerate(names)
    ]
    return raw


def filtered(cache: Cache, raw_pod: dict[str, Any]) -> tuple[Any, Any, CycleState]:
    plugin = make_plugin(NAME, cache)
    state = CycleState()
    info = parse_pod(raw_pod)
    _, status = plugin.pre_filter(state, info, cache.table)
    assert status.ok, status
    return plugin, plugin.filter(state, info, cache.table), state


def test_nodes_without_enough_free_devices_cannot_allocate() -> None:
    cache = cluster({"n1": 1, "n2": 2, "n3": 4})
    add_claim(cache, claim("c", exactly("r", count=2)))
    _, result, _ = filtered(cache, claiming("c"))
    assert rejected_reasons(result, cache) == {"n1": [CANNOT_ALLOCATE], "n4": [CANNOT_ALLOCATE]}
    assert all(r.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE for r in result.rejections)


def test_selectors_count_only_matching_devices() -> None:
    cache = cluster({"n1": 1, "n2": 2, "n3": 4})
    add_claim(
        cache,
        claim("c", exactly("r", "gpu", 2, 'device.attributes["gpu.example.com"].model == "a100"')),
    )
    _, result, _ = filtered(cache, claiming("c"))
    assert sorted(rejected_reasons(result, cache)) == ["n1", "n2", "n4"]


def test_columnar_verdicts_agree_with_the_exact_search() -> None:
    """Random device counts and allocations: counting and the search give one verdict."""
    rng = np.random.default_rng(7)
    for trial in range(20):
        counts = {f"n{i}": int(rng.integers(0, 4)) for i in range(1, 5)}
        cache = cluster(counts)
        for n, count in counts.items():
            for i in range(count):
                if rng.random() < 0.4:
                    add_claim(
                        cache,
                        claim(f"busy-{n}-{i}", exactly("r"), allocation=allocated(n, (n, f"g{i}"))),
                    )
        need = int(rng.integers(1, 3))
        add_claim(cache, claim("c", exactly("r", count=need)))
        plugin, result, state = filtered(cache, claiming("c"))
        rejected = set(rejected_reasons(result, cache))
        for name in ("n1", "n2", "n3", "n4"):
            found = plugin._allocate_on(state.read(NAME), name)
            fits = not isinstance(found, Status)
            assert (name not in rejected) == fits, (trial, counts, name)


def test_overlapping_requests_run_the_search() -> None:
    # Two requests of one class on two devices: counting per request says 2 >= 1 twice;
    # the search gives each its own device, so n1 (one device) fails and n2 fits.
    cache = cluster({"n1": 1, "n2": 2})
    add_claim(cache, claim("c", exactly("a"), exactly("b")))
    _, result, _ = filtered(cache, claiming("c"))
    assert rejected_reasons(result, cache) == {
        "n1": [CANNOT_ALLOCATE],
        "n3": [CANNOT_ALLOCATE],
        "n4": [CANNOT_ALLOCATE],
    }


def test_allocated_claim_admits_only_its_nodes_and_postfilter_deallocates_it() -> None:
    cache = cluster({"n1": 1, "n2": 1})
    add_claim(cache, claim("c", exactly("r"), allocation=allocated("n1", ("n1", "g0"))))
    _, result, state = filtered(cache, claiming("c"))
    assert rejected_reasons(result, cache) == {n: [NOT_AVAILABLE] for n in ("n2", "n3", "n4")}
    assert state.read(NAME).unavailable == {0}


def test_reserve_holds_devices_for_the_next_cycle_and_unreserve_frees_them() -> None:
    cache = cluster({"n1": 1})
    add_claim(cache, claim("a", exactly("r")))
    add_claim(cache, claim("b", exactly("r"), uid="uid-b"))
    plugin, result, state = filtered(cache, claiming("a"))
    assert "n1" not in rejected_reasons(result, cache)
    info = parse_pod(claiming("a"))
    assert plugin.reserve(state, info, "n1").ok
    assert cache.resources.allocated((DRIVER, "n1", "g0"))
    _, result_b, _ = filtered(cache, claiming("b", uid="other"))
    assert rejected_reasons(result_b, cache)["n1"] == [CANNOT_ALLOCATE]
    plugin.unreserve(state, info, "n1")
    assert not cache.resources.allocated((DRIVER, "n1", "g0"))


def test_pre_bind_pre_flight_has_work_only_for_a_pod_with_claims() -> None:
    cache = cluster({"n1": 1})
    add_claim(cache, claim("a", exactly("r")))
    plugin, _, state = filtered(cache, claiming("a"))
    info = parse_pod(claiming("a"))
    assert plugin.reserve(state, info, "n1").ok
    assert plugin.pre_bind_pre_flight(state, info, "n1").ok
    plain = pod("plain", namespace="ns")
    state = CycleState()
    plugin.pre_filter(state, parse_pod(plain), cache.table)
    assert plugin.pre_bind_pre_flight(state, parse_pod(plain), "n1").code is Code.SKIP


def test_claim_in_flight_makes_prefilter_wait() -> None:
    cache = cluster({"n1": 2})
    add_claim(cache, claim("a", exactly("r")))
    plugin, _, state = filtered(cache, claiming("a"))
    assert plugin.reserve(state, parse_pod(claiming("a")), "n1").ok
    _, status = plugin.pre_filter(CycleState(), parse_pod(claiming("a", uid="again")), cache.table)
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("resource claim ns/a is in the process of being allocated",)


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", 'resourceclaim.resource.k8s.io "c" not found'),
        ("no-class", "request r: device class missing does not exist"),
        ("in-use", "resourceclaim in use"),
    ],
)
def test_prefilter_messages(setup: str, message: str) -> None:
    cache = cluster({"n1": 1})
    plugin = make_plugin(NAME, cache)
    if setup == "no-class":
        add_claim(cache, claim("c", exactly("r", "missing")))
    if setup == "in-use":
        users = [{"resource": "pods", "name": f"p{i}", "uid": f"u{i}"} for i in range(256)]
        add_claim(
            cache,
            claim("c", exactly("r"), allocation=allocated("n1", ("n1", "g0")), reserved_for=users),
        )
    _, status = plugin.pre_filter(CycleState(), parse_pod(claiming("c")), cache.table)
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (message,)


def test_pre_enqueue_waits_for_a_template_claim_owned_by_the_pod() -> None:
    cache = cluster({"n1": 1})
    plugin = make_plugin(NAME, cache)
    raw = pod("x", namespace="ns")
    raw["metadata"]["uid"] = "pod-uid"
    raw["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    status = plugin.pre_enqueue(parse_pod(raw))
    assert status.reasons == ('pod "ns/x": ResourceClaim not created yet',)
    raw["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "x-gpu-abc"}]}
    assert plugin.pre_enqueue(parse_pod(raw)).reasons == (
        'resourceclaim.resource.k8s.io "x-gpu-abc" not found',
    )
    add_claim(cache, claim("x-gpu-abc", exactly("r"), owner="someone-else"))
    assert plugin.pre_enqueue(parse_pod(raw)).reasons == (
        "ResourceClaim ns/x-gpu-abc was not created for pod ns/x (pod is not owner)",
    )
    add_claim(cache, claim("x-gpu-abc", exactly("r"), owner="pod-uid", rv="2"))
    assert plugin.pre_enqueue(parse_pod(raw)).ok
    assert plugin.queueing_hint(
        parse_pod(raw),
        ClusterEvent.RESOURCE_CLAIM_ADD,
        None,
        parse_resource_claim(claim("x-gpu-abc", exactly("r"), owner="pod-uid")),
    )


def test_first_available_scores_prefer_earlier_subrequests() -> None:
    cache = cluster(
        {"n1": 1, "n2": 2},
        device_class("gpu", "true"),
    )
    add_claim(cache, claim("c", first_available("r", ("two", "gpu", 2), ("one", "gpu", 1))))
    plugin, result, state = filtered(cache, claiming("c"))
    assert sorted(rejected_reasons(result, cache)) == ["n3", "n4"]
    feasible = np.array([0, 1])
    info = parse_pod(claiming("c"))
    assert plugin.score(state, info, cache.table, feasible).tolist() == [7, 8]


@pytest.mark.parametrize(
    ("release", "gate", "expected"),
    [
        pytest.param(Release(1, 35), True, [7, 8], id="1.35-new-claims-only"),
        pytest.param(Release(1, 36), True, [14, 15], id="1.36-allocated-add-theirs"),
        pytest.param(Release(1, 37), True, [14, 15], id="1.37-allocated-add-theirs"),
        pytest.param(Release(1, 36), False, [0, 0], id="1.36-gate-off"),
    ],
)
def test_claims_allocated_before_score_their_own_subrequest_from_1_36(
    release: Release, gate: bool, expected: list[int]
) -> None:
    """kube-scheduler's computeScore from 1.36 takes an allocated claim's own allocation
    (its chosen `firstAvailable` subrequest, the same on every node) beside the new ones;
    1.35 scored only the new; 1.36 with DRAPrioritizedList off scores 0."""
    cache = cluster({"n1": 1, "n2": 2, "n3": 1}, device_class("gpu", "true"))
    add_claim(cache, claim("c", first_available("r", ("two", "gpu", 2), ("one", "gpu", 1))))
    shared = allocated(None, ("n3", "g0"))
    shared["devices"]["results"][0]["request"] = "r/one"
    add_claim(
        cache,
        claim(
            "shared",
            first_available("r", ("two", "gpu", 2), ("one", "gpu", 1)),
            allocation=shared,
            reserved_for=[{"resource": "pods", "name": "other", "uid": "other-uid"}],
        ),
    )
    features = Features.defaults(release)
    if not gate:
        features = Features(release, features.enabled - {DRA_PRIORITIZED_LIST})
    plugin = make_plugin(NAME, cache, features=features)
    state = CycleState()
    info = parse_pod(claiming("c", "shared"))
    _, status = plugin.pre_filter(state, info, cache.table)
    assert status.ok, status
    result = plugin.filter(state, info, cache.table)
    assert sorted(rejected_reasons(result, cache)) == ["n3", "n4"]
    feasible = np.array([cache.table.index["n1"], cache.table.index["n2"]])
    assert plugin.score(state, info, cache.table, feasible).tolist() == expected


@pytest.mark.parametrize(
    ("release", "gate", "request_", "message"),
    [
        pytest.param(
            Release(1, 36),
            DRA_PRIORITIZED_LIST,
            first_available("r", ("two", "gpu", 2), ("one", "gpu", 1)),
            "claim ns/c, request r: has subrequests, but the DRAPrioritizedList feature is "
            "disabled",
            id="subrequests",
        ),
        pytest.param(
            Release(1, 35),
            DRA_ADMIN_ACCESS,
            exactly("r", admin=True),
            "claim ns/c, request r: admin access is requested, but the feature is disabled",
            id="admin-access",
        ),
    ],
)
def test_a_claim_using_a_feature_turned_off_fails_the_attempt_with_kube_schedulers_words(
    release: Release, gate: str, request_: dict[str, Any], message: str
) -> None:
    """kube-scheduler's allocator refuses, on every node, a claim with subrequests or admin
    access while that feature's gate is off (claims made before it was
    turned off): an error, never an allocation that ignores the field. On, it allocates."""
    features = Features.defaults(release)
    on = Features(release, features.enabled | {gate})
    off = Features(release, features.enabled - {gate})
    for enabled, refused in ((on, False), (off, True)):
        cache = cluster({"n1": 2}, device_class("gpu", "true"), features=enabled)
        add_claim(cache, claim("c", request_))
        plugin = make_plugin(NAME, cache, features=enabled)
        state = CycleState()
        info = parse_pod(claiming("c"))
        _, status = plugin.pre_filter(state, info, cache.table)
        assert status.ok, status
        result = plugin.filter(state, info, cache.table)
        if not refused:
            assert sorted(rejected_reasons(result, cache)) == ["n2", "n3", "n4"]
            continue
        assert [r.code for r in result.rejections] == [Code.ERROR]
        assert result.rejections[0].reason == message


@pytest.mark.parametrize("claims", [pytest.param((), id="no-claims"), ("c",)])
def test_score_is_never_skipped(claims: tuple[str, ...]) -> None:
    """No PreScore (none in kube-scheduler's either): a pod without claims, or with claims
    offering no `firstAvailable` choice, scores 0 on every feasible node."""
    cache = cluster({"n1": 1, "n2": 1}, device_class("gpu", "true"))
    add_claim(cache, claim("c", exactly("r")))
    plugin = make_plugin(NAME, cache)
    assert not isinstance(plugin, PreScorePlugin)
    state = CycleState()
    info = parse_pod(claiming(*claims))
    _, status = plugin.pre_filter(state, info, cache.table)
    if status.code is not Code.SKIP:
        assert plugin.filter(state, info, cache.table) is not None  # n3, n4: no devices
    feasible = np.array([cache.table.index["n1"], cache.table.index["n2"]])
    got = plugin.normalize(state, info, plugin.score(state, info, cache.table, feasible))
    assert got.tolist() == [0, 0]


def test_a_failing_selector_fails_the_attempt_with_an_error() -> None:
    cache = cluster({"n1": 1}, device_class("gpu", 'device.attributes["gpu.example.com"].nosuch'))
    add_claim(cache, claim("c", exactly("r")))
    _, result, _ = filtered(cache, claiming("c"))
    assert [r.code for r in result.rejections] == [Code.ERROR]
    assert (
        "class gpu: selector #0 on device gpu.example.com/n1/g0: "
        "CEL runtime error: no such key: nosuch" in result.rejections[0].reason
    )


@pytest.mark.parametrize("release", SUPPORTED, ids=str)
def test_post_filter_words_for_each_state(release: Release) -> None:
    """kube-scheduler's: no state (PreFilter never ran) is an error reading it, `not
    found`; a pod without claims, or rejected by PreFilter, has no claims to deallocate:
    said so until 1.36, a rejection without words from 1.37."""
    words = "" if release >= Release(1, 37) else NO_NEW_CLAIMS
    cache = cluster({"n1": 1})
    plugin = make_plugin(NAME, cache, features=Features.defaults(release))
    diagnosis = Diagnosis(cache.table.n)
    bare = parse_pod(pod("bare", namespace="ns"))
    never = plugin.post_filter(CycleState(), bare, cache.table, diagnosis).status
    assert (never.code, never.message) == (Code.ERROR, STATE_NOT_FOUND)

    state = CycleState()
    _, status = plugin.pre_filter(state, bare, cache.table)
    assert status.code is Code.SKIP
    skipped = plugin.post_filter(state, bare, cache.table, diagnosis).status
    assert (skipped.code, skipped.message) == (Code.UNSCHEDULABLE, words)

    state = CycleState()
    missing = parse_pod(claiming("nowhere"))
    _, status = plugin.pre_filter(state, missing, cache.table)
    assert status.rejected
    refused = plugin.post_filter(state, missing, cache.table, diagnosis).status
    assert (refused.code, refused.message) == (Code.UNSCHEDULABLE, words)


def test_post_filter_gives_no_reason_from_1_37() -> None:
    """kube-scheduler 1.37's PostFilter returns a bare Unschedulable where 1.35 and 1.36
    said `no new claims to deallocate`: the pod's message names no reason of this plugin."""
    cache = cluster({"n1": 1})
    diagnosis = Diagnosis(cache.table.n)
    bare = parse_pod(pod("bare", namespace="ns"))
    for release, said in ((Release(1, 36), (NO_NEW_CLAIMS,)), (Release(1, 37), ())):
        plugin = make_plugin(NAME, cache, features=Features.defaults(release))
        state = CycleState()
        plugin.pre_filter(state, bare, cache.table)
        status = plugin.post_filter(state, bare, cache.table, diagnosis).status
        assert (status.code, status.reasons) == (Code.UNSCHEDULABLE, said)


def test_claims_are_labelled_per_pool_and_lock_the_node_or_the_pool() -> None:

    cache = cluster({"n1": 2})
    fabric = slice_("fabric", [device("f0"), device("f1")], all_nodes=True)
    cache.resources.handlers["ResourceSlice"].on_add(parse_resource_slice(fabric))
    plugin = make_plugin(NAME, cache)
    local = AllocatedDevice("r", DRIVER, "n1", "g0")
    wide = AllocatedDevice("r", DRIVER, "fabric", "f1")
    admin = AllocatedDevice("r", DRIVER, "fabric", "f0", admin_access=True)

    def targets(*devices: AllocatedDevice) -> tuple[bool, list[tuple[str, str]]]:
        s = _State([], [], [])
        s.allocations[0] = Allocation(devices=devices)
        return plugin.writer.lock_targets(s)

    assert targets(local) == (True, [])
    assert targets(wide) == (False, [(DRIVER, "fabric")])
    assert targets(local, wide) == (True, [(DRIVER, "fabric")])
    assert targets(admin) == (False, [])  # admin access takes no device from anyone
    gone = AllocatedDevice("r", DRIVER, "vanished", "v0")
    assert targets(gone) == (True, [(DRIVER, "vanished")])  # unknown: both kinds of lock

    stale = {pool_label(DRIVER, "old"): "true", "app": "train"}
    labels = _pool_labels(stale, Allocation(devices=(local, wide)))
    assert labels == {
        "app": "train",
        pool_label(DRIVER, "n1"): "true",
        pool_label(DRIVER, "fabric"): "true",
    }
    assert all(k.startswith(LABEL_PREFIX) for k in labels if k != "app")
    assert pool_label(DRIVER, "n1") != pool_label(DRIVER, "n2")
    assert len(pool_label(DRIVER, "x" * 200).split("/", 1)[1]) <= 63


def test_the_claim_limit_fails_the_attempt_at_filter_as_kube_schedulers_allocator_does() -> None:
    cache = cluster({"n1": 1, "n2": 40})
    add_claim(cache, claim("over", exactly("r", count=33)))
    _, result, _ = filtered(cache, claiming("over"))
    errors = [r.reason for r in result.rejections if r.code is Code.ERROR]
    assert errors == [
        "claim ns/over, request r: adding 33 devices exceeds the claim limit of 32, "
        "with 0 already accounted for"
    ]

    # An All request counts what it selects on each node: 40 on n2 is over the limit.
    add_claim(cache, claim("every", exactly("r", mode="All"), uid="uid-every"))
    _, result, _ = filtered(cache, claiming("every"))
    errors = [r.reason for r in result.rejections if r.code is Code.ERROR]
    assert errors == [
        "claim ns/every, request r: adding 40 devices exceeds the claim limit of 32, "
        "with 0 already accounted for"
    ]


def test_an_all_request_meeting_an_invalid_pool_fails_the_attempt() -> None:
    cache = cluster({"n1": 1})
    for name in ("twice-a", "twice-b"):
        raw = slice_(name, [device("g0")], node="n2", pool="dup")
        raw["spec"]["pool"]["resourceSliceCount"] = 2
        cache.resources.handlers["ResourceSlice"].on_add(parse_resource_slice(raw))
    add_claim(cache, claim("every", exactly("r", mode="All")))
    _, result, _ = filtered(cache, claiming("every"))
    errors = [r.reason for r in result.rejections if r.code is Code.ERROR]
    assert errors == [
        f"claim ns/every, request r: asks for all devices, but resource pool {DRIVER}/dup is "
        "currently invalid"
    ]


def test_explain_counts_the_devices_each_request_needs_on_the_node() -> None:
    cache = cluster({"n1": 1, "n2": 2, "n3": 3})
    add_claim(cache, claim("c", exactly("r", count=2)))
    add_claim(cache, claim("fa", first_available("pick", ("big", "gpu", 3), ("small", "gpu", 1))))
    add_claim(
        cache, claim("busy", exactly("r"), allocation=allocated("n3", ("n3", "g0"), ("n3", "g1")))
    )
    plugin = make_plugin(NAME, cache)
    r = "resourceclaim c: request r (class gpu) needs 2 device(s)"
    assert explained(plugin, claiming("c"), cache) == {
        "n1": [f"{r}, 1 free here"],
        "n3": [f"{r}, 1 free here"],
        "n4": [f"{r}, 0 free here"],
    }
    got = explained(plugin, claiming("fa"), cache)
    assert got["n4"] == [
        "resourceclaim fa: request big (class gpu) needs 3 device(s), 0 free here; "
        "or request small (class gpu) needs 1 device(s), 0 free here"
    ]
    assert sorted(got) == ["n4"]
    # Overlapping requests: each counted alone fits n1, together they do not.
    add_claim(cache, claim("two", exactly("a"), exactly("b")))
    assert explained(plugin, claiming("two"), cache)["n1"] == [
        "each request's devices are here, but no allocation of them meets the claims' "
        "constraints together (or the search timed out)"
    ]
    add_claim(cache, claim("held", exactly("r"), allocation=allocated("n2", ("n2", "g0"))))
    assert explained(plugin, claiming("held"), cache)["n1"] == [
        "resourceclaim held is allocated devices this node cannot reach"
    ]


async def test_a_pod_with_a_costly_selector_waits_outside_the_queue_until_it_is_evaluated() -> None:
    """PreEnqueue holds the pod while a child process evaluates the selector, wakes it when
    done; the cycle then has every result and never evaluates a costly one itself."""
    costly = 'device.attributes["gpu.example.com"].model.matches("^a1")'
    cache = cluster({"n1": 1, "n2": 2, "n3": 4})
    add_claim(cache, claim("c", exactly("r", "gpu", 2, costly)))
    plugin = make_plugin(NAME, cache)
    woken: list[str] = []
    done = asyncio.Event()

    def wake(uids: Any) -> None:
        woken.extend(uids)
        done.set()

    plugin.handle.set_activator(wake)
    info = parse_pod(claiming("c"))
    try:
        status = plugin.pre_enqueue(info)
        assert not status.ok
        assert status.message == SELECTORS_PENDING
        await asyncio.wait_for(done.wait(), 60)
        assert woken == ["pod-uid"]
        assert plugin.pre_enqueue(info).ok
        state = CycleState()
        _, status = plugin.pre_filter(state, info, cache.table)
        assert status.ok
        result = plugin.filter(state, info, cache.table)
        assert sorted(rejected_reasons(result, cache)) == ["n1", "n2", "n4"]
    finally:
        await cache.resources.selectors.close()


async def test_costly_results_the_cycle_lacks_time_the_nodes_out() -> None:
    """A slice that changed after PreEnqueue: its devices' costly results are not known in
    the cycle, so their nodes fail as at filterTimeout, and the pod is woken when known."""
    costly = 'device.attributes["gpu.example.com"].model.matches("^a1")'
    cache = cluster({"n1": 2, "n2": 2})
    add_claim(cache, claim("c", exactly("r", "gpu", 1, costly)))
    plugin = make_plugin(NAME, cache)
    done = asyncio.Event()
    plugin.handle.set_activator(lambda _uids: done.set())
    info = parse_pod(claiming("c"))
    try:
        state = CycleState()
        _, status = plugin.pre_filter(state, info, cache.table)
        assert status.ok
        result = plugin.filter(state, info, cache.table)
        assert rejected_reasons(result, cache) == {
            "n1": [TIMED_OUT],
            "n2": [TIMED_OUT],
            "n3": [CANNOT_ALLOCATE],
            "n4": [CANNOT_ALLOCATE],
        }
        await asyncio.wait_for(done.wait(), 60)
        state = CycleState()
        plugin.pre_filter(state, info, cache.table)
        result = plugin.filter(state, info, cache.table)
        assert sorted(rejected_reasons(result, cache)) == ["n3", "n4"]
    finally:
        await cache.resources.selectors.close()
