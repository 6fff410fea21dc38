"""TeamQuota: an example ascheduler plugin with PreFilter state, Permit and queueing hints.

A team (pods labelled `example.com/team: <team>`) may run at most its quota of pods at once;
nodes labelled with a team (`example.com/team` on the node) are dedicated to it.

* **PreFilter** reads the pod's team and looks up its quota once per scheduling attempt, and
  writes both to the CycleState, where Filter and Permit read them. A team whose quota is 0
  may run nothing: the pod is rejected here (UnschedulableAndUnresolvable).
* **Filter** rejects nodes dedicated to another team (a pod without a team fits only nodes
  dedicated to none), over all rows at once: one comparison of the table's label codes.
* **Permit**: a pod whose team already runs its quota of pods (bound, or placed and binding)
  waits, holding the node it was given, for at most `permitWaitSeconds`. While pods wait, the
  plugin recounts every `recheckSeconds` and allows the longest-waiting pods of a team as its
  pods finish; a pod that waits too long is rejected, unreserved and goes back to the queue.
  Pods are counted from the node table (a count column of the team's pods), so nothing has to
  be told when a pod ends.
* **Queueing hints**: a pod this plugin rejected is retried only on events that can help it:
  a node added or relabelled so that it now takes the team's pods, or a pod of the same team
  deleted (a slot freed). Other teams' churn leaves it where it waits.

Enable it by name in a KubeSchedulerConfiguration, with its arguments checked by
`TeamQuotaArgs`:

    profiles:
    - schedulerName: ascheduler
      plugins:
        multiPoint:
          enabled:
          - name: TeamQuota
      pluginConfig:
      - name: TeamQuota
        args:
          quotas: {ml: 20, web: 100}
          defaultQuota: 10
          permitWaitSeconds: 30
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from ascheduler.framework import (
    SUCCESS,
    BoolArray,
    ClusterEvent,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    Node,
    NodeTable,
    PermitPlugin,
    PluginArgsError,
    PodInfo,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHintPlugin,
    Registration,
    Status,
)

log = logging.getLogger(__name__)

NAME: Final = "TeamQuota"
DEDICATED_REASON: Final = "node(s) are dedicated to another team"
NO_QUOTA: Final = "team {!r} has no quota"
#: The CycleState key PreFilter writes and Filter and Permit read.
STATE_KEY: Final = f"{NAME}/team"
_EVENTS: Final = frozenset(
    {ClusterEvent.NODE_ADD, ClusterEvent.NODE_LABEL, ClusterEvent.ASSIGNED_POD_DELETE}
)


@dataclass(frozen=True)
class TeamQuotaArgs:
    """`pluginConfig[].args` of TeamQuota: every field has a default."""

    #: The pod label naming its team, and the node label dedicating a node to a team.
    team_label: str = "example.com/team"
    #: Pods a team may run at once, by team; teams not named get `defaultQuota`.
    quotas: dict[str, int] = field(default_factory=dict)
    default_quota: int = 10
    #: How long a pod over its team's quota holds its node at Permit before giving it up.
    permit_wait_seconds: float = 30.0
    #: How often waiting pods' teams are recounted.
    recheck_seconds: float = 1.0

    def __post_init__(self) -> None:
        if not self.team_label:
            raise PluginArgsError("teamLabel: required")
        for team, quota in self.quotas.items():
            if quota < 0:
                raise PluginArgsError(f"quotas.{team}: must not be negative")
        if self.default_quota < 0:
            raise PluginArgsError("defaultQuota: must not be negative")
        if self.permit_wait_seconds <= 0:
            raise PluginArgsError("permitWaitSeconds: must be greater than 0")
        if self.recheck_seconds <= 0:
            raise PluginArgsError("recheckSeconds: must be greater than 0")


@dataclass(frozen=True, slots=True)
class TeamCycle:
    """What PreFilter works out once per attempt: the pod's team ("" for none), its quota."""

    team: str
    quota: int


@dataclass(frozen=True, slots=True)
class TeamPods:
    """The node table's count column of one team's pods (a `PodPredicate`: equal values
    share a column, which the table keeps current as pods come and go)."""

    label: str
    team: str

    @property
    def namespaces(self) -> frozenset[str] | None:
        return None

    @property
    def hint(self) -> tuple[str, tuple[str, ...]] | None:
        return self.label, (self.team,)

    def matches(self, pod: PodInfo) -> bool:
        return pod.labels.get(self.label) == self.team

    def matches_candidate(self, pod: PodInfo) -> bool:
        return True  # it carries the label with the team's value: nothing more to check


def _call_later(delay: float, callback: Callable[[], None]) -> object:
    return asyncio.get_running_loop().call_later(delay, callback)


