"""Two-level node locks: an `asyncio.Lock` per node under an annotation lock in the API server.

The in-process lock serialises this instance's binds on a node; the annotation serialises binds
across scheduler instances (replicas, shards, or ascheduler beside HAMi). It is written on an
object named after the node: the Node itself by default here (HAMi's place), or, as the binder
configures it, the node's own Lease (`node_lease_name`), a small object nobody else watches.
Staleness is then counted from the Lease informer's sightings instead of the node informer's.

**Lease groups.** With `lease_groups = G > 0` a Lease stands for a group of nodes instead of
one: node `n` belongs to group `digest(n) mod G`, the same in every instance, and its lock is
the group's (`ascheduler-nodes-<G>-<index>`). A burst over many nodes then takes one lock per
group instead of one per node (a write each), at the price of binds to different nodes of one
group waiting for each other, here and across instances. Locks are named by *keys*: a node's
name, or `<index>/<G>` for a group (a `/` no node name has). While another instance groups
the nodes differently, a bind takes its node's lock under every grouping in use (see
`lock_keys` and `members`): any two instances then share at least one lock per node.

**Values.** Every value this instance writes is unique: its time carries nanoseconds, the last
three digits random. So "is this lock ours?" is exact equality with a value we wrote, which
also recognises an acquire whose patch landed but whose answer was lost.

* ascheduler's own key (`ascheduler.io/node-lock`): `<time>,<instance>`. The holder is this
  instance's *hold*, not a pod: one hold serves many pods' binds, and the lock stays valid for
  every one of them whatever happens to any single pod.
* `hami.io/mutex.lock` (HAMi interoperability): HAMi's `<time>,<namespace>,<pod>`, naming the
  one pod the hold binds. HAMi treats a lock whose pod is gone as dangling, so a hold under
  this key serves exactly one pod.

**Taking over a lock that is not ours.**

* *stale*: this instance has seen that exact value on the node for `timeout`. Staleness is
  counted on this instance's monotonic clock from when it first saw the value (through the
  node informer or its own reads), never from the time written inside it: no assumption is
  made about clocks across instances, only that each one's clock runs at about real speed. A
  restarted instance therefore waits one full timeout before taking over a lock it finds.
* *dangling*: a value naming a pod (HAMi's format) whose pod is gone, deleting or finished.
* anything else is respected until stale: a live holder, HAMi's legacy value (a bare time),
  and a value that does not parse (reported once).

**Holds are bounded in time.** A hold starts writes only within `HOLD_BUDGET` of the timeout
after it took the lock, and its writes are cut off at `HOLD_CUTOFF`; before each batch of binds
after its first it reads the node back and checks the lock still holds its value. Since any
other instance counts staleness from a moment after our lock was written, a hold has stopped
writing before anyone can take it over. The assumption: a write the API server accepted is
applied within the remaining quarter of the timeout (75 s by default).

**Release** is a write guarded by the version our last write left, so it never clears someone
else's lock. When it fails (the API server is down, say), the value is kept as a leftover:
`run()` retries it in the background until it lands or the lock is no longer ours, and this
instance's next hold on the node takes its own leftover over at once (HAMi's "node locked for
five minutes" bug, fixed at the root). `run()` also clears locks that have gone stale by the
rule above, so a lock left by a dead instance on a node nobody binds to any more goes away once
the timeout passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import hashlib
import os
import random
import re
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple, TypeVar

import structlog

from ascheduler import metrics
from ascheduler.binding.members import DEFAULT_MEMBER_SECONDS
from ascheduler.durations import parse_seconds
from ascheduler.kube import KubeClient, KubeError
from ascheduler.kube.client import MERGE_PATCH
from ascheduler.model import PodInfo
from ascheduler.waits import wait_event

log = structlog.get_logger(__name__)
T = TypeVar("T")

DEFAULT_KEY: Final = "ascheduler.io/node-lock"
#: What a node's lock is written on: a Lease of its own (small, watched by nobody else), or
#: the Node itself (HAMi's place for it).
LockObject = Literal["lease", "node"]
LOCK_OBJECTS: Final[tuple[LockObject, ...]] = ("lease", "node")
#: With locks on Leases, what a bind does while no other instance shares the nodes.
WhenAlone = Literal["skip", "lock"]
WHEN_ALONE: Final[tuple[WhenAlone, ...]] = ("skip", "lock")


#: A node's lock Lease: this prefix and the node's name (a digest of it when too long).
NODE_LEASE_PREFIX: Final = "ascheduler-node-"
#: A group's lock Lease (lease groups): this prefix, the number of groups, '-' and the index.
#: No node's Lease can have such a name: theirs go on with '-' where these have 's'.
GROUP_LEASE_PREFIX: Final = "ascheduler-nodes-"
#: The most lease groups a setting may ask for.
MAX_LEASE_GROUPS: Final = 1_000_000
#: The configuration's lease groups when the locks are on Leases and it names none: measured
#: several times as fast as a Lease per node between busy instances on 500 and 5,000 nodes
#: (benchmarks/README.md). Node locks (HAMi's, or `object: node`) have no groups.
DEFAULT_LEASE_GROUPS: Final = 32
#: The longest object name (a DNS subdomain).
MAX_NAME: Final = 253
HAMI_KEY: Final = "hami.io/mutex.lock"
DEFAULT_TIMEOUT: Final = 300.0
EXPIRE_ENV: Final = "ASCHEDULER_NODELOCK_EXPIRE"
#: Attempts per acquire or release: transient failures, and conflicts that are not a holder.
ATTEMPTS: Final = 6
RETRY_DELAY: Final = 0.1
#: Fractions of the timeout: a hold starts writes until the first, and stops them at the second.
HOLD_BUDGET: Final = 0.5
HOLD_CUTOFF: Final = 0.75
#: How long our own release's answer is trusted over the informer's copy of the node.
RELEASE_HINT_SECONDS: Final = 5.0
#: Background retries of a failed release: first delay, and the cap of its doubling.
LEFTOVER_RETRY: Final = (0.5, 10.0)
#: The background loop's shortest pause between rounds.
MIN_PAUSE: Final = 0.05
#: How long a hold of ours stays taken after its binds, for the next binds to that node
#: (no lock, unlock or list for them), unless another instance asks for the lock.
DEFAULT_LINGER: Final = 10.0
#: A parked hold is reused only while this much of its write budget is left.
REUSE_MARGIN: Final = 5.0
#: The annotation another instance writes on a lock object whose holder it waits for.
WANTED_SUFFIX: Final = "-wanted"
#: The annotation a release leaves beside the lock: the pods recent holds bound on the node
#: (uids, newest last), so the next holder can tell whether its cache has seen them.
BOUND_SUFFIX: Final = "-bound"
#: How many uids that record keeps.
BOUND_KEPT: Final = 64
#: How long a stopping instance tries to clear its locks (`NodeLocks.release_all`).
RELEASE_ALL_SECONDS: Final = 5.0
#: After letting a lock go for an instance that asked, our holds on that node do not linger
#: for this long, so the other instance's next try finds the lock free between them.
YIELD_SECONDS: Final = 30.0
#: How long a bind that met another instance's lock, and asked for it, waits for the holder to
#: let it go before reading the lock again (`LockSettings.handover_wait`). The holder lets a
#: parked hold go as soon as its informer shows the request, a busy one after its binds.
HANDOVER_WAIT: Final = 1.0


def lock_object_of(key: str, on: LockObject | None) -> LockObject:
    """Where locks under `key` live: `on` if given, else the Node for HAMi's key and a Lease
    for any other."""
    if on is not None:
        return on
    return "node" if key == HAMI_KEY else "lease"


_TIME = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


async def _uninterruptible(task: asyncio.Future[T]) -> T:
    """`task`'s outcome, waiting for it to finish even if the caller is cancelled meanwhile
    (any number of times); such a cancellation is raised once it has finished."""
    cancelled = False
    while not task.done():
        try:
            with contextlib.suppress(Exception):  # the task's own failure: result() raises it
                await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return task.result()


def instance_identity() -> str:
    """This process: its host and a random suffix (no comma, which separates a value's parts)."""
    host = (os.environ.get("POD_NAME") or socket.gethostname() or "ascheduler").replace(",", "-")
    return f"{host}-{uuid.uuid4().hex[:8]}"


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


@dataclass(frozen=True)
class LockSettings:
    key: str = DEFAULT_KEY
    timeout: float = DEFAULT_TIMEOUT
    #: Names this instance in the values it writes under its own key.
    identity: str = field(default_factory=instance_identity)
    #: Where the lock is written; None: a Lease per node, but the Node under HAMi's key.
    on: LockObject | None = None
    #: Seconds a hold stays taken after its binds (0: released at once; HAMi's key: always).
    linger: float = DEFAULT_LINGER
    #: With locks on Leases: "skip" binds without the node's lock while no other instance
    #: shares the nodes, "lock" always takes it (see `members`).
    when_alone: WhenAlone = "skip"
    #: Seconds an instance's member Lease stands unrenewed before the others count it gone.
    member_duration: float = DEFAULT_MEMBER_SECONDS
    #: With locks on Leases: how many groups of nodes share a lock Lease each (0: a Lease per
    #: node). Every instance sharing the nodes should use the same number (see the module).
    lease_groups: int = 0
    #: Seconds a bind that meets another instance's lock (and has asked for it) waits for
    #: the hand-over before it looks again, while it has attempts left (0: fails at once).
    handover_wait: float = HANDOVER_WAIT

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"node lock timeout must be positive, got {self.timeout:g}s")
        if self.on is not None and self.on not in LOCK_OBJECTS:
            raise ValueError(
                f"node lock object must be one of {', '.join(LOCK_OBJECTS)}, got {self.on!r}"
            )
        if self.when_alone not in WHEN_ALONE:
            raise ValueError(
                f"node lock when alone must be one of {', '.join(WHEN_ALONE)}, "
                f"got {self.when_alone!r}"
            )
        if not self.member_duration > 0:
            raise ValueError(
                f"member lease duration must be positive, got {self.member_duration:g}s"
            )
        if self.linger < 0:
            raise ValueError(f"node lock linger must not be negative, got {self.linger:g}s")
        if self.handover_wait < 0:
            raise ValueError(
                f"node lock hand-over wait must not be negative, got {self.handover_wait:g}s"
            )
        if not 0 <= self.lease_groups <= MAX_LEASE_GROUPS:
            raise ValueError(
                f"node lock lease groups must be 0 to {MAX_LEASE_GROUPS}, got {self.lease_groups}"
            )
        if self.lease_groups and self.lock_object != "lease":
            raise ValueError("node lock lease groups need the locks on Leases")
        if self.hami and self.on == "lease":
            raise ValueError(
                f"the {HAMI_KEY} lock is HAMi's Node annotation: it cannot live on a Lease"
            )

    @property
    def lingers(self) -> bool:
        return self.linger > 0 and not self.hami

    @property
    def wanted_key(self) -> str:
        return self.key + WANTED_SUFFIX

    @property
    def bound_key(self) -> str:
        return self.key + BOUND_SUFFIX

    @property
    def lock_object(self) -> LockObject:
        return lock_object_of(self.key, self.on)

    @property
    def hami(self) -> bool:
        """HAMi's key: values name a pod, and a hold serves that one pod."""
        return self.key == HAMI_KEY

    @classmethod
    def from_env(
        cls,
        *,
        key: str = DEFAULT_KEY,
        timeout: float | None = None,
        on: LockObject | None = None,
    ) -> LockSettings:
        """`timeout` if given (the CLI flag), else `$ASCHEDULER_NODELOCK_EXPIRE` (seconds, or a
        Go-style duration such as `90s` or `5m`), else 5 minutes. ValueError for a value that
        does not parse or is not positive."""
        if timeout is None:
            raw = os.environ.get(EXPIRE_ENV, "")
            timeout = parse_seconds(raw) if raw else DEFAULT_TIMEOUT
        return cls(key=key, timeout=timeout, on=on)


