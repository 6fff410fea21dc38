"""TeamQuota (examples/platform): PreFilter works out the pod's team and quota once and
writes them to the CycleState; Filter keeps pods off nodes dedicated to other teams; Permit
holds a pod whose team runs its quota and lets waiting pods go, longest-waiting first, as the
team's pods end; the queueing hints wake a rejected pod only for events that can help it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from teamquota import (
    DEDICATED_REASON,
    NAME,
    REGISTRATION,
    STATE_KEY,
    TeamCycle,
    TeamQuota,
    TeamQuotaArgs,
)

from ascheduler.cache import Cache
from ascheduler.framework import (
    ClusterEvent,
    Code,
    ConfigError,
    CycleState,
    Handle,
    PluginArgsError,
    PodInfo,
    Status,
    WaitingPod,
)
from tests.kit import make_cache, node, node_info, parsed, pod, rejected_reasons, rejection_codes
from tests.kit import run_filter as run

TEAM = "example.com/team"


def plugin(cache: Cache, args: Mapping[str, Any] | None = None) -> TeamQuota:
    built = REGISTRATION.build(REGISTRATION.decode_args(args, "args"), Handle(nodes=cache.table))
    assert isinstance(built, TeamQuota)
    return built


def member(name: str, team: str | None, node_name: str | None = None) -> PodInfo:
    return parsed(pod(name, labels=None if team is None else {TEAM: team}, node_name=node_name))


# -- PreFilter ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("team", "cycle", "code"),
    [
        pytest.param(None, TeamCycle("", 0), Code.SUCCESS, id="no-team"),
        pytest.param("ml", TeamCycle("ml", 3), Code.SUCCESS, id="named-quota"),
        pytest.param("web", TeamCycle("web", 5), Code.SUCCESS, id="default-quota"),
        pytest.param("banned", TeamCycle("banned", 0), Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
    ],
)
def test_pre_filter_writes_the_team_and_its_quota(
    team: str | None, cycle: TeamCycle, code: Code
) -> None:
    cache = make_cache([node("n")])
    quota = plugin(cache, {"quotas": {"ml": 3, "banned": 0}, "defaultQuota": 5})
    state = CycleState()
    result, status = quota.pre_filter(state, member("p", team), cache.table)
    assert result is None
    assert status.code is code
    assert state.read(STATE_KEY) == cycle
    if code is not Code.SUCCESS:
        assert status.message == "team 'banned' has no quota"


# -- Filter ------------------------------------------------------------------------------

NODES = [
    node("shared"),
    node("ml-1", labels={TEAM: "ml"}),
    node("ml-2", labels={TEAM: "ml"}),
    node("web-1", labels={TEAM: "web"}),
]


@pytest.mark.parametrize(
    ("team", "rejected"),
    [
        pytest.param("ml", {"web-1"}, id="own-team-and-shared"),
        pytest.param("web", {"ml-1", "ml-2"}, id="other-team"),
        pytest.param("batch", {"ml-1", "ml-2", "web-1"}, id="team-without-nodes"),
        pytest.param(None, {"ml-1", "ml-2", "web-1"}, id="no-team-shared-only"),
    ],
)
def test_filter(team: str | None, rejected: set[str]) -> None:
    cache = make_cache(NODES)
    labels = None if team is None else {TEAM: team}
    result = run(plugin(cache), pod(labels=labels), cache)
    assert rejected_reasons(result, cache) == {name: [DEDICATED_REASON] for name in rejected}
    assert set(rejection_codes(result, cache).values()) == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


def test_relabelled_nodes_invalidate_the_cached_masks() -> None:
    cache = make_cache(NODES)
    quota = plugin(cache)
    ml = pod(labels={TEAM: "ml"})
    assert set(rejected_reasons(run(quota, ml, cache), cache)) == {"web-1"}
    cache.update_node(node_info("web-1"))
    cache.update_node(node_info("shared", labels={TEAM: "web"}))
    assert set(rejected_reasons(run(quota, ml, cache), cache)) == {"shared"}


def test_filter_passes_every_node_when_none_is_dedicated() -> None:
    cache = make_cache([node("a"), node("b", labels={"other": "x"})])
    assert run(plugin(cache), pod(labels={TEAM: "ml"}), cache) is None


# -- Permit ------------------------------------------------------------------------------


def permit(quota: TeamQuota, cache: Cache, pod_info: PodInfo, node_name: str) -> Status:
    """PreFilter, then the pod assumed on `node_name` and its Permit, as the scheduling cycle
    runs them; a WAIT registers the pod as waiting, as the framework does."""
    state = CycleState()
    _, status = quota.pre_filter(state, pod_info, cache.table)
    assert status.ok, status
    cache.assume(pod_info, node_name)
    status, timeout = quota.permit(state, pod_info, node_name)
    if status.code is Code.WAIT:
        quota.handle.waiting_pods.add(WaitingPod(pod_info, node_name, {NAME: timeout}))
    return status


@pytest.mark.parametrize(
    ("running", "code"),
    [
        pytest.param([], Code.SUCCESS, id="none-running"),
        pytest.param(["ml"], Code.SUCCESS, id="room-for-one"),
        pytest.param(["ml", "ml"], Code.WAIT, id="at-quota"),
        pytest.param(["ml", "ml", "ml"], Code.WAIT, id="over-quota"),
        pytest.param(["web", "web", None, "ml"], Code.SUCCESS, id="others-do-not-count"),
    ],
)
async def test_permit_waits_at_the_quota(running: list[str | None], code: Code) -> None:
    cache = make_cache([node("n")])
    quota = plugin(cache, {"quotas": {"ml": 2}})
    for i, team in enumerate(running):
        cache.add_pod(member(f"r{i}", team, "n"))
    status = permit(quota, cache, member("p", "ml"), "n")
    assert status.code is code


async def test_permit_never_holds_a_pod_without_a_team() -> None:
    cache = make_cache([node("n")])
    quota = plugin(cache, {"defaultQuota": 1})
    cache.add_pod(member("r", None, "n"))
    assert permit(quota, cache, member("p", None), "n").code is Code.SUCCESS


async def test_waiting_pods_are_allowed_in_order_as_the_team_frees_slots() -> None:
    cache = make_cache([node("n")])
    quota = plugin(cache, {"quotas": {"ml": 1}})
    armed: list[Callable[[], None]] = []
    quota.later = lambda _delay, callback: armed.append(callback)
    running = member("running", "ml", "n")
    cache.add_pod(running)
    first, second = member("first", "ml"), member("second", "ml")
    assert permit(quota, cache, first, "n").code is Code.WAIT
    assert permit(quota, cache, second, "n").code is Code.WAIT
    assert len(armed) == 1  # one recount for all waiting pods
    waiting = quota.handle.waiting_pods

    armed.pop()()  # nothing ended: both still wait, and it recounts again
    assert [w.pod.name for w in waiting] == ["first", "second"]
    assert len(armed) == 1

    cache.remove_pod(running)
    # A newcomer does not jump the queue, though the team has room.
    third = member("third", "ml")
    assert permit(quota, cache, third, "n").code is Code.WAIT
    first_waiting = waiting.get(first.uid)
    assert first_waiting is not None
    armed.pop()()
    assert await first_waiting.wait() == Status()
    waiting.remove(first.uid)  # its binding cycle takes it from here
    assert [w.pod.name for w in waiting] == ["second", "third"]

    # The next slot goes to the next in line once `first` ends.
    armed.pop()()
    assert [w.pod.name for w in waiting] == ["second", "third"]
    cache.forget(first)
    armed.pop()()
    second_waiting = waiting.get(second.uid)
    assert second_waiting is not None
    assert (await second_waiting.wait()).ok


async def test_a_pod_that_waits_too_long_is_rejected_and_forgotten() -> None:
    cache = make_cache([node("n")])
    quota = plugin(cache, {"quotas": {"ml": 1}, "permitWaitSeconds": 0.01})
    armed: list[Callable[[], None]] = []
    quota.later = lambda _delay, callback: armed.append(callback)
    running = member("running", "ml", "n")
    cache.add_pod(running)
    late = member("late", "ml")
    assert permit(quota, cache, late, "n").code is Code.WAIT
    waiting = quota.handle.waiting_pods.get(late.uid)
    assert waiting is not None
    status = await waiting.wait()
    assert status.code is Code.UNSCHEDULABLE
    assert status.message == "rejected due to timeout after waiting 10ms at plugin TeamQuota"
    # The framework takes it back: no longer waiting, no longer on the node.
    quota.handle.waiting_pods.remove(late.uid)
    cache.forget(late)
    armed.pop()()
    assert armed == []  # nothing waits: no more recounts
    cache.remove_pod(running)
    assert permit(quota, cache, member("next", "ml"), "n").code is Code.SUCCESS


# -- queueing hints ----------------------------------------------------------------------


def test_events() -> None:
    cache = make_cache([node("n")])
    assert plugin(cache).events_to_register() == {
        ClusterEvent.NODE_ADD,
        ClusterEvent.NODE_LABEL,
        ClusterEvent.ASSIGNED_POD_DELETE,
    }


SHARED = node_info("n")
ML_NODE = node_info("n", labels={TEAM: "ml"})
WEB_NODE = node_info("n", labels={TEAM: "web"})


@pytest.mark.parametrize(
    ("team", "event", "old", "new", "hint"),
    [
        pytest.param("ml", ClusterEvent.ASSIGNED_POD_DELETE, member("o", "ml", "n"), None, True),
        pytest.param("ml", ClusterEvent.ASSIGNED_POD_DELETE, member("o", "web", "n"), None, False),
        pytest.param("ml", ClusterEvent.ASSIGNED_POD_DELETE, member("o", None, "n"), None, False),
        pytest.param(None, ClusterEvent.ASSIGNED_POD_DELETE, member("o", None, "n"), None, False),
        pytest.param("ml", ClusterEvent.NODE_ADD, None, ML_NODE, True, id="add-own"),
        pytest.param("ml", ClusterEvent.NODE_ADD, None, SHARED, True, id="add-shared"),
        pytest.param("ml", ClusterEvent.NODE_ADD, None, WEB_NODE, False, id="add-other"),
        pytest.param(None, ClusterEvent.NODE_ADD, None, ML_NODE, False, id="add-teamless"),
        pytest.param(None, ClusterEvent.NODE_ADD, None, SHARED, True, id="add-shared-teamless"),
        pytest.param("ml", ClusterEvent.NODE_LABEL, WEB_NODE, ML_NODE, True, id="to-own"),
        pytest.param("ml", ClusterEvent.NODE_LABEL, WEB_NODE, SHARED, True, id="undedicated"),
        pytest.param("ml", ClusterEvent.NODE_LABEL, SHARED, WEB_NODE, False, id="to-other"),
        pytest.param("ml", ClusterEvent.NODE_LABEL, SHARED, ML_NODE, False, id="took-it-already"),
        pytest.param("ml", ClusterEvent.NODE_ALLOCATABLE, SHARED, SHARED, True, id="other-event"),
    ],
)
def test_queueing_hint(
    team: str | None, event: ClusterEvent, old: Any, new: Any, hint: bool
) -> None:
    cache = make_cache([node("n")])
    assert plugin(cache).queueing_hint(member("p", team), event, old, new) is hint


# -- arguments ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        pytest.param({"quotas": {"ml": -1}}, "quotas.ml: must not be negative", id="quota"),
        pytest.param({"defaultQuota": -1}, "defaultQuota: must not be negative", id="default"),
        pytest.param({"permitWaitSeconds": 0}, "permitWaitSeconds: must be greater than 0"),
        pytest.param({"recheckSeconds": -1}, "recheckSeconds: must be greater than 0"),
        pytest.param({"teamLabel": ""}, "teamLabel: required", id="label"),
    ],
)
def test_args_are_validated(raw: dict[str, Any], problem: str) -> None:
    with pytest.raises((ConfigError, PluginArgsError)) as info:
        REGISTRATION.decode_args(raw, "args")
    assert problem in str(info.value)


def test_args_defaults() -> None:
    assert REGISTRATION.decode_args(None, "args") == TeamQuotaArgs()