class TeamQuota(PreFilterPlugin, FilterPlugin, PermitPlugin, EnqueueExtensions, QueueingHintPlugin):
    name = NAME

    def __init__(self, args: TeamQuotaArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        #: Runs a callback after a delay (the event loop's `call_later`; tests replace it).
        self.later: Callable[[float, Callable[[], None]], object] = _call_later
        #: Pods waiting at Permit by team, longest-waiting first (uid -> None).
        self._waiting: dict[str, dict[str, None]] = {}
        self._armed = False

    # -- PreFilter and Filter ------------------------------------------------------------

    def team(self, pod: PodInfo) -> str:
        return pod.labels.get(self.args.team_label, "")

    def quota(self, team: str) -> int:
        return self.args.quotas.get(team, self.args.default_quota)

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        team = self.team(pod)
        cycle = TeamCycle(team, self.quota(team) if team else 0)
        state.write(STATE_KEY, cycle)
        if team and cycle.quota == 0:
            return None, Status.unschedulable(NO_QUOTA.format(team), resolvable=False)
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        cycle: TeamCycle = state.read(STATE_KEY)
        rejected = self.dedicated_elsewhere(nodes, cycle.team)
        if not rejected.any():
            return None
        return FilterResult.single(DEDICATED_REASON, rejected, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def dedicated_elsewhere(self, nodes: NodeTable, team: str) -> BoolArray:
        """Rows dedicated to a team other than `team` (any team, for ""): one comparison of
        the rows' label codes, cached per team until a node's labels change."""
        key = (NAME, self.args.team_label, team)
        mask: BoolArray | None = nodes.cached(key)
        if mask is None:
            domains = nodes.domains(self.args.team_label)
            own = domains.index.get(team, -1) if team else -1
            mask = (domains.codes >= 0) & (domains.codes != own)
            nodes.remember(key, mask)
        return mask

    # -- Permit --------------------------------------------------------------------------

    def running(self, team: str) -> int:
        """The team's pods on nodes (bound, or assumed: binding or waiting at Permit)
        less those waiting here."""
        placed = self.handle.nodes.match_rows(TeamPods(self.args.team_label, team))
        return sum(placed.values()) - len(self._waiting.get(team, ()))

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        cycle: TeamCycle | None = state.read(STATE_KEY)
        if cycle is None or not cycle.team:
            return SUCCESS, 0.0
        # The pod itself is assumed on `node` already: it is not one of the team's others.
        others = self.running(cycle.team) - 1
        if cycle.team not in self._waiting and others < cycle.quota:
            return SUCCESS, 0.0  # room, and no pod of the team waits ahead of it
        queue = self._waiting.setdefault(cycle.team, {})
        queue[pod.uid] = None
        log.info(
            "pod %s of team %s waits at Permit: %d of its quota of %d running, %d waiting",
            pod.key,
            cycle.team,
            others,
            cycle.quota,
            len(queue),
        )
        self._arm()
        return Status(Code.WAIT, (f"team {cycle.team!r} is at its quota of {cycle.quota}",)), (
            self.args.permit_wait_seconds
        )

    def _arm(self) -> None:
        if self._armed:
            return
        try:
            self.later(self.args.recheck_seconds, self.recheck)
        except RuntimeError:  # no running loop (a unit test of the cycle alone)
            return
        self._armed = True

    def recheck(self) -> None:
        """Allow the longest-waiting pods of each team as far as its quota has room; forget
        pods no longer waiting (allowed, rejected, timed out or deleted)."""
        self._armed = False
        waiting_pods = self.handle.waiting_pods
        for team, queue in list(self._waiting.items()):
            for uid in [u for u in queue if waiting_pods.get(u) is None]:
                del queue[uid]
            room = self.quota(team) - self.running(team)
            for uid in list(queue)[: max(room, 0)]:
                del queue[uid]
                waiting = waiting_pods.get(uid)
                if waiting is not None:
                    log.info("pod %s of team %s allowed at Permit", waiting.pod.key, team)
                    waiting.allow(NAME)
            if not queue:
                del self._waiting[team]
        if self._waiting:
            self._arm()

    # -- queueing ------------------------------------------------------------------------

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return _EVENTS

    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        team = self.team(pod)
        if event is ClusterEvent.ASSIGNED_POD_DELETE:
            # A slot of the pod's own team freed; other teams' pods do not count against it.
            return bool(team) and isinstance(old, PodInfo) and self.team(old) == team
        if event in (ClusterEvent.NODE_ADD, ClusterEvent.NODE_LABEL) and isinstance(new, Node):
            if not self._takes(new, team):
                return False
            # A relabelled node that took the team's pods already changes nothing.
            return not (isinstance(old, Node) and self._takes(old, team))
        return True

    def _takes(self, node: Node, team: str) -> bool:
        dedicated = node.labels.get(self.args.team_label)
        return dedicated is None or dedicated == team


def new(args: TeamQuotaArgs, handle: Handle) -> TeamQuota:
    return TeamQuota(args, handle)


REGISTRATION: Final = Registration(NAME, new, TeamQuotaArgs)
