"""Scenarios where InterPodAffinity differs between releases: a term's namespace selector,
once resolved, is kept up to 1.36 (a selector an empty label set satisfies, such as `NotIn`
or `DoesNotExist`, then selects every namespace) and cleared from 1.37 (only the namespaces it
matched count). Run on each release's plane, they compare ascheduler with that release's
kube-scheduler."""

from __future__ import annotations

from tests.integration.differential.harness import Json, Scenario, fake_node, pause

ZONED = [
    fake_node("a1", zone="z1", cpu="4"),
    fake_node("a2", zone="z1", cpu="5"),
    fake_node("b1", zone="z2", cpu="6"),
    fake_node("b2", zone="z2", cpu="7"),
    fake_node("c1", zone="z3", cpu="8"),
]
WEB = {"app": "web"}
REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"


def db_term(selector: Json) -> Json:
    return {
        "labelSelector": {"matchLabels": {"app": "db"}},
        "topologyKey": "topology.kubernetes.io/zone",
        "namespaceSelector": selector,
    }


def expression(operator: str, *values: str) -> Json:
    req: Json = {"key": "tier", "operator": operator}
    if values:
        req["values"] = list(values)
    return {"matchExpressions": [req]}


NOT_DEV = expression("NotIn", "dev")
NO_TIER = expression("DoesNotExist")
PROD = expression("In", "prod")
#: BalancedAllocation's score changed in 1.36 on its own; left out so that the scores
#: compared are InterPodAffinity's on every release.
WITHOUT_BALANCED: Json = {
    "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}}
}

AFFINITY_SCENARIOS: list[Scenario] = [
    Scenario(
        "affinity: a resolved namespace selector (kept to 1.36, cleared from 1.37)",
        nodes=ZONED,
        namespaces={"default": {}, "data": {"tier": "prod"}, "scratch": {"tier": "dev"}},
        existing=[
            pause("db-0", labels={"app": "db"}, namespace="data", node="a1"),
            pause("db-1", labels={"app": "db"}, namespace="scratch", node="b1"),
        ],
        pods=[
            pause(
                "anti-not-dev",
                labels=WEB,
                affinity={"podAntiAffinity": {REQ: [db_term(NOT_DEV)]}},
            ),
            pause(
                "with-not-dev",
                labels=WEB,
                affinity={"podAffinity": {REQ: [db_term(NOT_DEV)]}},
            ),
            # A db itself: from 1.37 no db is in a namespace without a tier, so it is the
            # first of its group and goes anywhere; up to 1.36 it must join z1 or z2.
            pause(
                "with-no-tier",
                labels={"app": "db"},
                affinity={"podAffinity": {REQ: [db_term(NO_TIER)]}},
            ),
            pause(
                "anti-prod",
                labels=WEB,
                affinity={"podAntiAffinity": {REQ: [db_term(PROD)]}},
            ),
            pause(
                "prefers-no-tier",
                labels=WEB,
                affinity={
                    "podAffinity": {PREF: [{"weight": 60, "podAffinityTerm": db_term(NO_TIER)}]}
                },
            ),
            pause(
                "avoids-not-dev",
                labels=WEB,
                affinity={
                    "podAntiAffinity": {PREF: [{"weight": 60, "podAffinityTerm": db_term(NOT_DEV)}]}
                },
            ),
        ],
        independent=True,
        profile=WITHOUT_BALANCED,
    ),
]
