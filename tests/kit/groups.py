"""Pod groups on a real cache: a PodGroup, its member pods, and the default profile's
frameworks over them with the group dry run (`GroupPlanner`) every handle is given."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ascheduler.app import build_frameworks
from ascheduler.cache import Cache
from ascheduler.config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from ascheduler.features import Features
from ascheduler.framework.extender import Extenders
from ascheduler.framework.runtime import Framework
from ascheduler.groupplanner import GroupPlanner
from ascheduler.model import Node, PodInfo
from ascheduler.model.podgroups import SchedulingGroup, parse_scheduling_group
from ascheduler.plugins import IN_TREE
from tests.kit.objects import parsed, pod


def pod_group(name: str, count: int | None, uid: str | None = None, **spec: Any) -> SchedulingGroup:
    """A PodGroup in `default`: a gang of `count`, or a basic group (None)."""
    policy = {"basic": {}} if count is None else {"gang": {"minCount": count}}
    return parse_scheduling_group(
        {
            "metadata": {"name": name, "namespace": "default", "uid": uid or f"pg-{name}"},
            "spec": {"schedulingPolicy": policy, **spec},
        }
    )


def group_member(name: str, of: str, cpu: str = "1", **fields: Any) -> PodInfo:
    """A pod of the default profile naming PodGroup `of`."""
    return parsed(
        pod(
            name,
            cpu=cpu,
            scheduler_name=DEFAULT_SCHEDULER_NAME,
            schedulingGroup={"podGroupName": of},
            **fields,
        )
    )


def group_cluster(
    features: Features,
    nodes: Iterable[Node],
    groups: Iterable[SchedulingGroup] = (),
    pods: Iterable[PodInfo] = (),
) -> tuple[Cache, Mapping[str, Framework]]:
    """A cache holding `nodes`, `groups` and `pods` (those with a node bound there), and the
    frameworks of the release's default profile, each handle given the group dry run."""
    cache = Cache(features)
    for n in nodes:
        cache.add_node(n)
    for g in groups:
        cache.gangs.scheduling_group_handler.on_add(g)
    for p in pods:
        if p.node_name:
            cache.add_pod(p)
        cache.gangs.add_pod(p)
    frameworks = build_frameworks(
        SchedulerConfig(features=features), IN_TREE, cache, None, Extenders(())
    )
    planner = GroupPlanner(cache, frameworks)
    for fw in frameworks.values():
        fw.handle.set_group_planner(planner)
    return cache, frameworks
