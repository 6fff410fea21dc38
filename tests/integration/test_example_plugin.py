"""The example out-of-tree plugin package (examples/nodecost), installed as a user would install
it: found through its entry point, enabled by name in a configuration file, its arguments
validated by its own type, and changing placements on the real plane."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    NO_NEW_CLAIMS,
    create_pods,
    pause_pod,
    scheduler,
    wait_bound,
    wait_unschedulable,
)

MAINTENANCE = "example.com/maintenance"


def nodecost_config(profile: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": profile,
                "plugins": {"multiPoint": {"enabled": [{"name": "NodeCost", "weight": 5}]}},
                "pluginConfig": [{"name": "NodeCost", "args": args}],
            }
        ],
    }


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ascheduler", "config", "validate", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_its_arguments_are_validated_by_its_own_type(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(json.dumps(nodecost_config("x", {"defaultCost": 10})))
    assert validate(good).returncode == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps(nodecost_config("x", {"defaultCost": -1, "costLable": "x"})))
    result = validate(bad)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"{bad}: profiles[0].pluginConfig[0].args.costLable: unknown field",
        f"{bad}: profiles[0].pluginConfig[0].args.defaultCost: must not be negative",
    ]
    bad.write_text(json.dumps(nodecost_config("x", {"defaultCost": -1})))
    assert validate(bad).stderr.splitlines() == [
        f"{bad}: profiles[0].pluginConfig[0].args.defaultCost: must not be negative"
    ]


async def test_it_changes_placements_on_the_plane(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    tmp_path: Path,
) -> None:
    (cheap,) = await nodes(
        FakeNodes(count=1, prefix=f"{namespace}-cheap", labels={"example.com/cost": "10"})
    )
    (dear,) = await nodes(
        FakeNodes(count=1, prefix=f"{namespace}-dear", labels={"example.com/cost": "90"})
    )
    (cheapest,) = await nodes(
        FakeNodes(count=1, prefix=f"{namespace}-maint", labels={"example.com/cost": "1"})
    )
    await kube.patch(
        f"/api/v1/nodes/{cheapest}", {"metadata": {"annotations": {MAINTENANCE: "true"}}}
    )
    profile = f"{namespace}-cost"
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps(nodecost_config(profile, {})))
    with scheduler(plane, plane_state, "ascheduler-nodecost", None, "--config", str(config)):
        await create_pods(
            kube, namespace, [pause_pod(f"p{i}", scheduler_name=profile) for i in range(3)]
        )
        placed = await wait_bound(kube, namespace, ["p0", "p1", "p2"])
        assert set(placed.values()) == {cheap}  # cheapest in service, whatever the spread
        pinned = pause_pod(
            "pinned",
            scheduler_name=profile,
            nodeSelector={"kubernetes.io/hostname": cheapest},
        )
        await create_pods(kube, namespace, [pinned])
        message = await wait_unschedulable(kube, namespace, "pinned")
        assert message == (
            "0/3 nodes are available: 1 node(s) are in maintenance, "
            f"2 node(s) didn't match Pod's node affinity/selector. {NO_NEW_CLAIMS}"
            "preemption: 0/3 nodes are "
            "available: 1 No preemption victims found for incoming pod, 2 Preemption is not "
            "helpful for scheduling."
        )
        # Maintenance over: the annotation's removal is the event NodeCost registered for.
        await kube.patch(
            f"/api/v1/nodes/{cheapest}", {"metadata": {"annotations": {MAINTENANCE: None}}}
        )
        assert await wait_bound(kube, namespace, ["pinned"]) == {"pinned": cheapest}
    assert dear not in placed.values()
