"""The bound `benchmarks apicost` derives from measured request costs."""

from __future__ import annotations

import math

import pytest

from benchmarks.apicost import REQUESTS, bound, lease_bound


def costs() -> dict[str, float]:
    return {name: 1.0 for name, _, _ in REQUESTS}


def test_equal_costs_give_the_request_count_ratio() -> None:
    # Plain: binding + event = 2. Locked, one bind per hold: + lock, unlock and list 3 = 5
    # requests; per-hold costs shared without limit cost nothing more (HAMi mode too: its
    # `allocating` phase rides on the Binding).
    cost = costs()
    assert bound(cost, 1) == pytest.approx(2 / 5)
    assert bound(cost, 3) == pytest.approx(2 / 3)
    assert bound(cost, math.inf) == pytest.approx(1.0)


def test_dearer_node_writes_lower_the_bound_only_per_hold() -> None:
    cost = costs()
    cost["lock + unlock patches (node)"] = 3.0  # each of the two node writes
    assert bound(cost, 1) == pytest.approx(2 / (2 + 6 + 1))
    assert bound(cost, math.inf) == pytest.approx(1.0)
    assert bound(cost, 1) < bound(cost, 2) < bound(cost, math.inf)


def test_no_measurable_cost_is_no_bound() -> None:
    cost = {name: 0.0 for name, _, _ in REQUESTS}
    assert bound(cost, 1) == 1.0


def test_a_lease_lock_costs_one_write_per_lock_taken() -> None:
    # Plain: binding + event = 2; one Lease write per lock, shared by the binds under it.
    cost = costs()
    assert lease_bound(cost, 1) == pytest.approx(2 / 3)
    assert lease_bound(cost, 2) == pytest.approx(2 / 2.5)
    assert lease_bound(cost, math.inf) == pytest.approx(1.0)
    cost["lock write (Lease)"] = 2.0
    assert lease_bound(cost, 2) == pytest.approx(2 / 3)
    assert lease_bound({name: 0.0 for name, _, _ in REQUESTS}, 1) == 1.0
