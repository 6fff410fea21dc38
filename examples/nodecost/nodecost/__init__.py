"""NodeCost: an example ascheduler plugin, written one node at a time.

* **Filter**: a node annotated `example.com/maintenance` (any value) takes no new pods; with
  the value `drain`, no change to other pods could help (UnschedulableAndUnresolvable).
* **Score**: a node labelled `example.com/cost: "<integer>"` costs that much (unlabelled:
  `defaultCost`); the cheapest node scores highest.

Enable it by name in a KubeSchedulerConfiguration, with its arguments checked by `NodeCostArgs`:

    profiles:
    - schedulerName: ascheduler
      plugins:
        multiPoint:
          enabled:
          - name: NodeCost
            weight: 5
      pluginConfig:
      - name: NodeCost
        args:
          costLabel: example.com/cost
          defaultCost: 50
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ascheduler.framework import (
    ClusterEvent,
    CycleState,
    Handle,
    IntArray,
    NodeInfo,
    PluginArgsError,
    PodInfo,
    Registration,
    RowFilterPlugin,
    RowScorePlugin,
    Status,
    default_normalize,
)

NAME: Final = "NodeCost"


@dataclass(frozen=True)
class NodeCostArgs:
    """`pluginConfig[].args` of NodeCost: every field has a default."""

    cost_label: str = "example.com/cost"
    maintenance_annotation: str = "example.com/maintenance"
    default_cost: int = 50

    def __post_init__(self) -> None:
        if self.default_cost < 0:
            raise PluginArgsError("defaultCost: must not be negative")
        if not self.cost_label:
            raise PluginArgsError("costLabel: required")


class NodeCost(RowFilterPlugin, RowScorePlugin):
    name = NAME

    def __init__(self, args: NodeCostArgs) -> None:
        self.args = args

    def filter_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        mode = node.annotations.get(self.args.maintenance_annotation)
        if mode is None:
            return Status()
        if mode == "drain":
            return Status.unschedulable("node(s) are being drained", resolvable=False)
        return Status.unschedulable("node(s) are in maintenance")

    def score_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        text = node.labels.get(self.args.cost_label, "")
        return int(text) if text.isdigit() else self.args.default_cost

    def normalize(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize(scores, reverse=True)  # cheapest: 100


def new(args: NodeCostArgs, handle: Handle) -> NodeCost:
    return NodeCost(args)


REGISTRATION: Final = Registration(
    NAME,
    new,
    NodeCostArgs,
    # A new node, or a node's annotations changing, may let a rejected pod in.
    events=frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_ANNOTATION}),
)
