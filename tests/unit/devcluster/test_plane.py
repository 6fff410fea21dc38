from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import yaml

from ascheduler.devcluster.plane import ControlPlane, node_stages

STAGES = """\
kind: Stage
apiVersion: kwok.x-k8s.io/v1alpha1
metadata:
  name: node-initialize
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  next:
    statusTemplate: |
      conditions: {{ .x | Quote }}
---
kind: Stage
apiVersion: kwok.x-k8s.io/v1alpha1
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
---
kind: Stage
apiVersion: kwok.x-k8s.io/v1alpha1
metadata:
  name: node-heartbeat
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
"""


def test_benchmark_planes_keep_only_node_stages() -> None:
    kept = list(yaml.safe_load_all(node_stages(STAGES)))
    assert [d["metadata"]["name"] for d in kept] == ["node-initialize", "node-heartbeat"]
    # Templates survive the round trip verbatim.
    template = kept[0]["spec"]["next"]["statusTemplate"]
    assert template == "conditions: {{ .x | Quote }}\n"


def test_benchmark_planes_renew_no_node_leases(tmp_path: Path) -> None:
    """kwok renews a Lease per node on an ordinary plane (the controller manager reads them);
    on a benchmark plane, where nothing reads them, it renews none."""
    stages = tmp_path / "stages.yaml"
    stages.write_text(STAGES)
    bins = SimpleNamespace(kwok=tmp_path / "kwok", kwok_stages=stages)
    state = SimpleNamespace(admin_kubeconfig=tmp_path / "admin.kubeconfig")

    def lease_flag(benchmark: bool) -> list[str]:
        plane = ControlPlane(tmp_path / str(benchmark), bins=bins, benchmark=benchmark)  # type: ignore[arg-type]
        plane.state_dir.mkdir()
        argv = plane._kwok_argv(state)  # type: ignore[arg-type]
        return [a for a in argv if a.startswith("--node-lease-duration-seconds=")]

    assert lease_flag(False) == ["--node-lease-duration-seconds=40"]
    assert lease_flag(True) == ["--node-lease-duration-seconds=0"]
