"""The `scheduling.k8s.io` PodGroups' status (1.36 on), compared between the runs: after a
run's pods are decided, each PodGroup of the scenario is read until its scheduling condition
(`PodGroupScheduled` / `PodGroupInitiallyScheduled`) has settled; both runs must agree on
whether there is one, its type, status, reason and whole message, and `observedGeneration`
(`lastTransitionTime` is a time: only its presence is compared).

kube-scheduler 1.37 checks "never True -> False" against the PodGroup its informer has at the
cycle's snapshot, which may not show the True it wrote a moment before: a member created just
after its group was placed can have its cycle set the condition back to False (seen on the
plane). Where kube-scheduler bound the group's quorum and still says False, and ascheduler
says True, the difference is reported as such, not failed.

As for the pods (their first decision), it is the group's first verdict that is compared:
`QUIET` is shorter than the first backoff (1 s), after which a failed group is tried again,
and ascheduler, trying members one by one, may try them in another order then (docs/
workloads.md, *Left to do*)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ascheduler.model.podgroups import SCHEDULED_CONDITIONS

if TYPE_CHECKING:
    from tests.integration.differential.harness import Comparison, Outcome, Runner, Scenario

#: A group's condition is taken once it has not changed for this long (kube-scheduler writes
#: it in the cycle, ascheduler just after), and never waited for longer than the limit.
QUIET = 0.5
LIMIT = 10.0


@dataclass(frozen=True)
class GroupOutcome:
    """A PodGroup's scheduling condition as read; `kind` "" when it has none."""

    kind: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    observed_generation: int = 0
    transition_time: bool = False

    def describe(self) -> str:
        if not self.kind:
            return "no condition"
        return (
            f"{self.kind}={self.status} {self.reason}: {self.message!r} "
            f"(observedGeneration {self.observed_generation}, "
            f"lastTransitionTime {'set' if self.transition_time else 'unset'})"
        )


def _groups(s: Scenario) -> list[tuple[str, str, str, Any]]:
    """(collection path, logical namespace, name, body) of the scenario's PodGroups."""
    return [
        (path, obj["metadata"].get("namespace", "default"), obj["metadata"]["name"], obj)
        for path, obj in s.objects
        if path.startswith("scheduling.k8s.io/") and path.endswith("/podgroups")
    ]


async def _read(runner: Runner, s: Scenario, run: str) -> dict[str, GroupOutcome]:
    out: dict[str, GroupOutcome] = {}
    for path, logical_ns, name, _ in _groups(s):
        ns = runner.namespace(s, run, logical_ns)
        body = await runner.kube.get(f"{runner._collection(path, ns)}/{name}")
        found = GroupOutcome()
        for c in (body.get("status") or {}).get("conditions") or []:
            if c.get("type") in SCHEDULED_CONDITIONS:
                found = GroupOutcome(
                    str(c["type"]),
                    str(c.get("status", "")),
                    str(c.get("reason", "")),
                    str(c.get("message", "")),
                    int(c.get("observedGeneration") or 0),
                    bool(c.get("lastTransitionTime")),
                )
        out[name] = found
    return out


async def pod_group_conditions(runner: Runner, s: Scenario, run: str) -> dict[str, GroupOutcome]:
    """The scenario's PodGroups' conditions once settled ({} when it has no PodGroup)."""
    if not _groups(s):
        return {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LIMIT
    last = await _read(runner, s, run)
    quiet_since = loop.time()
    while loop.time() < deadline and loop.time() - quiet_since < QUIET:
        await asyncio.sleep(0.1)
        now = await _read(runner, s, run)
        if now != last:
            last, quiet_since = now, loop.time()
    return last


def _placed_whole(s: Scenario, pods: Mapping[str, Outcome], name: str) -> bool:
    """Whether the run bound PodGroup `name`'s quorum (minCount, 1 for a basic group)."""
    spec = next(obj["spec"] for _, _, n, obj in _groups(s) if n == name)
    quorum = ((spec.get("schedulingPolicy") or {}).get("gang") or {}).get("minCount", 1)
    members = [
        raw["metadata"]["name"]
        for raw in s.pods
        if (raw["spec"].get("schedulingGroup") or {}).get("podGroupName") == name
    ]
    return sum(1 for m in members if m in pods and pods[m].bound) >= quorum


def compare_groups(
    s: Scenario,
    kube_pods: Mapping[str, Outcome],
    kube: Mapping[str, GroupOutcome],
    ours: Mapping[str, GroupOutcome],
    out: Comparison,
) -> None:
    from tests.integration.differential.harness import logical

    for name in sorted(kube):
        k, a = kube[name], ours.get(name, GroupOutcome())
        if (k.status, a.status) == ("False", "True") and _placed_whole(s, kube_pods, name):
            out.ties.append(
                f"PodGroup {name}: kube-scheduler set its True back to {k.describe()} after "
                "placing the group (a stale PodGroup in its snapshot); ascheduler "
                f"{a.describe()}"
            )
            continue
        k_key = (k.kind, k.status, k.reason, logical(s, "k", k.message))
        a_key = (a.kind, a.status, a.reason, logical(s, "a", a.message))
        same = (*k_key, k.observed_generation, k.transition_time) == (
            *a_key,
            a.observed_generation,
            a.transition_time,
        )
        if not same:
            out.disagreements.append(
                f"PodGroup {name}: kube-scheduler {k.describe()}; ascheduler {a.describe()}"
            )
        else:
            out.same_groups += 1