def parse_time(text: str) -> dt.datetime | None:
    """RFC 3339 with an optional fraction of up to 9 digits (Go's reading of it), else None."""
    m = _TIME.match(text)
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    micros = int((m.group(7) or "0").ljust(9, "0")[:6])
    zone = m.group(8)
    if zone == "Z":
        tz = dt.UTC
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = dt.timezone(sign * dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    try:
        return dt.datetime(year, month, day, hour, minute, second, micros, tzinfo=tz)
    except ValueError:
        return None


def format_time(when: dt.datetime, nonce: int) -> str:
    """RFC 3339 in UTC with nanoseconds whose last three digits are `nonce` (0..999)."""
    when = when.astimezone(dt.UTC)
    return f"{when:%Y-%m-%dT%H:%M:%S}.{when.microsecond:06d}{nonce % 1000:03d}Z"


@dataclass(frozen=True)
class Holder:
    """A lock value as read off a node: a time, and a pod (HAMi's format) or an instance
    (ascheduler's own); neither for HAMi's legacy bare time."""

    time: dt.datetime
    namespace: str = ""
    pod: str = ""
    instance: str = ""

    @classmethod
    def parse(cls, value: str) -> Holder | None:
        parts = value.split(",")
        when = parse_time(parts[0])
        if when is None:
            return None
        if len(parts) == 1:
            return cls(when)
        if len(parts) == 2 and parts[1]:
            return cls(when, instance=parts[1])
        if len(parts) == 3 and parts[1] and parts[2]:
            return cls(when, parts[1], parts[2])
        return None

    def describe(self) -> str:
        if self.pod:
            return f"pod {self.namespace}/{self.pod}"
        return f"instance {self.instance}" if self.instance else "a holder (legacy value)"


class LockContended(Exception):
    """Another holder has the node's lock (or won the race for it): a reason to wait and try
    again, never an error of the pod's."""

    def __init__(self, node: str, holder: str, *, asked: bool = False, value: str = "") -> None:
        self.node = node
        self.holder = holder
        #: Whether the holder (an instance) was asked to hand the lock over.
        self.asked = asked
        #: The lock value met ("" when none was: a race lost to concurrent writers).
        self.value = value
        super().__init__(f"node {node} is locked by {holder}")


def lock_wait_message(node: str, exc: LockContended) -> str:
    """What a pod that met another holder's lock on its way to `node` is told (its
    PodScheduled condition, reason `Unschedulable`): who holds it, and that it waits."""
    where = f"node {node}" if exc.node == node else f"node {node} (lock {exc.node})"
    return (
        f"{where} is locked by {exc.holder}: waiting for the lock to be released, "
        "the pod will be retried"
    )


@dataclass
class Hold:
    """A lock this instance holds on one node."""

    node: str
    value: str
    #: The node's resourceVersion after our last write of it.
    version: str
    #: The node as our lock patch (or read) returned it: authoritative allocatable.
    node_obj: Mapping[str, Any]
    #: Times (on `clock`) until which writes may start, and after which they are cut off.
    write_until: float
    cutoff_at: float
    clock: Callable[[], float]
    #: Whether the lock object was exactly as our own last release left it: nobody took
    #: the lock in between (every holder writes it), so no other instance bound under it.
    #: Also true for a parked hold taken up again (held all along).
    undisturbed: bool = False
    #: Set once the lock was found not to hold our value: never parked, never reused.
    lost: bool = False
    #: Whether the lock object's watch has shown our value since we took it: from then on
    #: the watch, which delivers every later change in order, tells whether it still holds
    #: it (`NodeLocks.still_ours` reads the object only until then).
    confirmed: bool = False
    #: The record of pods bound under the lock found beside it when it was free (None: not
    #: known, or the lock was taken over from another holder); and the one to leave at release.
    bound_before: tuple[str, ...] | None = None
    bound_after: tuple[str, ...] | None = None
    #: Counts this instance's holds on the lock object that were *not* undisturbed (another
    #: holder may have bound under it since): what this instance knows of the nodes it
    #: stands for is as good as when it was recorded while the lineage stays the same.
    lineage: int = 0

    def reusable(self) -> bool:
        """Whether a parked hold may serve more binds: a margin of its write budget left."""
        return not self.lost and self.clock() < self.write_until - REUSE_MARGIN

    def writable(self) -> bool:
        return self.clock() < self.write_until

    def remaining(self) -> float:
        """Seconds until the cutoff."""
        return max(0.0, self.cutoff_at - self.clock())


@dataclass
class Holds:
    """The locks binds to one node take together (`NodeLocks.hold_all`): one, unless
    instances group the nodes differently. Writes go on while every one of them allows."""

    holds: list[Hold]

    def writable(self) -> bool:
        return all(h.writable() for h in self.holds)

    def remaining(self) -> float:
        """Seconds until the first cutoff."""
        return min((h.remaining() for h in self.holds), default=0.0)

    @property
    def undisturbed(self) -> bool:
        return all(h.undisturbed for h in self.holds)

    @property
    def lineage(self) -> tuple[tuple[str, int], ...]:
        return tuple((h.node, h.lineage) for h in self.holds)

    @property
    def bound_before(self) -> tuple[str, ...] | None:
        """The pods recorded beside every lock as bound under it (None: one lock has none)."""
        records = [h.bound_before for h in self.holds]
        if any(r is None for r in records):
            return None
        return tuple(uid for r in records if r is not None for uid in r)

    @property
    def node_obj(self) -> Mapping[str, Any]:
        """The first lock object as our lock write returned it (the Node, on Nodes)."""
        return self.holds[0].node_obj

    def record(self, added: Iterable[str]) -> None:
        """Leave beside each lock, at its release, the pods bound under it: what it had,
        plus `added`."""
        uids = list(added)
        for h in self.holds:
            before = h.bound_after if h.bound_after is not None else h.bound_before
            h.bound_after = (*(before or ()), *uids)[-BOUND_KEPT:]


@dataclass
class _Shared:
    """A group's hold while binds to its nodes use it (see `NodeLocks._join`)."""

    hold: Hold
    users: int = 1
    #: Whether every user so far finished without an error (else it is released, not parked).
    ok: bool = True
    #: Being parked or released: newcomers wait for `done` and take the lock afresh.
    closing: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class _Open:
    """A lock held by `NodeLocks._open`: its own asyncio lock held with it, or the group's
    hold joined."""

    key: str
    hold: Hold
    local: asyncio.Lock | None = None
    shared: _Shared | None = None


@dataclass
class LockStats:
    acquired: int = 0
    contended: int = 0
    stale_recovered: int = 0
    dangling_recovered: int = 0
    #: Releases that failed in the hold and landed later, in the background.
    released_late: int = 0
    #: Stale locks of others cleared by the background sweep.
    stale_cleared: int = 0


class Known(NamedTuple):
    """A lock object as this instance last saw it, before it writes the lock on it."""

    version: str
    annotations: Mapping[str, str]
    #: The whole object at `version`, when known (a Lease as its informer keeps it): the
    #: write may then replace the object instead of patching it.
    obj: Mapping[str, Any] | None = None


def replaced(obj: Mapping[str, Any], version: str, changes: Mapping[str, str | None]) -> Any:
    """`obj` (as it is at `version`) with `changes` made to its annotations (None removes
    one), guarded by `version`: the body of a write that replaces it."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    annotations = dict(meta.get("annotations") or {})
    for key, value in changes.items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    meta["annotations"] = annotations
    meta["resourceVersion"] = version
    return {**obj, "metadata": meta}


def _version(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion", ""))


class NodeLocks:
    def __init__(
        self,
        kube: KubeClient,
        settings: LockSettings | None = None,
        *,
        now: Callable[[], dt.datetime] | None = None,
        clock: Callable[[], float] | None = None,
        path: Callable[[str], str] | None = None,
        create: Callable[[str], Awaitable[None]] | None = None,
        replace: bool = False,
    ) -> None:
        """`now` is the wall clock written into values (informational); `clock` the monotonic
        one staleness and hold budgets are counted on (default: the event loop's).

        The lock lives on a Node by default. `path` names another kind of object by name (a
        Lease, for locks that no node stands for), and `create` makes one that is missing the
        first time a lock is taken on it.

        With `replace`, a lock write whose object this instance knows whole at the version
        it is guarded by replaces it (PUT), which costs the API server less than a merge
        patch (it has no patch to apply); it is as guarded as the patch, by the same
        resourceVersion. Other writes patch. Not for Nodes, which others write all the
        time."""
        self.kube = kube
        self._path = path or (lambda name: f"/api/v1/nodes/{name}")
        self._create = create
        self._replace = replace
        self.settings = settings or LockSettings()
        self.now = now or (lambda: dt.datetime.now(dt.UTC))
        self._clock = clock or (lambda: asyncio.get_running_loop().time())
        self.stats = LockStats()
        self._rng = random.Random()
        self._local: dict[str, asyncio.Lock] = {}
        self._held: dict[str, Hold] = {}
        #: node -> a value of ours whose release failed, and when to try it again (delay)
        self._leftover: dict[str, str] = {}
        self._retry_at: dict[str, tuple[float, float]] = {}
        #: node -> (a lock value on it, loop time this instance first saw that value)
        self._seen: dict[str, tuple[str, float]] = {}
        #: node -> the lock value the watch showed last (never our own reads): the watch can
        #: show a hold's value before the write's answer is read, and the hold is then
        #: confirmed as it is taken
        self._watched: dict[str, str] = {}
        #: Binds waiting for another instance to hand a lock over: (the value they met, set
        #: once the lock object shows another).
        self._handovers: dict[str, list[tuple[str, asyncio.Event]]] = {}
        #: node -> when our last release left it, and as what
        self._released: dict[str, tuple[float, Known]] = {}
        #: node -> the resourceVersion our last release left (kept however old)
        self._release_version: dict[str, str] = {}
        self._reported: set[str] = set()
        self._wake = asyncio.Event()
        #: When `run()` next looks at its table unwoken (inf: not running)
        self._round_at = float("inf")
        #: node -> a hold of ours kept after its binds, and since when it is idle
        self._parked: dict[str, tuple[Hold, float]] = {}
        #: nodes whose lock object says another instance waits for our lock
        self._wanted: set[str] = set()
        #: node -> until when our holds there do not linger (another instance asked)
        self._yield_until: dict[str, float] = {}
        #: lock key -> its lineage (see `Hold.lineage`)
        self._lineage: dict[str, int] = {}
        #: group key -> the hold binds to the group's nodes share now
        self._sharing: dict[str, _Shared] = {}
        #: node -> the asyncio lock of its binds while its locks are groups'
        self._node_local: dict[str, asyncio.Lock] = {}
        #: lock key -> pods that met another holder's value there (uid -> that value)
        self._waiters: dict[str, dict[str, str]] = {}
        #: Told which pods' lock was let go (`wait_for`), so they are retried at once rather
        #: than at the end of their backoff; None: nobody listens (no pod is remembered).
        self.on_free: Callable[[list[str]], None] | None = None

    # -- what this instance sees ------------------------------------------------------------

    def observe(self, node: str, annotations: Mapping[str, str], *, watched: bool = False) -> None:
        """A node as the informer (`watched`) or one of our reads shows it: starts the
        staleness clock of a lock value the first time this instance sees it. The watch,
        whose changes come in order, also confirms a hold of ours (it shows our value) and,
        once it has, finds it lost as soon as it shows another."""
        value = annotations.get(self.settings.key, "")
        if watched:
            if value:
                self._watched[node] = value
            else:
                self._watched.pop(node, None)
        if watched and (hold := self._held.get(node)) is not None and not hold.lost:
            if value == hold.value:
                hold.confirmed = True
            elif hold.confirmed:
                hold.lost = True
                log.error("node_lock_lost", node=node, ours=hold.value, found=value[:200])
        for awaited, changed in self._handovers.get(node, ()):
            if value != awaited:
                changed.set()
        if not value:
            self._seen.pop(node, None)
        elif (seen := self._seen.get(node)) is None or seen[0] != value:
            self._seen[node] = (value, self._clock())
        if node in self._waiters:
            self._free_waiters(node, value)
        wanted = annotations.get(self.settings.wanted_key, "")
        if wanted and wanted != self.settings.identity:
            self._wanted.add(node)
            if node in self._parked:
                self._wake.set()  # let it go now
        else:
            self._wanted.discard(node)

    def wait_for(self, node: str, value: str, uids: Iterable[str]) -> None:
        """Pods that met another holder's lock `value` on `node` and wait for it: `on_free`
        is told of them once the lock object shows another value (at once if it does by
        now). Nothing is remembered without a listener, or without a value to wait out."""
        if self.on_free is None or not value:
            return
        waiting = self._waiters.setdefault(node, {})
        for uid in uids:
            waiting[uid] = value
        seen = self._seen.get(node)
        self._free_waiters(node, seen[0] if seen is not None else "")

    def _free_waiters(self, node: str, value: str) -> None:
        waiting = self._waiters.get(node, {})
        freed = [uid for uid, met in waiting.items() if met != value]
        if not freed:
            return
        for uid in freed:
            del waiting[uid]
        if not waiting:
            del self._waiters[node]
        if self.on_free is not None:
            self.on_free(freed)

    def foreign(self, node: str) -> bool:
        """Whether `node`'s lock object, as last seen, holds a lock that is not ours."""
        seen = self._seen.get(node)
        return seen is not None and not self._ours(node, seen[0])

    def _stale(self, node: str, value: str) -> bool:
        seen = self._seen.get(node)
        return (
            seen is not None
            and seen[0] == value
            and self._clock() - seen[1] >= self.settings.timeout
        )

    def _ours(self, node: str, value: str) -> bool:
        hold = self._held.get(node)
        return (hold is not None and hold.value == value) or self._leftover.get(node) == value

    # -- the one way in --------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def hold(
        self, node: str, pod: PodInfo, *, known: Known | None = None
    ) -> AsyncIterator[Hold]:
        """Hold both levels on `node` (`pod` is the one it binds under HAMi's key; a group's
        lock is shared, see `_join`); always releases, also on error and cancellation."""
        taken = await self._open(node, pod, known)
        ok = False
        try:
            yield taken.hold
            ok = True
        finally:
            await self._shut(taken, ok=ok)

    async def _open(self, key: str, pod: PodInfo, known: Known | None) -> _Open:
        """`key`'s lock held (a group's shared, see `_join`), with what `_shut` lets go."""
        if is_group_key(key):
            shared = await self._join(key, pod, known)
            return _Open(key, shared.hold, shared=shared)
        lock = self._local.setdefault(key, asyncio.Lock())
        started = self._clock()
        await lock.acquire()
        try:
            return _Open(key, await self._take(key, pod, known, started), local=lock)
        except BaseException:
            lock.release()
            raise

    async def _shut(self, taken: _Open, *, ok: bool) -> None:
        """What `_open` took, parked or released (`ok`: its binds all went well)."""
        if taken.shared is not None:
            await self._unjoin(taken.key, taken.shared, ok=ok)
            return
        assert taken.local is not None
        try:
            await self._give_back(taken.key, taken.hold, ok=ok)
        finally:
            taken.local.release()

    async def _take(self, node: str, pod: PodInfo, known: Known | None, started: float) -> Hold:
        """Our parked hold on `node` taken up, else the lock acquired (under `node`'s asyncio
        lock, which the caller holds)."""
        hold = None
        if node in self._parked:  # else nothing to take up or let go: no task for it
            hold = await _uninterruptible(asyncio.ensure_future(self._unpark(node)))
        if hold is None:
            # Both writes run to completion even when the bind is cancelled meanwhile (once
            # or again), and the asyncio lock is only let go once the annotation is (or is a
            # leftover): a lock patch that landed is always released, and our next hold
            # knows our own value.
            taking = asyncio.ensure_future(self.acquire(node, pod, known=known))
            try:
                hold = await _uninterruptible(taking)
            except asyncio.CancelledError:
                if taking.done() and not taking.cancelled() and taking.exception() is None:
                    await _uninterruptible(asyncio.ensure_future(self.release(taking.result())))
                raise
        metrics.NODE_LOCK_WAIT.observe(self._clock() - started)
        if not hold.undisturbed:
            self._lineage[node] = self._lineage.get(node, 0) + 1
        hold.lineage = self._lineage.get(node, 0)
        return hold

    async def _give_back(self, node: str, hold: Hold, *, ok: bool) -> None:
        """After a hold's binds (under `node`'s asyncio lock): parked for the next ones if it
        may linger and nothing failed, else released."""
        if ok and self._parkable(node, hold):
            self._parked[node] = (hold, self._clock())
            if self._parked_due(node) < self._round_at:
                self._wake.set()  # due before the round `run()` waits for
        else:
            await _uninterruptible(asyncio.ensure_future(self.release(hold)))

    async def _join(self, key: str, pod: PodInfo, known: Known | None) -> _Shared:
        """The hold of a lock that stands for several nodes (a lease group): while it serves
        binds to one node, binds to another node of the group join it instead of waiting
        for it (each node's binds are still serialised by the caller). A hold is joined
        only while it may serve more binds and no other instance has asked for it; it is
        parked or released once its last user is done (`_unjoin`)."""
        started = self._clock()
        while True:
            shared = self._sharing.get(key)
            if shared is None:
                async with self._local.setdefault(key, asyncio.Lock()):
                    if key in self._sharing:
                        continue  # taken meanwhile by another node's binds: join it
                    hold = await self._take(key, pod, known, started)
                    shared = self._sharing[key] = _Shared(hold)
                return shared
            if not shared.closing and key not in self._wanted and shared.hold.reusable():
                shared.users += 1
                return shared
            await shared.done.wait()

    async def _unjoin(self, key: str, shared: _Shared, *, ok: bool) -> None:
        """`_join`'s way out: the last user parks or releases the hold."""
        shared.users -= 1
        shared.ok = shared.ok and ok
        if not shared.users:
            shared.closing = True
            # Parked or released even if the last user is cancelled meanwhile.
            await _uninterruptible(asyncio.ensure_future(self._close(key, shared)))

    async def _close(self, key: str, shared: _Shared) -> None:
        try:
            async with self._local.setdefault(key, asyncio.Lock()):
                await self._give_back(key, shared.hold, ok=shared.ok)
        finally:
            del self._sharing[key]
            shared.done.set()

    @contextlib.asynccontextmanager
    async def hold_all(
        self,
        keys: Iterable[str],
        pod: PodInfo,
        *,
        known: Callable[[str], Known | None] = lambda _key: None,
        node: str | None = None,
    ) -> AsyncIterator[Holds]:
        """`hold` each of `keys` (in sorted order, as every instance takes them; a group's
        lock shared, see `_join`); `known` gives each lock object as last seen. All are
        released on every path, the last taken first. Holds for `node` whose locks are all
        groups' are serialised by an asyncio lock of the node's own, as its own lock would."""
        ordered = sorted(set(keys))
        own = None
        if node is not None and node not in ordered:
            own = self._node_local.setdefault(node, asyncio.Lock())
            await own.acquire()
        opened: list[_Open] = []
        ok = False
        try:
            for key in ordered:
                opened.append(await self._open(key, pod, known(key)))
            yield Holds([taken.hold for taken in opened])
            ok = True
        finally:
            try:
                await self._shut_all(opened, ok=ok)
            finally:
                if own is not None:
                    own.release()

    async def _shut_all(self, opened: list[_Open], *, ok: bool) -> None:
        """`_shut` each of `opened`, the last first, every one even if another fails (then
        the ones after it count as failed too); the last failure is raised."""
        failure: BaseException | None = None
        for taken in reversed(opened):
            try:
                await self._shut(taken, ok=ok and failure is None)
            except BaseException as exc:
                failure = exc
        if failure is not None:
            raise failure

    async def still_all_ours(self, holds: Holds) -> bool:
        """`still_ours` for each of `holds`."""
        for hold in holds.holds:
            if not await self.still_ours(hold):
                return False
        return True

    def _parkable(self, node: str, hold: Hold) -> bool:
        if node in self._wanted:
            self._yield_until[node] = self._clock() + YIELD_SECONDS
            return False
        return (
            self.settings.lingers
            and self._clock() >= self._yield_until.get(node, 0.0)
            and self._held.get(node) is hold
            and hold.reusable()
        )

    async def _unpark(self, node: str) -> Hold | None:
        """Our parked hold on `node`, taken up again if it may still serve; one that may not
        is released here. None: take the lock afresh."""
        parked = self._parked.pop(node, None)
        if parked is None:
            return None
        hold = parked[0]
        if hold.reusable() and node not in self._wanted and self._held.get(node) is hold:
            hold.undisturbed = True
            return hold
        await self.release(hold)
        return None

    # -- the annotation --------------------------------------------------------------------

    def _new_value(self, pod: PodInfo) -> str:
        stamp = format_time(self.now(), self._rng.randrange(1000))
        if self.settings.hami:
            return f"{stamp},{pod.namespace},{pod.name}"
        return f"{stamp},{self.settings.identity}"

    async def _write(
        self,
        node: str,
        version: str,
        value: str | None,
        *,
        record: tuple[str, ...] | None = None,
        obj: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Set (or, with None, remove) the lock if the node is still at `version`. Either
        clears a waiting instance's request: it was meant for the holder before. `obj`: the
        object as it is at `version`, if known (replaced rather than patched, see `replace`)."""
        annotations: dict[str, str | None] = {self.settings.key: value}
        if not self.settings.hami:
            annotations[self.settings.wanted_key] = None
        if record is not None:
            annotations[self.settings.bound_key] = ",".join(record[-BOUND_KEPT:])
        if self._replace and obj is not None and _version(obj) == version:
            return await self.kube.put(self._path(node), replaced(obj, version, annotations))
        patch = {"metadata": {"resourceVersion": version, "annotations": annotations}}
        return await self.kube.patch(self._path(node), patch, content_type=MERGE_PATCH)

    async def _read(self, node: str) -> tuple[str, str, dict[str, Any]]:
        """(resourceVersion, lock value or "", node) as the API server has it now."""
        try:
            obj = await self.kube.get(self._path(node))
        except KubeError as exc:
            if not exc.not_found or self._create is None:
                raise
            await self._create(node)
            obj = await self.kube.get(self._path(node))
        meta = obj.get("metadata") or {}
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        self.observe(node, annotations)
        return str(meta.get("resourceVersion", "")), annotations.get(self.settings.key, ""), obj

    async def _pause(self, attempt: int) -> None:
        await asyncio.sleep(RETRY_DELAY * 2**attempt * (1 + self._rng.uniform(-0.1, 0.1)))

    async def acquire(self, node: str, pod: PodInfo, *, known: Known | None = None) -> Hold:
        """Take the annotation lock. `known` is the node's (resourceVersion, annotations) as
        this instance's cache last saw them: when they show no lock, the patch goes out at once
        (one call instead of two); if the cache was stale the 409 only sends us to read.

        Conflicts that are not another holder (a heartbeat or label change between our read and
        our patch) are read again and retried, as are transient failures; our own value found
        on the node (an earlier patch of this acquire whose answer was lost, or a leftover of
        ours) is ours. Raises `LockContended`, or `KubeError` once attempts run out; if a patch
        had been sent by then, it may have landed, so its value becomes a leftover that `run()`
        clears (never a lock nobody owns)."""
        started = self._clock()
        value = self._new_value(pod)
        sent: list[bool] = []
        try:
            return await self._acquire(node, value, started, known, sent)
        except LockContended as exc:
            if sent:
                self._leave(node, value)
            self.wait_for(node, exc.value, [pod.uid])
            raise
        except BaseException:
            if sent:
                self._leave(node, value)
            raise

    async def _acquire(
        self, node: str, value: str, started: float, known: Known | None, sent: list[bool]
    ) -> Hold:
        hint = known
        released = self._released.pop(node, None)
        if released is not None and started - released[0] < RELEASE_HINT_SECONDS:
            # Just after our own release the informer has usually not seen it (nor our lock):
            # that write's answer is the node's newest version we know of.
            hint = released[1]
        # A hint without a version would make the patch unconditional: never use one.
        fast = (
            hint.version
            if hint is not None and hint.version and not hint.annotations.get(self.settings.key)
            else ""
        )
        obj: Mapping[str, Any] | None = None
        for attempt in range(ATTEMPTS):
            try:
                if fast:
                    version, fast = fast, ""
                    assert hint is not None
                    record: tuple[str, ...] | None = self._record(hint.annotations)
                    obj = hint.obj
                else:
                    version, current, obj = await self._read(node)
                    record = None
                    if current and current != value and not self._ours(node, current):
                        try:
                            await self._check_takeover(node, current)
                        except LockContended as exc:
                            if not (exc.asked and self.settings.handover_wait > 0):
                                raise
                            if attempt == ATTEMPTS - 1:
                                raise
                            await self._await_handover(node, current)
                            continue
                    elif not current:
                        meta = obj.get("metadata") or {}
                        record = self._record(meta.get("annotations") or {})
                    if current == value:
                        return self._took(node, value, started, obj)  # landed; answer did not
                try:
                    sent.append(True)
                    taken = await self._write(node, version, value, obj=obj)
                    undisturbed = version == self._release_version.get(node)
                    return self._took(
                        node, value, started, taken, undisturbed=undisturbed, record=record
                    )
                except KubeError as exc:
                    # A conflict, or an object not made yet (a stale hint): read (and make).
                    if not exc.conflict and not (exc.not_found and self._create is not None):
                        raise
                    # The node changed since we read it (or the cache was behind): read again.
            except KubeError as exc:
                if not exc.transient or attempt == ATTEMPTS - 1:
                    raise
                await self._pause(attempt)
        self.stats.contended += 1
        metrics.NODE_LOCK_CONTENDED.inc()
        raise LockContended(node, "a concurrent writer (the node kept changing)")

    def _record(self, annotations: Mapping[str, Any]) -> tuple[str, ...] | None:
        """The bound-pods record in a lock object's annotations (empty when there is none)."""
        if self.settings.hami:
            return None
        text = str(annotations.get(self.settings.bound_key) or "")
        return tuple(uid for uid in text.split(",") if uid)

    def _took(
        self,
        node: str,
        value: str,
        started: float,
        obj: Mapping[str, Any],
        *,
        undisturbed: bool = False,
        record: tuple[str, ...] | None = None,
    ) -> Hold:
        timeout = self.settings.timeout
        hold = Hold(
            node=node,
            value=value,
            version=str((obj.get("metadata") or {}).get("resourceVersion", "")),
            node_obj=obj,
            write_until=started + timeout * HOLD_BUDGET,
            cutoff_at=started + timeout * HOLD_CUTOFF,
            clock=self._clock,
            undisturbed=undisturbed,
            bound_before=record,
            confirmed=self._watched.get(node) == value,
        )
        self._held[node] = hold
        self._leftover.pop(node, None)  # our new value replaced it
        self._retry_at.pop(node, None)
        self.stats.acquired += 1
        return hold

    async def _check_takeover(self, node: str, value: str) -> None:
        """Return if the lock holding `value` (not ours) may be taken over; else raise
        LockContended."""
        holder = Holder.parse(value)
        if holder is None and value not in self._reported:
            if len(self._reported) > 1024:
                self._reported.clear()
            self._reported.add(value)
            log.warning(
                "node_lock_unparseable", node=node, value=value[:200], respected_until="stale"
            )
        if self._stale(node, value):
            log.warning(
                "node_lock_stale", node=node, holder=value[:200], timeout=self.settings.timeout
            )
            self.stats.stale_recovered += 1
            metrics.NODE_LOCK_RECOVERED.labels("stale").inc()
            return
        if holder is not None and holder.pod and not await self._owner_alive(holder):
            log.warning("node_lock_dangling", node=node, holder=value[:200])
            self.stats.dangling_recovered += 1
            metrics.NODE_LOCK_RECOVERED.labels("dangling").inc()
            return
        self.stats.contended += 1
        metrics.NODE_LOCK_CONTENDED.inc()
        asked = holder is not None and bool(holder.instance) and not self.settings.hami
        if asked:
            await self._ask(node)
        described = holder.describe() if holder else f"value {value[:100]!r}"
        raise LockContended(node, described, asked=asked, value=value)

    async def _await_handover(self, node: str, value: str) -> None:
        """Until the lock object no longer shows `value` (as the informer, or a read of ours,
        sees it), or `handover_wait` seconds."""
        seen = self._seen.get(node)
        if seen is not None and seen[0] != value:
            return  # changed already
        entry = (value, asyncio.Event())
        waiting = self._handovers.setdefault(node, [])
        waiting.append(entry)
        try:
            await wait_event(entry[1], self.settings.handover_wait)
        finally:
            waiting.remove(entry)
            if not waiting:
                del self._handovers[node]

    async def _ask(self, node: str) -> None:
        """Tell the instance holding `node`'s lock that we wait for it (it lets a parked hold
        go at once); best effort."""
        patch = {"metadata": {"annotations": {self.settings.wanted_key: self.settings.identity}}}
        try:
            await self.kube.patch(self._path(node), patch, content_type=MERGE_PATCH)
        except KubeError as exc:
            log.info("node_lock_ask_failed", node=node, error=str(exc))

    async def _owner_alive(self, holder: Holder) -> bool:
        try:
            pod = await self.kube.get(f"/api/v1/namespaces/{holder.namespace}/pods/{holder.pod}")
        except KubeError as exc:
            if exc.not_found:
                return False
            raise
        phase = (pod.get("status") or {}).get("phase")
        deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
        return phase not in ("Succeeded", "Failed") and not deleting

    async def still_ours(self, hold: Hold) -> bool:
        """Whether `hold` may go on writing: within its time budget, and the node still holds
        its value: as the watch shows it once it has confirmed the hold (see `Hold`), else
        read from the API server."""
        if not hold.writable() or hold.lost:
            return False
        if hold.confirmed:
            return True
        _, current, _ = await self._read(hold.node)
        if current != hold.value:
            hold.lost = True
            log.error("node_lock_lost", node=hold.node, ours=hold.value, found=current[:200])
            return False
        return True

    async def release(self, hold: Hold) -> None:
        """Clear `hold`'s lock if the node still holds its value. Never raises (but for
        cancellation): a release that fails is left to `run()`, and our next hold on the node
        takes it over."""
        node = hold.node
        if self._held.get(node) is hold:
            del self._held[node]
        parked = self._parked.get(node)
        if parked is not None and parked[0] is hold:
            del self._parked[node]
        try:
            await self._clear(
                node, hold.value, version=hold.version, record=hold.bound_after, obj=hold.node_obj
            )
        except (KubeError, LockContended) as exc:
            log.warning(
                "node_lock_release_failed", node=node, error=str(exc), retry="in the background"
            )
            self._leave(node, hold.value)
        except Exception:
            log.exception("node_lock_release_failed", node=node, retry="in the background")
            self._leave(node, hold.value)

    def _leave(self, node: str, value: str) -> None:
        """`value` of ours may be on `node`: clear it in the background (`run()`)."""
        self._leftover[node] = value
        self._retry_at[node] = (self._clock() + LEFTOVER_RETRY[0], LEFTOVER_RETRY[0])
        self._wake.set()

    async def _clear(
        self,
        node: str,
        value: str,
        *,
        version: str = "",
        record: tuple[str, ...] | None = None,
        obj: Mapping[str, Any] | None = None,
    ) -> bool:
        """Remove the lock if it still holds `value`; True if this call removed it. `version`
        (the node's version after our last write, `obj` the object as that write left it) lets
        the first attempt skip a read."""
        for attempt in range(ATTEMPTS):
            try:
                if version:
                    guess, version = version, ""
                    try:
                        self._remember_release(
                            node, await self._write(node, guess, None, record=record, obj=obj)
                        )
                        return True
                    except KubeError as exc:
                        if not exc.conflict and not exc.not_found:
                            raise
                try:
                    current_version, current, read = await self._read(node)
                except KubeError as exc:
                    if exc.not_found:
                        return False  # the node is gone, and its annotations with it
                    raise
                if current != value:
                    return False  # released after all, or no longer ours
                try:
                    self._remember_release(
                        node,
                        await self._write(node, current_version, None, record=record, obj=read),
                    )
                    return True
                except KubeError as exc:
                    if not exc.conflict:
                        raise
            except KubeError as exc:
                if not exc.transient or attempt == ATTEMPTS - 1:
                    raise
                await self._pause(attempt)
        raise LockContended(node, "a concurrent writer (release kept conflicting)")

    def _remember_release(self, node: str, updated: Mapping[str, Any]) -> None:
        meta = updated.get("metadata") or {}
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        version = str(meta.get("resourceVersion", ""))
        self._released[node] = (self._clock(), Known(version, annotations, updated))
        if version:
            self._release_version[node] = version
        self.observe(node, annotations)

    # -- in the background -------------------------------------------------------------------

    async def run(self) -> None:
        """Until cancelled: `tend()` whenever a failed release is due for a retry (backing off
        per node), when one is added, and every quarter timeout (1 s to 30 s)."""
        sweep = min(max(self.settings.timeout / 4, 1.0), 30.0)
        next_sweep = self._clock() + sweep
        while True:
            due = [self._retry_at[n][0] for n in self._leftover if n in self._retry_at]
            due += [self._parked_due(n) for n in self._parked]
            # At least a short pause per round, whatever the table says: never a hot loop.
            pause = max(min([next_sweep, *due]) - self._clock(), MIN_PAUSE)
            self._round_at = self._clock() + pause
            await wait_event(self._wake, pause)
            self._wake.clear()
            sweeping = self._clock() >= next_sweep
            try:
                await self.tend(sweep=sweeping)
            except Exception:  # never ends the process: the next round tries again
                log.exception("node_lock_round_crashed")
            if sweeping:
                next_sweep = self._clock() + sweep

    async def tend(self, *, sweep: bool = True) -> None:
        """One round of background work: retry the failed releases that are due, and (with
        `sweep`) clear locks of others that have gone stale. Never raises (but for
        cancellation): its failures are logged and tried again next round."""
        for node, value in list(self._leftover.items()):
            await self._retry_leftover(node, value)
        for node in list(self._parked):
            if node not in self._parked:
                continue  # taken up (or let go) by a hold while an earlier one was released
            if node in self._wanted:
                self._yield_until[node] = self._clock() + YIELD_SECONDS
                await self._let_go(node)
            elif self._parked_due(node) <= self._clock():
                await self._let_go(node)
        now = self._clock()
        for node in [n for n, until in self._yield_until.items() if until <= now]:
            del self._yield_until[node]
        if sweep:
            for node, (value, _) in list(self._seen.items()):
                await self._clear_if_stale(node, value)

    def _parked_due(self, node: str) -> float:
        """When a parked hold is let go: idle for the linger, or short of write budget."""
        hold, idle_since = self._parked[node]
        return min(idle_since + self.settings.linger, hold.write_until - REUSE_MARGIN)

    async def _let_go(self, node: str) -> None:
        async with self._local.setdefault(node, asyncio.Lock()):
            parked = self._parked.pop(node, None)
            if parked is not None:
                await self.release(parked[0])

    async def _retry_leftover(self, node: str, value: str) -> None:
        at, delay = self._retry_at.get(node, (0.0, LEFTOVER_RETRY[0]))
        if at > self._clock():
            return
        async with self._local.setdefault(node, asyncio.Lock()):
            if self._leftover.get(node) != value:
                return  # a hold of ours took it over, or the node was deleted, meanwhile
            try:
                cleared = await self._clear(node, value)
            except Exception as exc:
                if self._leftover.get(node) == value:
                    delay = min(delay * 2, LEFTOVER_RETRY[1])
                    self._retry_at[node] = (self._clock() + delay, delay)
                log.info("node_lock_release_retry_failed", node=node, error=repr(exc))
                return
            if self._leftover.get(node) == value:
                self._leftover.pop(node, None)
                self._retry_at.pop(node, None)
            if cleared:
                self.stats.released_late += 1
                log.info("node_lock_released_late", node=node)

    async def _clear_if_stale(self, node: str, value: str) -> None:
        if self._ours(node, value) or not self._stale(node, value):
            return
        async with self._local.setdefault(node, asyncio.Lock()):
            if not self._stale(node, value):
                return
            try:
                cleared = await self._clear(node, value)
            except Exception as exc:
                log.info("node_lock_stale_clear_failed", node=node, error=repr(exc))
                return
            if cleared:
                self.stats.stale_cleared += 1
                metrics.NODE_LOCK_RECOVERED.labels("stale").inc()
                log.warning("node_lock_stale_cleared", node=node, holder=value[:200])

    # -- lifecycle ---------------------------------------------------------------------------

    def forget_node(self, node: str) -> None:
        """The node was deleted (and its annotations with it): drop what we know of it, and
        its in-memory lock unless a bind holds it now."""
        parked = self._parked.pop(node, None)
        if parked is not None and self._held.get(node) is parked[0]:
            del self._held[node]  # the lock object went with the node
        for table in (
            self._released,
            self._release_version,
            self._seen,
            self._watched,
            self._leftover,
            self._retry_at,
            self._yield_until,
            self._lineage,
        ):
            table.pop(node, None)
        self._wanted.discard(node)
        waiting = self._waiters.pop(node, None)
        if waiting and self.on_free is not None:
            self.on_free(list(waiting))  # its lock went with it
        lock = self._local.get(node)
        if lock is not None and not lock.locked():
            del self._local[node]
        lock = self._node_local.get(node)
        if lock is not None and not lock.locked():
            del self._node_local[node]

    async def release_all(self, timeout: float = RELEASE_ALL_SECONDS) -> dict[str, str]:
        """Stopping: every lock of ours still taken (held, parked, or a release that failed)
        cleared, all at once, within `timeout` seconds; returns those that were not (node ->
        value): they stand until they go stale for the others (`timeout` of the settings).
        Binds must be over or cancelled by now: a lock is cleared whoever uses it."""
        holds = dict(self._held)
        values = {node: hold.value for node, hold in holds.items()}
        values.update(self._leftover)
        self._parked.clear()
        self._held.clear()
        self._leftover.clear()
        self._retry_at.clear()
        left = dict(values)

        async def clear(node: str, value: str) -> None:
            hold = holds.get(node)
            if hold is not None and hold.value == value:
                # The pods bound under it are left beside it, as a release leaves them.
                done = self._clear(
                    node, value, version=hold.version, record=hold.bound_after, obj=hold.node_obj
                )
            else:
                done = self._clear(node, value)
            try:
                await done
            except (KubeError, LockContended) as exc:
                log.warning("node_lock_release_failed", node=node, error=str(exc), retry="never")
                return
            del left[node]

        if values:
            try:
                async with asyncio.timeout(timeout):
                    outcomes = await asyncio.gather(
                        *(clear(n, v) for n, v in values.items()), return_exceptions=True
                    )
            except TimeoutError:
                outcomes = []
            for outcome in outcomes:
                if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                    raise outcome
                if isinstance(outcome, Exception):
                    log.error("node_lock_release_crashed", error=repr(outcome))
        if left:
            log.warning("node_locks_left", locks=sorted(left), until="stale for the others")
        else:
            log.info("node_locks_released", locks=len(values))
        return left

    @property
    def held(self) -> dict[str, Hold]:
        return dict(self._held)

    @property
    def leftovers(self) -> dict[str, str]:
        """Locks of ours whose release has not landed yet (node -> value)."""
        return dict(self._leftover)
