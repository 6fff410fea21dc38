"""The algorithm benchmark's saves: measuring one shape again keeps the day's other rows."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.algorithm import gang_size, measure_group_preemption, measure_no_victims, merged


def test_a_new_row_replaces_its_shape_and_size_and_keeps_the_others(tmp_path: Path) -> None:
    earlier = tmp_path / "2026-01-01-algorithm.json"
    rows = [
        {"shape": "basic", "nodes": 500, "us_per_pod_median": 60.0},
        {"shape": "dra", "nodes": 500, "us_per_pod_median": 900.0},
        {"nodes": 5000, "us_per_pod_median": 70.0},  # before shapes were named: basic
    ]
    earlier.write_text(json.dumps({"rows": rows}))
    fresh = [
        {"shape": "dra", "nodes": 500, "us_per_pod_median": 120.0},
        {"shape": "topology", "nodes": 500, "us_per_pod_median": 300.0},
    ]
    out = merged(fresh, earlier)
    assert [(r.get("shape", "basic"), r["nodes"], r["us_per_pod_median"]) for r in out] == [
        ("basic", 500, 60.0),
        ("basic", 5000, 70.0),
        ("topology", 500, 300.0),
        ("dra", 500, 120.0),
    ]
    assert merged(fresh, tmp_path / "absent.json") == [fresh[1], fresh[0]]


def test_the_per_attempt_preemption_shapes_meet_the_cluster_they_describe() -> None:
    # Nothing of lower priority: no node, no nomination (asserted by the measure itself).
    row = measure_no_victims(20, 2)
    assert (row["shape"], row["nodes"], row["initial_pods"], row["batches"]) == (
        "preemption-none",
        20,
        80,
        2,
    )
    # The gang preempts: every member placed in the dry run, attempt after attempt alike.
    row = measure_group_preemption(20, 2)
    assert (row["shape"], row["pods"]) == ("group-preemption", 2)
    assert gang_size(20) == 10
    assert gang_size(5000) == 100
