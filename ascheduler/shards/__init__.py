"""Sharding: several active instances split the pending pods among themselves.

A library layer beside `locks`: it imports only `ascheduler.model`, `ascheduler.kube` and leaf
utilities. What the split does to the scheduling queue is `ascheduler.sharding`'s (core).

* `split`: which live member owns a pod (rendezvous hashing of its shard key);
* `members`: `ShardSettings`, our member Lease renewed and the group's others watched.
"""

from ascheduler.shards.members import ShardMembers, ShardSettings
from ascheduler.shards.split import Split, owner, shard_key

__all__ = ["ShardMembers", "ShardSettings", "Split", "owner", "shard_key"]
