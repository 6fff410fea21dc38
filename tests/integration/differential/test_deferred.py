"""A deferred in-place resize, run by kube-scheduler 1.37 and by ascheduler with
InPlacePodVerticalScalingSchedulerPreemption on: a bound pod whose kubelet deferred its
resize (the PodResizePending condition written here, as kwok does not resize) is scheduled
again on its node, and preemption evicts the lower-priority pod that keeps the resize out.
Compared between the two: the victims, the pod's fate (still bound to its node), what the
failure writes (no FailedScheduling event, no PodScheduled condition, no nomination) and the
messages of its attempts as each scheduler logs them (the first: the fit error and what
preemption did; once the victim is gone, the pod fits and its cycle ends at assume, which
refuses a pod already in the cache)."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ascheduler.features import Release
from ascheduler.kube import ApiError
from tests.integration.differential.harness import (
    ASCHEDULER,
    KUBE,
    PREEMPTION_TIMEOUT,
    Runner,
    Scenario,
    fake_node,
    pause,
    plane_release,
)
from tests.integration.differential.scenarios_resize import resized

pytestmark = pytest.mark.skipif(
    plane_release() < Release(1, 37), reason="InPlacePodVerticalScalingSchedulerPreemption: 1.37"
)

GATE = "InPlacePodVerticalScalingSchedulerPreemption=true"
DEFERRED = {
    "type": "PodResizePending",
    "status": "True",
    "reason": "Deferred",
    "message": "Node didn't have enough capacity",
}
#: How long a run is watched for attempts after the victim's fate is known.
SETTLE = 3.0
#: kube-scheduler's klog lines for a failed attempt, and their `err` and `pod` values.
_KUBE_FAILED = ('"Unable to schedule pod; no fit; waiting"', '"Error scheduling pod; retrying"')
_KUBE_ERR = re.compile(r' err="((?:[^"\\]|\\.)*)"')
_KUBE_POD = re.compile(r' pod="([^"]+)"')


@dataclass(frozen=True)
class Fate:
    evicted: bool
    node: str
    nominated: str
    scheduled_conditions: tuple[str, ...]
    failed_events: int
    #: The messages of its failed attempts, in order, without repeats, namespaces and uids
    #: made the same for both runs.
    messages: tuple[str, ...]


def scenario(victim_class: str) -> Scenario:
    return Scenario(
        f"deferred resize: preemption on its node ({victim_class} victim)",
        nodes=[fake_node("n1", cpu="4"), fake_node("n2", cpu="4")],
        existing=[pause("low", node="n1", cpu="2", priorityClassName=f"diff-{victim_class}")],
        pods=[],
        feature_gates=GATE,
        dry_run=False,
    )


def grows() -> dict[str, Any]:
    """Bound to n1 asking 3 cpus, running with 1: the cache counts 3 beside `low`'s 2."""
    return pause("grows", node="n1", cpu="3", priorityClassName="diff-mid")


async def _victim_going(runner: Runner, path: str, wait: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        try:
            body = await runner.kube.get(path)
        except ApiError as exc:
            if exc.not_found:
                return True
            raise
        if body["metadata"].get("deletionTimestamp"):
            return True
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.2)


def _same(message: str, ns: str, uid: str) -> str:
    return message.replace(ns, "<ns>").replace(uid, "<uid>")


def _kube_messages(log: Path, ns: str, uid: str) -> list[str]:
    out = []
    for line in log.read_text().splitlines():
        if not any(head in line for head in _KUBE_FAILED):
            continue
        err, pod = _KUBE_ERR.search(line), _KUBE_POD.search(line)
        if err is not None and pod is not None and pod.group(1) == f"{ns}/grows":
            out.append(_same(json.loads(f'"{err.group(1)}"'), ns, uid))
    return out


def _our_messages(log: Path, ns: str, uid: str) -> list[str]:
    out = []
    for line in log.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("pod") == f"{ns}/grows" and entry.get("event") in (
            "pod_unschedulable",
            "pod_scheduling_error",
        ):
            out.append(_same(str(entry["message"]), ns, uid))
    return out


async def _fate(runner: Runner, s: Scenario, run: str, scheduler: str, evicts: bool) -> Fate:
    with runner.schedulers(s) as (kube_name, ours_name):
        name = kube_name if scheduler == KUBE else ours_name
        await runner.run(s, run, name)
        ns = runner.namespace(s, run, "default")
        raw = grows()
        body = runner._rewrite(s, run, raw, name)
        uid = (await runner.kube.post(f"/api/v1/namespaces/{ns}/pods", body))["metadata"]["uid"]
        status = resized("1", "128Mi", allocated_cpu="1")
        status["conditions"] = [DEFERRED]
        await runner.write_status(s, run, raw, status)
        # Waited for as long as an eviction may take where one is due, a few seconds of
        # attempts (which would show a wrong one) where none is.
        wait = PREEMPTION_TIMEOUT if evicts else SETTLE
        evicted = await _victim_going(runner, f"/api/v1/namespaces/{ns}/pods/low", wait)
        await asyncio.sleep(SETTLE)
        pod = await runner.kube.get(f"/api/v1/namespaces/{ns}/pods/grows")
        events = await runner.kube.get(
            f"/api/v1/namespaces/{ns}/events",
            params={"fieldSelector": "involvedObject.name=grows"},
        )
        log = Path(runner.logs[kube_name])
        if scheduler == KUBE:
            messages = _kube_messages(log, ns, uid)
        else:
            messages = _our_messages(log.parent / f"{ours_name}.log", ns, uid)
    return Fate(
        evicted=evicted,
        node=runner.logical_node(s, pod["spec"].get("nodeName") or ""),
        nominated=pod["status"].get("nominatedNodeName") or "",
        scheduled_conditions=tuple(
            f"{c['status']}/{c.get('reason', '')}"
            for c in pod["status"].get("conditions", [])
            if c["type"] == "PodScheduled"
        ),
        failed_events=sum(
            1 for e in events.get("items", []) if e.get("reason") == "FailedScheduling"
        ),
        messages=tuple(dict.fromkeys(messages)),
    )


@pytest.mark.parametrize(
    ("victim_class", "evicts"),
    [pytest.param("low", True, id="lower-priority"), pytest.param("high", False, id="higher")],
)
async def test_a_deferred_resize_preempts_on_its_node(
    runner: Runner, victim_class: str, evicts: bool
) -> None:
    s = scenario(victim_class)
    await runner.create_nodes(s)
    fates = {}
    try:
        for run, scheduler in (("k", KUBE), ("a", ASCHEDULER)):
            try:
                fates[scheduler] = await _fate(runner, s, run, scheduler, evicts)
            finally:
                await runner.cleanup(s, run)
    finally:
        await runner.delete_nodes(s)
    kube, ours = fates[KUBE], fates[ASCHEDULER]
    assert kube.messages, "kube-scheduler never attempted the deferred pod"
    assert kube.evicted is evicts, f"kube-scheduler: {kube}"
    assert ours == kube
