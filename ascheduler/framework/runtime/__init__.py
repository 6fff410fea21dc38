"""The framework runtime: what runs a profile's plugins, as kube-scheduler's
`framework/runtime` does. Plugins never import it (they are written against
`ascheduler.framework`, the API); the scheduler, the binder and the commands build a
`Framework` per profile from a `ProfileSpec`, a `Registry` and a `Handle`.

* `framework`: `Framework`, the extension points run in order, the filter and score loops,
  Diagnosis and the what-if filters preemption asks.
* `assembly`: a profile's plugins built once from their registrations and decoded args,
  with kube-scheduler's merge rules and score weights.
* `withextenders`: the same cycle with kube-scheduler's HTTP extenders between Filter and
  Score (the only steps that await).
* `outcomes`: what a cycle returns (`ScheduleResult`, `DryRun`) and `ScoringError`.
"""

from ascheduler.framework.runtime.framework import (
    ALL_EVENTS,
    MAX_PERMIT_TIMEOUT,
    Framework,
    num_feasible_nodes_to_find,
    recorded_status,
)
from ascheduler.framework.runtime.outcomes import DryRun, ScheduleResult, ScoringError

__all__ = [
    "ALL_EVENTS",
    "MAX_PERMIT_TIMEOUT",
    "DryRun",
    "Framework",
    "ScheduleResult",
    "ScoringError",
    "num_feasible_nodes_to_find",
    "recorded_status",
]
