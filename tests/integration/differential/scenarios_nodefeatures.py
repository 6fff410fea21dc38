"""NodeDeclaredFeatures: nodes declaring features (`status.declaredFeatures`, set in the body
the harness creates them with, which kwok keeps) and pods needing them.

What a plane accepts depends on its release. Its API server refuses a `RestartAllContainers`
restart rule while the RestartAllContainersOnContainerExits gate is off (1.35), and drops a
node's declared features while NodeDeclaredFeatures is off (1.35). It drops `bindMountOptions`
while VolumeBindMountOptions is off (alpha in 1.37, absent before), so the field is never
stored; the harness's dry run reads the body sent, so such a pod is left out. `hostNetwork`
with `hostUsers: false` is refused while UserNamespacesHostNetworkSupport is off (every
release by default). The unit tests alone cover those two requirements. On 1.35 the
scenarios send what that API server accepts: the plugin is not in the default profile and
nothing it would do shows.
"""

from __future__ import annotations

from typing import Any

from ascheduler.features import Release
from tests.integration.differential.harness import (
    HOSTNAME,
    Json,
    Scenario,
    fake_node,
    pause,
    plane_release,
)

RESTART_ALL = "RestartAllContainersOnContainerExits"
USERNS = "UserNamespacesHostNetworkSupport"
BIND_MOUNTS = "VolumeBindMountOptions"


def declaring(name: str, *features: str, **kw: Any) -> Json:
    """A node declaring `features` (the API server wants them sorted)."""
    body = fake_node(name, **kw)
    body["status"]["declaredFeatures"] = sorted(features)
    return body


def restart_rules(action: str) -> list[Json]:
    return [{"action": action, "exitCodes": {"operator": "In", "values": [42]}}]


def restarting(name: str, action: str = "RestartAllContainers", **kw: Any) -> Json:
    """A pod whose main container restarts the pod's containers on exit code 42."""
    body = pause(name, **kw)
    main = body["spec"]["containers"][0]
    main["restartPolicy"] = "Never"
    main["restartPolicyRules"] = restart_rules(action)
    return body


def init_restarting(name: str, **kw: Any) -> Json:
    """The rule on an init container instead."""
    return pause(
        name,
        **kw,
        initContainers=[
            {
                "name": "init",
                "image": "registry.k8s.io/pause:3.10",
                "restartPolicy": "Never",
                "restartPolicyRules": restart_rules("RestartAllContainers"),
            }
        ],
    )


NODES = [
    fake_node("plain", cpu="4"),
    declaring("restarts", RESTART_ALL, cpu="5"),
    declaring("every", RESTART_ALL, USERNS, BIND_MOUNTS, cpu="6"),
]
#: Pods ask for nothing, so that their scores are the plugins' every release agrees on
#: (BalancedAllocation, whose formula 1.36 changed, skips them).
NOTHING = {"cpu": "0", "memory": "0"}
NEEDS_FEATURES = plane_release() >= Release(1, 36)


def _fitting() -> list[Json]:
    pods: list[Json] = [
        pause("plain-pod", **NOTHING),
        # Restart rules that restart one container only require nothing.
        restarting("restarts-one", action="Restart", **NOTHING),
    ]
    if NEEDS_FEATURES:
        pods += [
            restarting("restarts-all", **NOTHING),
            init_restarting("init-restarts-all", **NOTHING),
        ]
    return pods


def _held_to_plain() -> list[Json]:
    if not NEEDS_FEATURES:
        return [restarting("restarts-one-on-plain", action="Restart", nodeSelector=PLAIN)]
    # NodeAffinity rejects the other nodes first, NodeDeclaredFeatures the one left.
    return [restarting("restarts-all-on-plain", nodeSelector=PLAIN)]


PLAIN = {HOSTNAME: "plain"}

NODE_FEATURES: list[Scenario] = [
    Scenario(
        "node declared features: pods needing them fit only nodes declaring them",
        nodes=NODES,
        pods=_fitting(),
        independent=True,
    ),
    Scenario(
        "node declared features: a pod no node fits for want of a feature",
        nodes=NODES,
        pods=_held_to_plain(),
        # DynamicResources' PostFilter message differs at 1.37 (another item); without
        # it the reasons are NodeAffinity's and NodeDeclaredFeatures' alone.
        profile={"plugins": {"postFilter": {"disabled": [{"name": "DynamicResources"}]}}},
    ),
]
