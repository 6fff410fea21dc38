"""The group store: members counted as the informer and the scheduler change them."""

from __future__ import annotations

import random

from ascheduler.cache.gangs import Gang, Gangs
from ascheduler.model import PodInfo
from ascheduler.model.podgroups import POD_GROUP_LABEL, parse_pod_group
from tests.kit import parsed, pod


def member(i: int, node: str | None = None) -> PodInfo:
    return parsed(pod(f"m-{i}", uid=f"u-{i}", labels={POD_GROUP_LABEL: "pg"}, node_name=node))


def counted(gang: Gang) -> int:
    """What placed() means: members still present that are bound or assumed."""
    return len(gang.assigned | (gang.assumed & gang.pods.keys()))


def test_placed_follows_every_add_bind_assume_forget_and_delete() -> None:
    rng = random.Random(7)
    gangs = Gangs()
    for step in range(3000):
        i = rng.randrange(40)
        action = rng.choice(("add", "bind", "assume", "forget", "delete"))
        if action == "add":
            gangs.add_pod(member(i))
        elif action == "bind":
            gangs.add_pod(member(i, node="n1"))
        elif action == "assume":
            gangs.assume(member(i))
        elif action == "forget":
            gangs.forget(member(i))
        else:
            gangs.remove_pod(member(i))
        gang = gangs.get("PodGroup:default/pg")
        if gang is not None:
            assert gang.placed() == counted(gang), (step, action, i)
            assert set(gang.unscheduled()).isdisjoint(gang.assigned | gang.assumed)


def test_a_group_object_arriving_tells_the_watchers_of_its_own_groups_only() -> None:
    gangs = Gangs()
    told: list[str] = []
    gangs.watchers.append(lambda gang: told.append(gang.key))
    for name in ("pg", "other"):
        gangs.add_pod(parsed(pod(f"{name}-0", labels={POD_GROUP_LABEL: name})))
    told.clear()
    gangs.pod_group_handler.on_add(
        parse_pod_group({"metadata": {"name": "pg", "namespace": "default"}, "spec": {}})
    )
    assert told == ["PodGroup:default/pg"]
    # A group whose last pod went is no longer told about.
    gangs.remove_pod(parsed(pod("pg-0", labels={POD_GROUP_LABEL: "pg"})))
    told.clear()
    gangs.pod_group_handler.on_add(
        parse_pod_group({"metadata": {"name": "pg", "namespace": "default"}, "spec": {}})
    )
    assert told == []
