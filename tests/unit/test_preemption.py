"""Evictions off the scheduling cycle: the writes kube-scheduler makes per victim, retries,
victims already gone, permanent failures, pods waiting on Permit, and nominations cleared."""

from __future__ import annotations

import asyncio
from typing import Any

from ascheduler.events import Related, StatusWriter
from ascheduler.features import Features, Release
from ascheduler.framework.handle import group_uid
from ascheduler.framework.interface import Code
from ascheduler.framework.nominated import Nominator
from ascheduler.framework.waiting import WaitingPod, WaitingPods
from ascheduler.kube import ApiError
from ascheduler.model import PodInfo, parse_pod
from ascheduler.model.podgroups import parse_scheduling_group
from ascheduler.preemption import Evictions
from tests.kit import on, pod


class FakeKube:
    """Records requests; `fail[(method, name)]` lists the HTTP statuses to answer first."""

    def __init__(self, fail: dict[tuple[str, str], list[int]] | None = None) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.fail = fail or {}

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> None:
        name = path.split("/pods/")[1].split("/")[0]
        self.calls.append((method, path, body))
        left = self.fail.get((method, name))
        if left:
            status = left.pop(0)
            raise ApiError(status, "Failure", f"{status} for {name}", method=method, path=path)


def victim(name: str, node: str = "n", **meta: Any) -> PodInfo:
    raw = on(node, pod(name, namespace="ns", priority=0))
    raw["metadata"].update(meta)
    return parse_pod(raw)


PREEMPTOR = parse_pod(pod("vip", namespace="ns", priority=100, scheduler_name="ascheduler"))


def evictions(
    kube: FakeKube,
    nominator: Nominator | None = None,
    *,
    going: set[str] | None = None,
    gated: set[str] | None = None,
    release: Release | None = None,
    present: set[str] | None = None,
) -> tuple[Evictions, list[str]]:
    """Evictions whose cache reads the pods in `going` as deleting, and whose queue holds
    the pods in `gated` gated."""
    activated: list[str] = []
    ev = Evictions(
        kube,  # type: ignore[arg-type]
        StatusWriter(None, hostname="test"),
        nominator or Nominator(),
        WaitingPods(),
        activated.append,
        going=(going if going is not None else set()).__contains__,
        gated=(gated if gated is not None else set()).__contains__,
        features=None if release is None else Features.defaults(release),
        gone=None if present is None else (lambda uid: uid not in present),
    )
    return ev, activated


async def finish(ev: Evictions) -> None:
    for _ in range(200):
        if not len(ev):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("evictions did not finish")


def written(ev: Evictions) -> list[Any]:
    out = []
    while not ev.writer.queue.empty():
        out.append(ev.writer.queue.get_nowait())
    return out


async def test_each_victim_is_marked_deleted_and_told() -> None:
    kube = FakeKube()
    ev, activated = evictions(kube)
    ev.start(PREEMPTOR, "n", [victim("a"), victim("b")])
    assert ev.running(PREEMPTOR.uid)
    await finish(ev)
    # Done: the preemptor is left to the events its victims' deletion sends, as
    # kube-scheduler leaves it (a victim slow to terminate does not make it retry).
    assert activated == []
    for name in ("a", "b"):
        patch = next(c for c in kube.calls if c[0] == "PATCH" and f"/pods/{name}/" in c[1])
        assert patch[1] == f"/api/v1/namespaces/ns/pods/{name}/status"
        [condition] = patch[2]["status"]["conditions"]
        assert condition["type"] == "DisruptionTarget"
        assert condition["status"] == "True"
        assert condition["reason"] == "PreemptionByScheduler"
        assert condition["message"] == (
            "ascheduler: preempting to accommodate a higher priority pod"
        )
        delete = next(c for c in kube.calls if c[0] == "DELETE" and c[1].endswith(f"/{name}"))
        assert delete[2] == {"preconditions": {"uid": f"uid-{name}"}}
        # The condition is written before the delete.
        assert kube.calls.index(patch) < kube.calls.index(delete)
    events = [e for e in written(ev) if getattr(e, "reason", "") == "Preempted"]
    assert sorted(e.pod.name for e in events) == ["a", "b"]
    assert {e.note for e in events} == {"Preempted by pod uid-vip on node n"}
    assert {e.related.name for e in events} == {"vip"}
    assert not ev.running(PREEMPTOR.uid)


