"""SpotAvoidance: an example ascheduler plugin written over the whole node table at once.

Spot (preemptible) capacity is cheap and may be taken back at short notice. This plugin keeps
pods that did not opt in off it, keeps every pod off nodes already being reclaimed, and
prefers nodes that are reclaimed least often:

* **Filter**: a node labelled `example.com/capacity-type: spot` takes only pods labelled
  `example.com/spot-tolerant: "true"`; a node labelled `example.com/reclaiming` (any value,
  set by the cloud's termination handler) takes no pod. Both are UnschedulableAndUnresolvable:
  evicting pods from such a node would not make it fit.
* **Score**: a node labelled `example.com/interruption-rate: "<0..100>"` (percent of such
  nodes reclaimed per day, as the provider publishes it) scores lower the higher the rate;
  unlabelled or unreadable: `defaultInterruptionRate`. Normalized so the steadiest node
  scores 100.

It is columnar, as the in-tree plugins are: no Python loop over nodes per pod. The table
gives each node's value of a label as a small integer code (`NodeTable.domains`), so a mask is
one comparison over all rows and a score one gather from the few distinct values. Masks and
scores depend only on node labels, so they are cached under the table's spec generation
(`NodeTable.cached` / `remember`): a stream of pods pays for them once per change of node
labels. Only labels are read: a node's annotations do not move the spec generation, so a mask
over them could not be cached this way.

Enable it by name in a KubeSchedulerConfiguration, with its arguments checked by
`SpotAvoidanceArgs`:

    profiles:
    - schedulerName: ascheduler
      plugins:
        multiPoint:
          enabled:
          - name: SpotAvoidance
            weight: 2
      pluginConfig:
      - name: SpotAvoidance
        args:
          defaultInterruptionRate: 0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from ascheduler.framework import (
    MAX_NODE_SCORE,
    BoolArray,
    ClusterEvent,
    Code,
    CycleState,
    FilterPlugin,
    FilterResult,
    Handle,
    IntArray,
    NodeTable,
    PluginArgsError,
    PodInfo,
    Registration,
    Rejection,
    ScorePlugin,
    default_normalize,
)

NAME: Final = "SpotAvoidance"
SPOT_REASON: Final = "node(s) are spot capacity the pod does not tolerate"
RECLAIMING_REASON: Final = "node(s) are being reclaimed"


@dataclass(frozen=True)
class SpotAvoidanceArgs:
    """`pluginConfig[].args` of SpotAvoidance: every field has a default."""

    capacity_type_label: str = "example.com/capacity-type"
    spot_value: str = "spot"
    reclaiming_label: str = "example.com/reclaiming"
    tolerant_pod_label: str = "example.com/spot-tolerant"
    interruption_rate_label: str = "example.com/interruption-rate"
    default_interruption_rate: int = 0

    def __post_init__(self) -> None:
        for field, value in (
            ("capacityTypeLabel", self.capacity_type_label),
            ("spotValue", self.spot_value),
            ("reclaimingLabel", self.reclaiming_label),
            ("tolerantPodLabel", self.tolerant_pod_label),
            ("interruptionRateLabel", self.interruption_rate_label),
        ):
            if not value:
                raise PluginArgsError(f"{field}: required")
        if not 0 <= self.default_interruption_rate <= 100:
            raise PluginArgsError("defaultInterruptionRate: must be between 0 and 100")


def interruption_rate(text: str | None, default: int) -> int:
    """A label's interruption rate: an integer percent 0..100, else `default`."""
    if text is None or not text.isdigit():
        return default
    return min(int(text), 100)


class SpotAvoidance(FilterPlugin, ScorePlugin):
    name = NAME

    def __init__(self, args: SpotAvoidanceArgs) -> None:
        self.args = args

    def tolerates_spot(self, pod: PodInfo) -> bool:
        return pod.labels.get(self.args.tolerant_pod_label) == "true"

    def spot_rows(self, nodes: NodeTable) -> BoolArray:
        """Rows whose node is spot capacity (cached until a node's labels change)."""
        key = (NAME, "spot", self.args.capacity_type_label, self.args.spot_value)
        mask: BoolArray | None = nodes.cached(key)
        if mask is None:
            domains = nodes.domains(self.args.capacity_type_label)
            code = domains.index.get(self.args.spot_value)
            mask = np.zeros(nodes.n, dtype=np.bool_) if code is None else domains.codes == code
            nodes.remember(key, mask)
        return mask

    def reclaiming_rows(self, nodes: NodeTable) -> BoolArray:
        """Rows whose node carries the reclaiming label, whatever its value."""
        key = (NAME, "reclaiming", self.args.reclaiming_label)
        mask: BoolArray | None = nodes.cached(key)
        if mask is None:
            mask = nodes.domains(self.args.reclaiming_label).codes >= 0
            nodes.remember(key, mask)
        return mask

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        reclaiming = self.reclaiming_rows(nodes)
        unresolvable = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        if self.tolerates_spot(pod):
            if not reclaiming.any():
                return None
            return FilterResult.single(RECLAIMING_REASON, reclaiming, unresolvable)
        spot = self.spot_rows(nodes)
        # A node both spot and reclaiming counts once, under its first reason.
        return FilterResult.of(
            spot | reclaiming,
            Rejection(SPOT_REASON, spot, unresolvable),
            Rejection(RECLAIMING_REASON, reclaiming & ~spot, unresolvable),
        )

    def rates(self, nodes: NodeTable) -> IntArray:
        """Every row's interruption rate: each distinct label value parsed once, then one
        gather over the rows (cached until a node's labels change)."""
        key = (NAME, "rates", self.args.interruption_rate_label)
        rates: IntArray | None = nodes.cached(key)
        if rates is None:
            default = self.args.default_interruption_rate
            domains = nodes.domains(self.args.interruption_rate_label)
            # One entry per distinct value, and a last one for rows without the label.
            by_code = np.array(
                [*(interruption_rate(v, default) for v in domains.values), default],
                dtype=np.int64,
            )
            rates = by_code[domains.lookup]
            nodes.remember(key, rates)
        return rates

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        # Raw score: how steady the node is (100 - rate), so that all-unlabelled nodes tie.
        steady: IntArray = MAX_NODE_SCORE - self.rates(nodes)[feasible]
        return steady

    def normalize(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize(scores)  # the steadiest feasible node: 100


def new(args: SpotAvoidanceArgs, handle: Handle) -> SpotAvoidance:
    return SpotAvoidance(args)


REGISTRATION: Final = Registration(
    NAME,
    new,
    SpotAvoidanceArgs,
    # Every verdict is about node labels: a new node, or a node relabelled (reclaiming
    # called off, capacity type changed), may let a rejected pod in.
    events=frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_LABEL}),
)
