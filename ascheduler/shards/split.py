"""Which live member schedules a pod: rendezvous (highest random weight) hashing.

Every member computes, for a pod's *shard key*, a weight per live member (a digest of the
member's identity and the key) and the member of the highest weight owns the pod. Every
member that sees the same live members therefore picks the same owner, with no coordination
beyond the member Leases; and when a member joins or leaves, only the pods whose highest
weight was (or becomes) that member's change hands, about 1/n of them, where a hash modulo
the member count would move almost all.

A pod's shard key is its group's for a pod in a pod group (a gang: all-or-nothing groups are
placed by one scheduler, whose Permit waits for the group's other members), else its uid,
which never changes for the pod's life.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from ascheduler.model import PodInfo
from ascheduler.model.podgroups import group_key


def shard_key(pod: PodInfo) -> str:
    """What a pod is split by: its group's key (pod groups stay whole), else its uid."""
    return group_key(pod) or pod.uid


def weight(member: str, key: str) -> int:
    """The member's weight for `key`: 64 bits of a digest of both, the same on every member
    and in every process (Python's `hash` of a str is salted per process)."""
    digest = hashlib.blake2b(f"{member}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(key: str, members: Iterable[str]) -> str | None:
    """The member of the highest weight for `key` (ties, never expected, go to the greater
    identity); None when there is no member."""
    best: tuple[int, str] | None = None
    for member in members:
        candidate = (weight(member, key), member)
        if best is None or candidate > best:
            best = candidate
    return None if best is None else best[1]


@dataclass(frozen=True, slots=True)
class Split:
    """The live members as this instance sees them, and which of them it is. `me` missing
    from `members` (our own Lease not renewed in time, or not written yet) owns nothing."""

    me: str
    members: tuple[str, ...]

    @classmethod
    def of(cls, me: str, members: Iterable[str]) -> Split:
        return cls(me, tuple(sorted(set(members))))

    @property
    def live(self) -> bool:
        """Whether this instance counts itself among the live members."""
        return self.me in self.members

    def owner_of(self, pod: PodInfo) -> str | None:
        return owner(shard_key(pod), self.members)

    def mine(self, pod: PodInfo) -> bool:
        """Whether `pod` is this instance's to schedule."""
        if len(self.members) == 1:
            return self.members[0] == self.me
        return self.live and self.owner_of(pod) == self.me
