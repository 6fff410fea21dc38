"""Every scenario, run by kube-scheduler and by ascheduler on the same plane: they must agree
on each pod (ties are reported, not failed)."""

from __future__ import annotations

import sys

import pytest

from tests.integration.differential.harness import Runner, Scenario, differ
from tests.integration.differential.scenarios import SCENARIOS
from tests.integration.differential.scenarios_dra_bindcond import DRA_BINDCOND
from tests.integration.differential.scenarios_dra_capacity import CAPACITY
from tests.integration.differential.scenarios_dra_counters import DRA_COUNTERS
from tests.integration.differential.scenarios_dra_extended import DRA_EXTENDED
from tests.integration.differential.scenarios_dra_taints import DRA_TAINTS
from tests.integration.differential.scenarios_nodefeatures import NODE_FEATURES
from tests.integration.differential.scenarios_releases import RELEASES
from tests.integration.differential.scenarios_scoring import SCORING
from tests.integration.differential.scenarios_workloads import WORKLOADS

ALL = [
    *SCENARIOS,
    *SCORING,
    *NODE_FEATURES,
    *RELEASES,
    *DRA_TAINTS,
    *DRA_COUNTERS,
    *DRA_BINDCOND,
    *DRA_EXTENDED,
    *CAPACITY,
    *WORKLOADS,
]


@pytest.mark.parametrize("scenario", ALL, ids=[s.name for s in ALL])
async def test_ascheduler_agrees_with_kube_scheduler(runner: Runner, scenario: Scenario) -> None:
    comparison = await differ(runner, scenario)
    # What was compared, on stderr (`pytest -s` shows it).
    print(f"{scenario.name}:\n{comparison.report()}", file=sys.stderr)
    assert not comparison.disagreements, f"{scenario.name}:\n{comparison.report()}"
