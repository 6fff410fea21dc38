"""Seeded random clusters and pods, run by kube-scheduler and by ascheduler and compared on
what is determined: bound or pending, the whole message of a pending pod, and the node
wherever ascheduler's dry run finds a single best one (else kube-scheduler's pick must be
among ascheduler's best, and the tie is reported).

`make test` runs a couple of small seeds. More on demand:

    ASCHEDULER_DIFF_SEEDS=1-200 ASCHEDULER_DIFF_PODS=30 .venv/bin/pytest \\
        tests/integration/differential/test_random.py

A disagreement names its seed (rerun just that one with ASCHEDULER_DIFF_SEEDS=<seed>).
"""

from __future__ import annotations

import dataclasses
import os
import random
import sys
from typing import Any

import pytest

from tests.integration.differential.harness import (
    HOSTNAME,
    ZONE,
    Json,
    Runner,
    Scenario,
    differ,
    fake_node,
    pause,
)
from tests.integration.differential.scenarios_resize import resized

APPS = ("web", "db", "cache")
KEYS = (ZONE, HOSTNAME)


def _seeds() -> list[int]:
    text = os.environ.get("ASCHEDULER_DIFF_SEEDS", "1,2")
    out: list[int] = []
    for part in text.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            out.extend(range(int(lo), int(hi) + 1))
        elif part.strip():
            out.append(int(part))
    return out


def _selector(rng: random.Random) -> Json:
    if rng.random() < 0.8:
        return {"matchLabels": {"app": rng.choice(APPS)}}
    return {"matchExpressions": [{"key": "app", "operator": "In", "values": rng.sample(APPS, 2)}]}


def _term(rng: random.Random) -> Json:
    return {"labelSelector": _selector(rng), "topologyKey": rng.choice(KEYS)}


def _affinity(rng: random.Random, *, existing: bool) -> Json | None:
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    out: Json = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        block: Json = {}
        if rng.random() < (0.1 if existing else 0.2):
            block[req] = [_term(rng)]
        if rng.random() < 0.25:
            block[pref] = [
                {"weight": rng.randint(1, 100), "podAffinityTerm": _term(rng)}
                for _ in range(rng.randint(1, 2))
            ]
        if block:
            out[kind] = block
    return out or None


def random_scenario(seed: int, pods: int) -> Scenario:
    rng = random.Random(seed)
    nodes = []
    for i in range(rng.randint(4, 9)):
        zone = None if rng.random() < 0.1 else f"z{rng.randint(1, 3)}"
        taints = (
            [
                {
                    "key": "dedicated",
                    "value": "x",
                    "effect": rng.choice(["NoSchedule", "PreferNoSchedule"]),
                }
            ]
            if rng.random() < 0.15
            else []
        )
        labels = {"disk": rng.choice(["ssd", "hdd"])}
        nodes.append(
            fake_node(f"n{i}", zone=zone, cpu=str(rng.randint(2, 16)), labels=labels, taints=taints)
        )
    names = [n["metadata"]["name"] for n in nodes]
    existing = []
    for i in range(rng.randint(0, 12)):
        spec: dict[str, Any] = {}
        affinity = _affinity(rng, existing=True)
        if affinity:
            spec["affinity"] = affinity
        existing.append(
            pause(
                f"old-{i}",
                labels={"app": rng.choice(APPS)},
                node=rng.choice(names),
                cpu=f"{rng.randint(1, 10) * 100}m",
                **spec,
            )
        )
    to_place = []
    for i in range(pods):
        spec = {}
        if rng.random() < 0.2:
            spec["nodeSelector"] = {"disk": rng.choice(["ssd", "hdd"])}
        if rng.random() < 0.2:
            spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        if rng.random() < 0.4:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": rng.randint(1, 2),
                    "topologyKey": rng.choice(KEYS),
                    "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
                    "labelSelector": _selector(rng),
                }
            ]
        affinity = _affinity(rng, existing=False)
        if affinity:
            spec["affinity"] = affinity
        to_place.append(
            pause(
                f"p-{i}",
                labels={"app": rng.choice(APPS)},
                cpu=f"{rng.randint(1, 30) * 100}m",
                **spec,
            )
        )
    return Scenario(
        f"random seed {seed}",
        nodes=nodes,
        existing=existing,
        pods=to_place,
        independent=True,
        statuses=_resizes(seed, existing),
    )


