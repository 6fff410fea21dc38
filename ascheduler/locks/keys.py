"""Lock keys and the objects locks are written on.

A lock is named by a *key*: a node's name, or `<index>/<G>` for a lease group (a `/` no node
name has). Where the lock lives (`LockObject`) is a Lease by default: a node's own
(`ascheduler-node-<node>`) or, with lease groups, its group's; the Node itself under HAMi's key
(`hami.io/mutex.lock`, HAMi's place for it) or when the configuration says `object: node`.

**Lease groups.** With `lease_groups = G > 0` a Lease stands for a group of nodes instead of
one: node `n` belongs to group `digest(n) mod G`, the same in every instance, and its lock is
the group's (`ascheduler-nodes-<G>-<index>`). A burst over many nodes then takes one lock per
group instead of one per node (a write each), at the price of binds to different nodes of one
group waiting for each other, here and across instances. While another instance groups the
nodes differently, a bind takes its node's lock under every grouping in use (`lock_keys`, the
groupings from `members`): any two instances then share at least one lock per node.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from typing import Final, Literal

#: This project's own lock annotation; its values name an instance (see `values`).
DEFAULT_KEY: Final = "ascheduler.io/node-lock"
#: HAMi's lock annotation, on the Node; its values name the one pod a hold binds.
HAMI_KEY: Final = "hami.io/mutex.lock"
#: What a node's lock is written on: a Lease (small, watched by nobody else), or the Node
#: itself (HAMi's place for it).
LockObject = Literal["lease", "node"]
LOCK_OBJECTS: Final[tuple[LockObject, ...]] = ("lease", "node")
#: A node's lock Lease: this prefix and the node's name (a digest of it when too long).
NODE_LEASE_PREFIX: Final = "ascheduler-node-"
#: A group's lock Lease (lease groups): this prefix, the number of groups, '-' and the index.
#: No node's Lease can have such a name: theirs go on with '-' where these have 's'.
GROUP_LEASE_PREFIX: Final = "ascheduler-nodes-"
#: The longest object name (a DNS subdomain).
MAX_NAME: Final = 253
#: The annotation another instance writes on a lock object whose holder it waits for.
WANTED_SUFFIX: Final = "-wanted"
#: The annotation a release leaves beside the lock: the pods recent holds bound on the node
#: (uids, newest last), so the next holder can tell whether its cache has seen them.
BOUND_SUFFIX: Final = "-bound"


def lock_object_of(key: str, on: LockObject | None) -> LockObject:
    """Where locks under `key` live: `on` if given, else the Node for HAMi's key and a Lease
    for any other."""
    if on is not None:
        return on
    return "node" if key == HAMI_KEY else "lease"


def node_lease_name(node: str) -> str:
    """The Lease holding `node`'s lock (in the scheduler's lease namespace)."""
    name = NODE_LEASE_PREFIX + node
    if len(name) <= MAX_NAME:
        return name
    return NODE_LEASE_PREFIX + hashlib.sha256(node.encode()).hexdigest()


@functools.lru_cache(maxsize=1 << 16)
def group_key(node: str, groups: int) -> str:
    """The lock key of `node` when `groups` lease groups share the nodes (0: the node's own,
    its name). The group comes from a digest of the name, so every instance agrees on it."""
    if groups <= 0:
        return node
    index = int.from_bytes(hashlib.sha256(node.encode()).digest()[:8], "big") % groups
    return f"{index}/{groups}"


def lock_keys(node: str, groupings: Iterable[int]) -> list[str]:
    """The locks a bind to `node` takes, in the order every instance takes them: one per
    grouping in use (0: a Lease per node)."""
    return sorted({group_key(node, groups) for groups in groupings})


def lock_lease_name(key: str) -> str:
    """The Lease holding the lock of `key`: a group's, or a node's own."""
    index, slash, groups = key.partition("/")
    if slash:
        return f"{GROUP_LEASE_PREFIX}{groups}-{index}"
    return node_lease_name(key)


def is_group_key(key: str) -> bool:
    return "/" in key
