"""Which member owns a pod: every member's view of the same live members agrees, each pod has
exactly one owner, a member joining or leaving moves only its own share, and a pod group
stays whole."""

from __future__ import annotations

from collections import Counter

from ascheduler.model.podgroups import POD_GROUP_LABEL
from ascheduler.shards import Split, owner, shard_key
from tests.kit import pod_info

KEYS = [f"uid-{i}" for i in range(3000)]
THREE = ["sched-a", "sched-b", "sched-c"]


def test_the_owner_does_not_depend_on_the_order_members_are_seen_in() -> None:
    for key in KEYS[:200]:
        assert owner(key, THREE) == owner(key, reversed(THREE)) == owner(key, set(THREE))


def test_nobody_owns_a_pod_without_members() -> None:
    assert owner("uid-1", []) is None


def test_a_member_leaving_moves_only_its_own_pods() -> None:
    before = {key: owner(key, THREE) for key in KEYS}
    after = {key: owner(key, THREE[:2]) for key in KEYS}
    moved = {key for key in KEYS if before[key] != after[key]}
    assert moved == {key for key in KEYS if before[key] == "sched-c"}
    assert moved  # it had a share


def test_a_member_joining_takes_pods_only_for_itself() -> None:
    before = {key: owner(key, THREE) for key in KEYS}
    after = {key: owner(key, [*THREE, "sched-d"]) for key in KEYS}
    gained = {after[key] for key in KEYS if before[key] != after[key]}
    assert gained == {"sched-d"}


def test_the_shares_are_even_enough() -> None:
    shares = Counter(owner(key, THREE) for key in KEYS)
    assert set(shares) == set(THREE)
    # A third each, give or take far more than a good hash's spread over 3,000 keys.
    assert all(len(KEYS) * 0.25 < count < len(KEYS) * 0.42 for count in shares.values())


def test_every_pod_is_mine_in_exactly_one_members_view() -> None:
    splits = [Split.of(me, THREE) for me in THREE]
    for i in range(300):
        pod = pod_info(f"p{i}")
        assert sum(split.mine(pod) for split in splits) == 1


def test_an_instance_whose_own_lease_is_late_owns_nothing() -> None:
    late = Split.of("sched-a", ["sched-b"])
    assert not late.live
    assert not any(late.mine(pod_info(f"p{i}")) for i in range(50))
    assert not Split.of("sched-a", []).mine(pod_info("p"))


def test_alone_an_instance_owns_every_pod() -> None:
    alone = Split.of("sched-a", ["sched-a"])
    assert all(alone.mine(pod_info(f"p{i}")) for i in range(50))


def test_a_pod_group_stays_whole() -> None:
    members = [pod_info(f"m{i}", labels={POD_GROUP_LABEL: "train"}) for i in range(40)]
    assert {shard_key(pod) for pod in members} == {"PodGroup:default/train"}
    assert len({owner(shard_key(pod), THREE) for pod in members}) == 1
    # Pods outside any group go by their uid, so they spread.
    loose = [pod_info(f"l{i}") for i in range(40)]
    assert shard_key(loose[0]) == loose[0].uid
    assert len({owner(shard_key(pod), THREE) for pod in loose}) == len(THREE)
