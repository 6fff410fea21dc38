"""Member Leases read back: other Leases are not members, and lease groups read as written
or as a Lease per node."""

from __future__ import annotations

import pytest

from ascheduler.locks.memberlease import (
    GROUPS_KEY,
    MEMBER_KEY,
    PEERS_KEY,
    member_lease_name,
    parse_member,
)


def test_other_leases_are_not_members() -> None:
    assert parse_member({"metadata": {"name": "ascheduler-node-n1", "annotations": {}}}) is None
    assert parse_member({"metadata": {"name": "ascheduler-member-x"}}) is None
    member = parse_member(
        {
            "metadata": {
                "name": "ascheduler-member-x",
                "annotations": {MEMBER_KEY: "x", PEERS_KEY: "a,b"},
            },
            "spec": {"renewTime": "2026-01-01T00:00:00.000000Z"},
        }
    )
    assert member is not None
    assert (member.identity, member.peers) == ("x", frozenset({"a", "b"}))


@pytest.mark.parametrize(
    ("written", "read"), [(None, 0), ("8", 8), ("-3", 0), ("x", 0), ("9" * 12, 0)]
)
def test_a_member_s_lease_groups_read_as_a_lease_per_node_unless_a_count(
    written: str | None, read: int
) -> None:
    annotations = {MEMBER_KEY: "m"}
    if written is not None:
        annotations[GROUPS_KEY] = written
    raw = {"metadata": {"name": member_lease_name("m"), "annotations": annotations}}
    member = parse_member(raw)
    assert member is not None
    assert member.lease_groups == read
