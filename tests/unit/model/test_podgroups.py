"""The pod group records of each release: `scheduling.k8s.io` PodGroups (v1alpha2 in 1.36,
v1beta1 in 1.37), v1alpha2 Workloads' templates, and the key a pod's group is found by."""

from __future__ import annotations

from typing import Any

from ascheduler.features import Release
from ascheduler.model import parse_pod
from ascheduler.model.podgroups import (
    GroupCondition,
    group_key,
    object_of,
    parse_scheduling_group,
    parse_workload,
    scheduling_group_api,
)
from tests.kit import parsed, pod


def group(spec: Any, **meta: Any) -> Any:
    return parse_scheduling_group(
        {"metadata": {"name": "g", "namespace": "ns", **meta}, "spec": spec}
    )


def test_a_gang_and_a_basic_group() -> None:
    gang = group(
        {
            "schedulingPolicy": {"gang": {"minCount": 3}},
            "podGroupTemplateRef": {
                "workload": {"workloadName": "job", "podGroupTemplateName": "workers"}
            },
        },
        generation=2,
    )
    assert (gang.key, gang.min_count, gang.gang, gang.errors) == ("ns/g", 3, True, ())
    assert (gang.template, gang.generation) == (("job", "workers"), 2)
    basic = group({"schedulingPolicy": {"basic": {}}})
    assert (basic.min_count, basic.gang, basic.errors) == (None, False, ())
    # v1beta1 (1.37) names the template by `workloadRef`, and may have a parent.
    beta = group(
        {
            "schedulingPolicy": {"gang": {"minCount": 1}},
            "workloadRef": {"workloadName": "job", "templateName": "w"},
            "parentCompositePodGroupName": "cpg",
        }
    )
    assert (beta.template, beta.parent) == (("job", "w"), "cpg")


def test_a_group_scheduled_once_says_so() -> None:
    status = {"conditions": [{"type": "PodGroupScheduled", "status": "True"}]}
    body = {
        "metadata": {"name": "g", "namespace": "ns"},
        "spec": {"schedulingPolicy": {"basic": {}}},
        "status": status,
    }
    assert parse_scheduling_group(body).scheduled
    status["conditions"][0]["type"] = "PodGroupInitiallyScheduled"  # its 1.37 name
    assert parse_scheduling_group(body).scheduled
    status["conditions"][0]["status"] = "False"
    assert not parse_scheduling_group(body).scheduled


def test_the_schedulers_condition_priority_and_preemption_policy_are_read() -> None:
    condition = {
        "type": "PodGroupInitiallyScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "m",
        "observedGeneration": 3,
        "lastTransitionTime": "2026-01-02T03:04:05Z",
    }
    body = {
        "metadata": {"name": "g", "namespace": "ns"},
        "spec": {
            "schedulingPolicy": {"basic": {}},
            "priority": 1000,
            "preemptionPolicy": "Never",
        },
        "status": {"conditions": [condition, {"type": "DisruptionTarget", "status": "True"}]},
    }
    g = parse_scheduling_group(body)
    assert (g.priority, g.preemption_policy, g.errors) == (1000, "Never", ())
    assert g.condition("PodGroupScheduled") is None
    found = g.condition("PodGroupInitiallyScheduled")
    assert found == GroupCondition(
        "PodGroupInitiallyScheduled", "False", "Unschedulable", "m", 3, "2026-01-02T03:04:05Z"
    )
    assert len(g.conditions) == 1  # only the scheduler's own
    # Unset: priority 0 (kube-scheduler's `PodGroupPriority`), no policy; a bad one named.
    assert (group({"schedulingPolicy": {"basic": {}}}).priority, g.errors) == (0, ())
    bad = group({"schedulingPolicy": {"basic": {}}, "priority": "high"})
    assert bad.errors == ("spec.priority: expected an integer, got 'high'",)


def test_the_disruption_mode_says_whether_the_group_is_preempted_whole() -> None:
    basic = {"schedulingPolicy": {"basic": {}}}
    assert group({**basic, "disruptionMode": {"all": {}}}).disruption_all
    assert not group({**basic, "disruptionMode": {"single": {}}}).disruption_all
    assert not group(basic).disruption_all
    assert not group({**basic, "disruptionMode": "all"}).disruption_all  # not an object


def test_bad_policies_are_errors_with_their_field_never_exceptions() -> None:
    cases = {
        "spec.schedulingPolicy: required": {},
        "spec.schedulingPolicy: exactly one of basic and gang must be set": {
            "schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}
        },
        "spec.schedulingPolicy.gang.minCount: expected an integer, got 'x'": {
            "schedulingPolicy": {"gang": {"minCount": "x"}}
        },
        "spec.schedulingPolicy.gang.minCount: must be greater than 0, got 0": {
            "schedulingPolicy": {"gang": {"minCount": 0}}
        },
        "spec.schedulingPolicy: expected an object, got list": {"schedulingPolicy": []},
    }
    for error, spec in cases.items():
        assert error in group(spec).errors, (error, group(spec).errors)
    for junk in (None, [], "x", {"metadata": 3, "spec": "y"}):
        assert parse_scheduling_group(junk).errors == ("spec.schedulingPolicy: required",)


def test_a_workload_of_templates() -> None:
    workload = parse_workload(
        {
            "metadata": {"name": "job", "namespace": "ns"},
            "spec": {
                "podGroupTemplates": [
                    {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}}},
                    {"name": "driver", "schedulingPolicy": {"basic": {}}},
                    "junk",
                ]
            },
        }
    )
    assert dict(workload.groups) == {"workers": 4, "driver": None}
    assert workload.errors == ("spec.podGroupTemplates[2]: expected an object",)


def test_each_release_watches_its_version() -> None:
    assert scheduling_group_api(Release(1, 35)) is None
    assert scheduling_group_api(Release(1, 36)) == "/apis/scheduling.k8s.io/v1alpha2/podgroups"
    assert scheduling_group_api(Release(1, 37)) == "/apis/scheduling.k8s.io/v1beta1/podgroups"
    assert scheduling_group_api(Release(1, 38)) == "/apis/scheduling.k8s.io/v1beta1/podgroups"


def test_a_pod_names_its_group_by_scheduling_group() -> None:
    member = parsed(pod("m", namespace="ns", schedulingGroup={"podGroupName": "g"}))
    assert member.scheduling_group == "g"
    key = group_key(member)
    assert key == "SchedulingGroup:ns/g"
    assert object_of(key) == "ns/g"
    bad = parse_pod(pod("b", schedulingGroup={"podGroupName": 7}))
    assert bad.scheduling_group is None
    assert any(e.startswith("spec.schedulingGroup.podGroupName") for e in bad.errors)
    assert parsed(pod("none", schedulingGroup={})).scheduling_group is None