async def test_a_group_preemption_evicts_for_the_podgroup_and_names_it() -> None:
    """kube-scheduler's `actuatePodGroupPreemption`: the condition and the events say
    `podgroup`, the event is related to the PodGroup and names node `cluster` (the
    preemption's domain), and the group's uid is what PreEnqueue asks about."""
    kube = FakeKube({("DELETE", "b"): [403]})
    ev, activated = evictions(kube, release=Release(1, 37))
    train = parse_scheduling_group(
        {
            "metadata": {"name": "train", "namespace": "ns", "uid": "pg-uid"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "priority": 100},
        }
    )
    ev.start_group(train, "ascheduler", [victim("a"), victim("b")], ["uid-m0", "uid-m1"])
    assert group_uid(train) == "pg-uid"
    assert ev.running("pg-uid")
    await finish(ev)
    patch = next(c for c in kube.calls if c[0] == "PATCH" and "/pods/a/" in c[1])
    [condition] = patch[2]["status"]["conditions"]
    assert (
        condition["message"] == "ascheduler: preempting to accommodate a higher priority podgroup"
    )
    [event] = [e for e in written(ev) if getattr(e, "reason", "") == "Preempted"]
    assert (event.pod.name, event.note) == ("a", "Preempted by podgroup pg-uid on node cluster")
    assert event.related == Related(
        "scheduling.k8s.io/v1beta1", "PodGroup", "ns", "train", "pg-uid"
    )
    # b could not be deleted: the members are let out to try again.
    assert activated == ["uid-m0", "uid-m1"]
    assert not ev.running("pg-uid")


async def test_a_victim_already_terminating_or_gone_needs_nothing_more() -> None:
    kube = FakeKube({("PATCH", "gone"): [404]})
    ev, activated = evictions(kube)
    going = victim("going", deletionTimestamp="2030-01-01T00:00:00Z")
    ev.start(PREEMPTOR, "n", [going, victim("gone")])
    await finish(ev)
    assert [c[0] for c in kube.calls] == ["PATCH"]  # gone: no delete; going: nothing at all
    assert activated == []
    assert written(ev) == []


async def test_the_preemptor_is_held_until_its_last_victim_is_going() -> None:
    """PreEnqueue holds the preemptor while victims are being evicted, and no longer once
    the cache has the last one deleting, although the task itself is not over yet."""
    kube = FakeKube({("DELETE", "b"): [503] * 3})
    going: set[str] = set()
    ev, _ = evictions(kube, going=going)
    ev.start(PREEMPTOR, "n", [victim("a"), victim("b")])
    await asyncio.sleep(0.05)  # a evicted; b's delete being retried
    assert len(ev) == 1
    assert ev.running(PREEMPTOR.uid)
    going.add("uid-a")  # not the last victim: still held
    assert ev.running(PREEMPTOR.uid)
    going.add("uid-b")
    assert not ev.running(PREEMPTOR.uid)
    assert len(ev) == 1
    await finish(ev)


async def test_a_preemptor_gated_meanwhile_is_let_out_when_it_is_over() -> None:
    """Held while its last victim's deletion event came: nothing else will let it out."""
    kube = FakeKube()
    ev, activated = evictions(kube, gated={PREEMPTOR.uid}, present=set())
    ev.start(PREEMPTOR, "n", [victim("a")])
    await finish(ev)
    assert activated == [PREEMPTOR.uid]


async def test_a_gated_preemptor_waits_for_a_last_victim_still_terminating() -> None:
    """As kube-scheduler's queue: the last victim's deletion lets it out, not the task's
    end (a retry meanwhile would find the victim terminating on the nominated node)."""
    kube = FakeKube()
    ev, activated = evictions(kube, gated={PREEMPTOR.uid}, present={"uid-a", "uid-b"})
    ev.start(PREEMPTOR, "n", [victim("a"), victim("b")])
    await finish(ev)
    assert activated == []


