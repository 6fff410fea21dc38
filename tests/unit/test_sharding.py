"""Sharding mode on one scheduler, without a network: only our share is queued; a change of
the members re-splits the pending pods (ours queued, others' out of the queue, wherever they
wait); a pod popped after it stopped being ours is dropped; a pod relabelled out of our share
leaves the queue. The members themselves are tests/unit/shards/test_members.py's."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

from ascheduler.model import PodInfo
from ascheduler.model.podgroups import POD_GROUP_LABEL
from ascheduler.sharding import CHUNK, Sharding
from ascheduler.shards import ShardMembers, ShardSettings, Split
from tests.kit.scheduling import Env, make_node, make_pod, pop
from tests.unit.queue.test_queue import let_tasks_run
from tests.unit.test_eventhandlers import _deferred, _resize_env

ME, OTHER, THIRD = "sched-a", "sched-b", "sched-c"


def sharded(*members: str, pods: int = 60) -> tuple[Env, Sharding, list[PodInfo]]:
    """A scheduler that is `ME` among `members`, its informer holding `pods` pending pods."""
    store: dict[str, PodInfo] = {}
    env = Env(make_node("n1", cpu="1000"), store=store)
    shard = ShardMembers(None, "ns", ShardSettings(enabled=True), identity=ME)  # type: ignore[arg-type]
    shard.split = Split.of(ME, members)
    sharding = Sharding(shard, env.scheduler, lambda: store)
    made = [make_pod(f"p{i}") for i in range(pods)]
    for pod in made:
        store[pod.uid] = pod
        env.router.pods.on_add(pod)
    return env, sharding, made


def owned(pods: list[PodInfo], *members: str) -> set[str]:
    split = Split.of(ME, members)
    return {pod.uid for pod in pods if split.mine(pod)}


def queued(env: Env, pods: list[PodInfo]) -> set[str]:
    return {pod.uid for pod in pods if pod.uid in env.queue}


def test_only_our_share_is_queued() -> None:
    env, _, pods = sharded(ME, OTHER)
    mine = owned(pods, ME, OTHER)
    assert queued(env, pods) == mine
    assert 0 < len(mine) < len(pods)


async def test_a_member_gone_hands_its_pods_to_the_others() -> None:
    env, sharding, pods = sharded(ME, OTHER)
    before = queued(env, pods)
    sharding.members.split = Split.of(ME, [ME])
    moved_in, moved_out = await sharding.resplit()
    assert queued(env, pods) == {pod.uid for pod in pods}
    assert (moved_in, moved_out) == (len(pods) - len(before), 0)


async def test_a_member_joining_takes_its_share_out_of_the_queue() -> None:
    env, sharding, pods = sharded(ME, OTHER)
    # Some of ours wait unschedulable, not only in the active queue.
    for _ in range(3):
        qp = await pop(env.queue)
        assert qp is not None
        env.queue.requeue(qp, rejected_by=frozenset({"NodeResourcesFit"}))
    before = queued(env, pods)
    sharding.members.split = Split.of(ME, [ME, OTHER, THIRD])
    moved_in, moved_out = await sharding.resplit()
    after = owned(pods, ME, OTHER, THIRD)
    assert queued(env, pods) == after
    assert after < before  # ours only lost pods, to the newcomer
    assert (moved_in, moved_out) == (0, len(before) - len(after))


async def test_a_resplit_walks_more_pods_than_a_chunk() -> None:
    env, sharding, pods = sharded(ME, OTHER, pods=CHUNK * 2 + 5)
    sharding.members.split = Split.of(ME, [ME])
    await sharding.resplit()
    assert queued(env, pods) == {pod.uid for pod in pods}


async def test_bound_and_deleting_pods_are_not_queued_by_a_resplit() -> None:
    env, sharding, _ = sharded(ME, OTHER, pods=0)
    store: Any = sharding._pods()
    bound = make_pod("bound", node="n1")
    deleting = dataclasses.replace(make_pod("deleting"), deleting=True)
    other = make_pod("other", scheduler="someone-else")
    for pod in (bound, deleting, other):
        store[pod.uid] = pod
    sharding.members.split = Split.of(ME, [ME])
    assert await sharding.resplit() == (0, 0)
    assert not any(pod.uid in env.queue for pod in (bound, deleting, other))


async def test_a_pod_popped_after_it_stopped_being_ours_is_dropped() -> None:
    env, sharding, _ = sharded(ME)
    qp = await pop(env.queue)
    assert qp is not None
    others = [m for m in (OTHER, THIRD, "sched-d", "sched-e") if Split.of(m, [ME, m]).mine(qp.pod)]
    assert others  # some member would own it
    sharding.members.split = Split.of(ME, [ME, others[0]])
    assert await env.scheduler.schedule_pod(qp) is None
    assert qp.pod.uid not in env.queue
    assert env.scheduler.stats.attempts == 0


def test_a_pod_relabelled_into_another_members_group_leaves_the_queue() -> None:
    env, _, pods = sharded(ME, OTHER)
    pod = next(p for p in pods if p.uid in env.queue)
    split = Split.of(ME, [ME, OTHER])
    group = next(
        g
        for g in (f"group-{i}" for i in range(100))
        if not split.mine(make_pod(pod.name, labels={POD_GROUP_LABEL: g}))
    )
    moved = make_pod(pod.name, labels={POD_GROUP_LABEL: group})
    env.router.pods.on_update(pod, moved)
    assert pod.uid not in env.queue
    env.router.pods.on_update(moved, pod)  # and back into ours
    assert pod.uid in env.queue


async def test_a_deferred_resize_moves_with_its_pod() -> None:
    """A bound pod whose resize the kubelet deferred is scheduled again (1.37), by its owner:
    a re-split hands it over like a pending pod."""
    grows = _deferred("grows")
    env = _resize_env(grows)
    assert env.store is not None
    store = env.store
    shard = ShardMembers(None, "ns", ShardSettings(enabled=True), identity=ME)  # type: ignore[arg-type]
    other = next(m for m in (f"sched-{i}" for i in range(100)) if Split.of(m, [ME, m]).mine(grows))
    shard.split = Split.of(ME, [ME, other])
    sharding = Sharding(shard, env.scheduler, lambda: store)
    env.router.pods.on_add(grows)
    assert env.cache.has_pod(grows.uid)
    assert grows.uid not in env.queue  # the other member's
    shard.split = Split.of(ME, [ME])
    assert await sharding.resplit() == (1, 0)
    assert env.queue.where(grows.uid) == "active"
    shard.split = Split.of(ME, [ME, other])
    assert await sharding.resplit() == (0, 1)
    assert grows.uid not in env.queue


async def test_a_change_of_the_members_re_splits_in_the_background() -> None:
    env, sharding, pods = sharded(ME, OTHER)
    task = asyncio.create_task(sharding.run())
    try:
        split = Split.of(ME, [ME])
        sharding.members.split = split
        sharding.members.on_change(split)  # what `ShardMembers.update` tells
        for _ in range(100):  # turns of the event loop, not time
            await let_tasks_run()
            if queued(env, pods) == {pod.uid for pod in pods}:
                break
        assert queued(env, pods) == {pod.uid for pod in pods}
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