def _resizes(seed: int, existing: list[Json]) -> dict[str, Json]:
    """Some existing pods in the middle of an in-place resize (up or down, admitted or not
    yet actuated, or infeasible), drawn from a generator of their own so that a seed's
    cluster is otherwise what it always was."""
    rng = random.Random(f"resize-{seed}")
    out = {}
    for raw in existing:
        if rng.random() < 0.7:
            continue
        actuated = f"{rng.randint(1, 20) * 100}m"
        allocated = f"{rng.randint(1, 20) * 100}m" if rng.random() < 0.7 else None
        out[raw["metadata"]["name"]] = resized(
            actuated, allocated_cpu=allocated, infeasible=rng.random() < 0.25
        )
    return out


@pytest.mark.parametrize("seed", _seeds())
async def test_random_clusters_agree(runner: Runner, seed: int) -> None:
    pods = int(os.environ.get("ASCHEDULER_DIFF_PODS", "10"))
    scenario = random_scenario(seed, pods)
    comparison = await differ(runner, scenario)
    # What was compared, on stderr (`pytest -s` shows it).
    print(f"seed {seed}:\n{comparison.report()}", file=sys.stderr)
    assert not comparison.disagreements, (
        f"seed {seed} (rerun: ASCHEDULER_DIFF_SEEDS={seed} ASCHEDULER_DIFF_PODS={pods}):\n"
        f"{comparison.report()}"
    )


# -- configuration variants: the same random worlds under a random profile ----------------------

SCORE_PLUGINS = (
    "TaintToleration",
    "NodeAffinity",
    "NodeResourcesFit",
    "PodTopologySpread",
    "InterPodAffinity",
    "NodeResourcesBalancedAllocation",
    "ImageLocality",
)


def random_profile(rng: random.Random) -> Json:
    """A profile as users write them: default plugins named again in multiPoint (some without
    a weight: replaced at weight 1), a Score point entry winning over multiPoint's, a scoring
    strategy, and the profile's own node affinity on top of every pod's."""
    multi = [
        {"name": name, **({"weight": rng.randint(1, 5)} if rng.random() < 0.5 else {})}
        for name in rng.sample(SCORE_PLUGINS, rng.randint(1, 4))
    ]
    plugins: Json = {"multiPoint": {"enabled": multi}}
    if rng.random() < 0.3:
        plugins["score"] = {
            "enabled": [{"name": rng.choice(SCORE_PLUGINS), "weight": rng.randint(1, 5)}]
        }
    config: list[Json] = [
        {
            "name": "NodeResourcesFit",
            "args": {"scoringStrategy": {"type": rng.choice(["LeastAllocated", "MostAllocated"])}},
        }
    ]
    if rng.random() < 0.6:
        added: Json = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": rng.randint(1, 50),
                    "preference": {
                        "matchExpressions": [
                            {
                                "key": "disk",
                                "operator": "In",
                                "values": [rng.choice(["ssd", "hdd"])],
                            }
                        ]
                    },
                }
            ]
        }
        if rng.random() < 0.5:
            zones = rng.sample(["z1", "z2", "z3"], 2)
            added["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": zones}]}
                ]
            }
        config.append({"name": "NodeAffinity", "args": {"addedAffinity": added}})
    return {"plugins": plugins, "pluginConfig": config}


def _config_seeds() -> list[int]:
    text = os.environ.get("ASCHEDULER_DIFF_CONFIG_SEEDS", "1")
    return [int(part) for part in text.split(",") if part.strip()]


@pytest.mark.parametrize("seed", _config_seeds())
async def test_random_configurations_agree(runner: Runner, seed: int) -> None:
    """A random world under a random profile (each a scheduler pair of its own, so one seed
    by default: ASCHEDULER_DIFF_CONFIG_SEEDS=1,2,3 for more)."""
    pods = int(os.environ.get("ASCHEDULER_DIFF_PODS", "10"))
    rng = random.Random(f"config-{seed}")
    scenario = dataclasses.replace(
        random_scenario(seed, pods), name=f"random config seed {seed}", profile=random_profile(rng)
    )
    comparison = await differ(runner, scenario)
    print(f"config seed {seed}: {scenario.profile}\n{comparison.report()}", file=sys.stderr)
    assert not comparison.disagreements, (
        f"config seed {seed} (rerun: ASCHEDULER_DIFF_CONFIG_SEEDS={seed} "
        f"ASCHEDULER_DIFF_PODS={pods}):\n{comparison.report()}"
    )