async def test_transient_failures_are_retried() -> None:
    kube = FakeKube({("DELETE", "a"): [503, 429]})
    ev, _ = evictions(kube)
    ev.start(PREEMPTOR, "n", [victim("a")])
    await finish(ev)
    assert [c[0] for c in kube.calls] == ["PATCH", "DELETE", "DELETE", "DELETE"]
    assert [e.reason for e in written(ev)] == ["Preempted"]


async def test_a_victim_that_cannot_be_deleted_ends_it_and_the_preemptor_retries() -> None:
    kube = FakeKube({("DELETE", "a"): [403]})
    ev, activated = evictions(kube)
    ev.start(PREEMPTOR, "n", [victim("a")])
    await finish(ev)
    assert activated == [PREEMPTOR.uid]
    assert written(ev) == []  # no Preempted event for a pod that was not deleted
    assert not ev.running(PREEMPTOR.uid)


async def test_a_victim_waiting_on_permit_is_rejected_not_deleted() -> None:
    kube = FakeKube()
    ev, _ = evictions(kube)
    waiting_pod = victim("w")
    waiting = WaitingPod(waiting_pod, "n", {"Gang": 30.0})
    ev.waiting.add(waiting)
    ev.start(PREEMPTOR, "n", [waiting_pod])
    status = await asyncio.wait_for(waiting.wait(), 5)
    await finish(ev)
    assert not status.ok
    assert "preempted" in status.message
    assert kube.calls == []


V135, V136, V137 = Release(1, 35), Release(1, 36), Release(1, 37)


async def preempt_waiting(release: Release) -> tuple[Any, list[Any], list[str], FakeKube]:
    """A lone victim waiting on Permit, preempted at `release`: (its wait's status, the
    writes, the pods activated, the API calls)."""
    kube = FakeKube()
    ev, activated = evictions(kube, release=release)
    waiting_pod = victim("w")
    waiting = WaitingPod(waiting_pod, "n", {"Gang": 30.0})
    ev.waiting.add(waiting)
    ev.start(PREEMPTOR, "n", [waiting_pod])
    status = await asyncio.wait_for(waiting.wait(), 5)
    await finish(ev)
    return status, written(ev), activated, kube


async def test_until_1_36_a_waiting_victim_is_rejected() -> None:
    status, items, activated, kube = await preempt_waiting(V135)
    assert (status.code, status.reasons, status.plugin) == (
        Code.UNSCHEDULABLE,
        ("preempted",),
        "DefaultPreemption",
    )
    assert [e.note for e in items] == ["Preempted by pod uid-vip on node n"]
    assert (activated, kube.calls) == ([], [])


async def test_from_1_36_a_waiting_victim_is_preempted_in_memory() -> None:
    """kube-scheduler 1.36's `waitingPod.Preempt`: the wait ends in an error (the victim
    goes to the error backoff), no API call, and the event says where it happened. Only
    1.37 activates the preemptor afterwards (no deletion will wake it)."""
    for release, woken in ((V136, []), (V137, [PREEMPTOR.uid])):
        status, items, activated, kube = await preempt_waiting(release)
        assert (status.code, status.reasons) == (Code.ERROR, ("preempted",)), release
        assert [e.note for e in items] == [
            "Preempted by pod uid-vip on node n (in kube-scheduler memory)."
        ]
        assert kube.calls == []
        assert activated == woken, release


async def test_from_1_36_a_wait_already_over_falls_back_to_the_api() -> None:
    kube = FakeKube()
    ev, _ = evictions(kube, release=V136)
    waiting_pod = victim("w")
    waiting = WaitingPod(waiting_pod, "n", {"Gang": 30.0})
    waiting.allow("Gang")  # let go before the preemption reaches it
    ev.waiting.add(waiting)
    ev.start(PREEMPTOR, "n", [waiting_pod])
    await finish(ev)
    assert [c[0] for c in kube.calls] == ["PATCH", "DELETE"]
    assert [e.note for e in written(ev)] == ["Preempted by pod uid-vip on node n"]
    assert (await waiting.wait()).ok


