from __future__ import annotations

import yaml

from ascheduler.devcluster.plane import node_stages

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