async def test_from_1_36_the_last_victim_is_spared_after_a_failure() -> None:
    """Victims but the last go in parallel; one failing ends the task before the last at
    1.36 and 1.37 (1.35 still evicted it). The preemptor is activated either way."""
    for release, last_deleted in ((V135, True), (V136, False), (V137, False)):
        kube = FakeKube({("DELETE", "a"): [403]})
        ev, activated = evictions(kube, release=release)
        ev.start(PREEMPTOR, "n", [victim("a"), victim("b")])
        await finish(ev)
        deleted = [c[1].rsplit("/", 1)[1] for c in kube.calls if c[0] == "DELETE"]
        assert ("b" in deleted) is last_deleted, release
        assert activated == [PREEMPTOR.uid]


async def test_from_1_36_a_victim_in_pre_bind_is_cancelled_in_memory() -> None:
    """kube-scheduler 1.36's `podInPreBind.CancelPod`: a victim whose binding cycle is in
    PreBind is stopped there, without an API call; 1.35 deletes it through the API (its
    binding goes on). 1.37 activates the preemptor afterwards."""
    for release, in_memory, woken in (
        (V135, False, []),
        (V136, True, []),
        (V137, True, [PREEMPTOR.uid]),
    ):
        kube = FakeKube()
        ev, activated = evictions(kube, release=release)
        binding = victim("b")
        entry = ev.in_pre_bind.add(binding.uid)
        ev.start(PREEMPTOR, "n", [binding])
        await finish(ev)
        assert entry.cancelled is in_memory, release
        assert (entry.cause == "preempted by DefaultPreemption") is in_memory
        assert [c[0] for c in kube.calls] == ([] if in_memory else ["PATCH", "DELETE"])
        note = "Preempted by pod uid-vip on node n"
        assert [e.note for e in written(ev)] == [
            note + " (in kube-scheduler memory)." if in_memory else note
        ]
        assert activated == woken, release


async def test_from_1_36_a_victim_past_pre_bind_is_deleted_through_the_api() -> None:
    kube = FakeKube()
    ev, activated = evictions(kube, release=V137)
    bound = victim("b")
    entry = ev.in_pre_bind.add(bound.uid)
    assert entry.mark_prebound()  # its Bind is under way
    ev.start(PREEMPTOR, "n", [bound])
    await finish(ev)
    assert [c[0] for c in kube.calls] == ["PATCH", "DELETE"]
    assert [e.note for e in written(ev)] == ["Preempted by pod uid-vip on node n"]
    assert activated == []


async def test_lower_priority_nominations_to_the_node_are_cleared() -> None:
    kube = FakeKube()
    nominator = Nominator()
    low = parse_pod(pod("low", namespace="ns", priority=10))
    low = low.__class__(
        **{**{f: getattr(low, f) for f in low.__slots__}, "nominated_node_name": "n"}
    )
    high = parse_pod(pod("high", namespace="ns", priority=1000))
    nominator.nominate(low, "n")
    nominator.nominate(high, "n")
    ev, activated = evictions(kube, nominator)
    ev.start(PREEMPTOR, "n", [victim("a")])
    await finish(ev)
    assert nominator.node_of(low.uid) == ""
    assert nominator.node_of(high.uid) == "n"
    assert activated == [low.uid]
    cleared = [e for e in written(ev) if type(e).__name__ == "_ClearNomination"]
    assert [e.pod.name for e in cleared] == ["low"]


async def test_close_cancels_what_is_running() -> None:
    kube = FakeKube({("DELETE", "a"): [503] * 4})
    ev, activated = evictions(kube)
    ev.start(PREEMPTOR, "n", [victim("a")])
    await asyncio.sleep(0)
    await ev.close()
    assert not ev.running(PREEMPTOR.uid)
    assert activated == []
