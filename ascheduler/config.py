"""`KubeSchedulerConfiguration` (kubescheduler.config.k8s.io/v1) for ascheduler.

Read as kube-scheduler v1.35 reads it: a file it accepts is accepted, with the same
effective profiles, and one it refuses is refused, every problem reported with its path
(`profiles[0].plugins.score.enabled[2].name: unknown plugin "Foo"`), all of them at once
(docs/configuration.md; `tests/integration/config` compares the two on a corpus).
ascheduler's own settings live in one top-level section, `ascheduler:`.

Plugins merge onto the default profile as kube-scheduler's do (`configprofiles`): a
`multiPoint.enabled` entry naming a default plugin replaces it (weight included: left out,
0, read as 1), `<point>.disabled` keeps plugins away from one point (`*`: all), and
`<point>.enabled` adds plugins to one point.

Fields kube-scheduler accepts that change nothing here are accepted: `parallelism` (no worker
pool), `enableProfiling` / `enableContentionProfiling` (no pprof), content types (JSON
always), and `delayCacheUntilActive`: ascheduler always fills its informers' caches only once
it leads (its `true`), whatever the file says; `false`, kube-scheduler's warm standby, is not
honoured (a standby keeps no watches, and lists the cluster when it takes over): an
instance that takes node locks joins its peers' member Leases before its informers list the
cluster (`locks.members`), and a standby, binding nothing, must not join.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from ascheduler import features
from ascheduler.auth import PathMatcher
from ascheduler.binding.binder import (
    DEFAULT_DEVICE_RESOURCES,
    MODES,
    POLICIES,
    BindingMode,
    BindSettings,
    LockPolicy,
)
from ascheduler.configprofiles import Problems, profile, queue_sort_problems
from ascheduler.debug import MODES as DEBUG_MODES
from ascheduler.debug import is_loopback
from ascheduler.durations import parse_seconds
from ascheduler.framework import (
    ConfigError,
    Framework,
    Handle,
    ProfileSpec,
    Registry,
    default_plugins,
    multipoint,
)
from ascheduler.framework.args import decode, encode
from ascheduler.framework.extender import ExtenderConfig, ignored_by_scheduler
from ascheduler.framework.extender import validate as validate_extenders
from ascheduler.http import SecureServing, parse_address
from ascheduler.locks import LockSettings
from ascheduler.locks.keys import DEFAULT_KEY, HAMI_KEY, LOCK_OBJECTS, LockObject, lock_object_of
from ascheduler.locks.settings import (
    DEFAULT_LINGER,
    DEFAULT_MEMBER_SECONDS,
    EXPIRE_ENV,
    MAX_LEASE_GROUPS,
    WHEN_ALONE,
    default_lease_groups,
)
from ascheduler.queue import QueueSettings

API_VERSION: Final = "kubescheduler.config.k8s.io/v1"
KIND: Final = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME: Final = "ascheduler"
JSON_CONTENT: Final = "application/json"
#: The write client's connections by default (`ascheduler.writeConnections`).
WRITE_CONNECTIONS: Final = 128

_TOP: Final = {
    "apiVersion",
    "delayCacheUntilActive",
    "enableProfiling",
    "enableContentionProfiling",
    "kind",
    "parallelism",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "clientConnection",
    "leaderElection",
    "profiles",
    "extenders",
    "ascheduler",
}
_CLIENT: Final = {"kubeconfig", "qps", "burst", "acceptContentTypes", "contentType"}
_LEADER: Final = {
    "leaderElect",
    "leaseDuration",
    "renewDeadline",
    "retryPeriod",
    "resourceLock",
    "resourceName",
    "resourceNamespace",
}
_OWN: Final = {
    "nodeLock",
    "bindingConcurrency",
    "writeConnections",
    "httpAddress",
    "annotationPrefix",
    "binding",
    "debugEndpoints",
    "allowNonLoopbackHTTP",
}
_LOCK: Final = {
    "policy",
    "key",
    "object",
    "timeout",
    "linger",
    "whenAlone",
    "memberDuration",
    "leaseGroups",
    "deviceResources",
}


@dataclass(frozen=True)
class LeaderElection:
    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_name: str = "ascheduler"
    resource_namespace: str = "kube-system"


@dataclass(frozen=True)
class SchedulerConfig:
    """Everything `ascheduler run` runs with: the file (or its defaults), then the flags."""

    profiles: tuple[ProfileSpec, ...] = (multipoint(DEFAULT_SCHEDULER_NAME),)
    percentage_of_nodes_to_score: int = 0
    queue: QueueSettings = field(default_factory=QueueSettings)
    kubeconfig: str | None = None
    #: The kubeconfig context to use (None: its current context).
    context: str | None = None
    #: None: no client-side limit (kube-scheduler defaults to 50; set it to get one).
    qps: float | None = None
    burst: int = 100
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    binding: BindSettings = field(default_factory=BindSettings)
    binding_concurrency: int = 256
    #: The plain HTTP listener, with no authentication (None: none, the default).
    http_address: str | None = None
    #: Whether `http_address` may be another than a loopback address.
    allow_non_loopback_http: bool = False
    #: The secure port, its certificate and its delegated authentication and authorization
    #: (flags only, as kube-scheduler's).
    secure_serving: SecureServing = field(default_factory=SecureServing)
    #: `/debug/...`: off, loopback (on the plain listener, which must be on loopback) or
    #: authorized (on the secure port, to users the API server authorizes).
    debug_endpoints: str = "off"
    #: Connections of the client for writes (binds, events, locks): HTTP/1.1 carries one
    #: request in flight per connection, and each new one costs a TLS handshake (about 0.9 ms
    #: of the client's CPU, and the API server's share) when a burst first needs it. Fewer
    #: save that CPU; more keep binds flowing when the API server is slow to answer.
    write_pool: int = WRITE_CONNECTIONS
    #: How long a graceful stop waits for binding cycles in flight.
    shutdown_grace: float = 30.0
    #: kube-scheduler's HTTP extenders, consulted after the plugins.
    extenders: tuple[ExtenderConfig, ...] = ()
    #: Whether the file named `nodeLock.leaseGroups`: if not, the number follows where the
    #: flags put the locks (`default_lease_groups`).
    lease_groups_named: bool = False
    #: The feature gates on (`--feature-gates`).
    features: frozenset[str] = field(default_factory=features.defaults)


@dataclass(frozen=True)
class Overrides:
    """Command-line flags, each None unless given, applied over the configuration."""

    kubeconfig: str | None = None
    scheduler_names: tuple[str, ...] | None = None
    binding_concurrency: int | None = None
    percentage_of_nodes_to_score: int | None = None
    http_address: str | None = None
    allow_non_loopback_http: bool | None = None
    secure_serving: SecureServing | None = None
    debug_endpoints: str | None = None
    leader_elect: bool | None = None
    leader_elect_resource_namespace: str | None = None
    leader_elect_resource_name: str | None = None
    leader_elect_lease_duration: float | None = None
    node_lock_policy: LockPolicy | None = None
    binding_mode: BindingMode | None = None
    device_resources: tuple[str, ...] | None = None
    node_lock_key: str | None = None
    node_lock_timeout: str | None = None
    node_lock_object: str | None = None
    node_lock_linger: str | None = None
    node_lock_when_alone: str | None = None
    node_lock_lease_groups: int | None = None
    annotation_prefix: str | None = None
    feature_gates: str | None = None


#: What `ascheduler run` without a file starts from: kube-scheduler's defaults, but leader
#: election off unless `--leader-elect` (a second scheduler usually runs one replica).
NO_FILE: Final[Mapping[str, Any]] = {
    "apiVersion": API_VERSION,
    "kind": KIND,
    "leaderElection": {"leaderElect": False},
}


def resolve(path: str | None, overrides: Overrides, registry: Registry) -> SchedulerConfig:
    """The file at `path` (or `NO_FILE`), then `overrides`; ConfigError naming every problem,
    the file's by their paths and the flags' by their names."""
    document = read(path) if path else dict(NO_FILE)
    config = parse(document, registry)
    named = isinstance(document, Mapping) and bool(document.get("profiles"))
    return apply(config, overrides, file_profiles=named)


def apply(config: SchedulerConfig, o: Overrides, *, file_profiles: bool = False) -> SchedulerConfig:
    """`config` with the flags in `o` applied; `file_profiles` says the file named profiles
    (which `--scheduler-name` must not silently replace)."""
    problems: list[str] = []
    changes: dict[str, Any] = {}
    if o.kubeconfig is not None:
        changes["kubeconfig"] = o.kubeconfig
    if o.scheduler_names is not None:
        if file_profiles:
            problems.append(
                "--scheduler-name: the file names its profiles; set schedulerName there"
            )
        ignored = ignored_by_scheduler(config.extenders)
        changes["profiles"] = tuple(
            _ignoring(multipoint(n), ignored) if ignored else multipoint(n)
            for n in dict.fromkeys(o.scheduler_names)
        )
    if o.binding_concurrency is not None:
        if o.binding_concurrency < 1:
            problems.append(
                f"--binding-concurrency: must be at least 1, got {o.binding_concurrency}"
            )
        changes["binding_concurrency"] = o.binding_concurrency
    if o.feature_gates is not None:
        try:
            changes["features"] = features.parse_gates(o.feature_gates)
        except ValueError as exc:
            problems.append(f"--feature-gates: {exc}")
    if o.percentage_of_nodes_to_score is not None:
        if not 0 <= o.percentage_of_nodes_to_score <= 100:
            problems.append(
                f"--percentage-of-nodes-to-score: must be in 0..100, got "
                f"{o.percentage_of_nodes_to_score}"
            )
        changes["percentage_of_nodes_to_score"] = o.percentage_of_nodes_to_score
    if o.http_address is not None:
        if o.http_address:
            try:
                parse_address(o.http_address)
            except ValueError as exc:
                problems.append(f"--http-address: {exc}")
        changes["http_address"] = o.http_address or None
    if o.allow_non_loopback_http is not None:
        changes["allow_non_loopback_http"] = o.allow_non_loopback_http
    if o.secure_serving is not None:
        problems.extend(secure_problems(o.secure_serving))
        changes["secure_serving"] = o.secure_serving
    election = config.leader_election
    if o.leader_elect is not None:
        election = dataclasses.replace(election, leader_elect=o.leader_elect)
    if o.leader_elect_resource_namespace is not None:
        election = dataclasses.replace(
            election, resource_namespace=o.leader_elect_resource_namespace
        )
    if o.leader_elect_resource_name is not None:
        election = dataclasses.replace(election, resource_name=o.leader_elect_resource_name)
    if o.leader_elect_lease_duration is not None:
        lease = o.leader_elect_lease_duration
        if lease <= 0:
            problems.append(f"--leader-elect-lease-duration: must be positive, got {lease:g}")
        else:
            election = dataclasses.replace(
                election,
                lease_duration=lease,
                renew_deadline=lease * 2 / 3,
                retry_period=max(lease / 7.5, 0.2),
            )
    if election.leader_elect and election.renew_deadline >= election.lease_duration:
        # The file's election went unchecked while it did not elect.
        problems.append(
            "leaderElection.leaseDuration: must be greater than renewDeadline "
            f"({election.lease_duration:g}s <= {election.renew_deadline:g}s)"
        )
    changes["leader_election"] = election
    binding = config.binding
    lock = binding.lock
    on: LockObject | None = lock.on
    if o.node_lock_object is not None:
        if o.node_lock_object == "auto":
            on = None
        elif o.node_lock_object in LOCK_OBJECTS:
            on = o.node_lock_object
        else:
            problems.append(
                f"--node-lock-object: must be one of {', '.join(LOCK_OBJECTS)} or auto, "
                f"got {o.node_lock_object!r}"
            )
    try:
        if o.node_lock_timeout is not None:
            lock = dataclasses.replace(lock, timeout=parse_seconds(o.node_lock_timeout))
    except ValueError as exc:
        problems.append(f"--node-lock-timeout: {exc}")
    try:
        if o.node_lock_linger is not None:
            lock = dataclasses.replace(lock, linger=parse_seconds(o.node_lock_linger))
    except ValueError as exc:
        problems.append(f"--node-lock-linger: {exc}")
    if o.node_lock_when_alone is not None:
        if o.node_lock_when_alone in WHEN_ALONE:
            lock = dataclasses.replace(lock, when_alone=o.node_lock_when_alone)
        else:
            problems.append(
                f"--node-lock-when-alone: must be one of {', '.join(WHEN_ALONE)}, "
                f"got {o.node_lock_when_alone!r}"
            )
    groups = o.node_lock_lease_groups
    if groups is None:
        groups = lock.lease_groups
        if not config.lease_groups_named:
            # The default, for wherever the flags put the locks.
            groups = default_lease_groups(lock_object_of(o.node_lock_key or lock.key, on))
    try:
        lock = dataclasses.replace(
            lock, key=o.node_lock_key or lock.key, on=on, lease_groups=groups
        )
    except ValueError as exc:
        flags = "--node-lock-key, --node-lock-object"
        if o.node_lock_lease_groups is not None:
            flags += ", --node-lock-lease-groups"
        problems.append(f"{flags}: {exc}")
    binding_changes: dict[str, Any] = {"lock": lock}
    if o.binding_mode is not None:
        binding_changes["mode"] = o.binding_mode
    if o.node_lock_policy is not None:
        binding_changes["policy"] = o.node_lock_policy
    if o.device_resources is not None:
        binding_changes["device_resources"] = frozenset(o.device_resources)
    if o.annotation_prefix is not None:
        binding_changes["annotation_prefix"] = o.annotation_prefix
    try:
        changes["binding"] = dataclasses.replace(binding, **binding_changes)
    except ValueError as exc:
        problems.append(f"--node-lock-policy: {exc}")
    else:
        if changes["binding"].policy == "devices" and not changes["binding"].device_resources:
            problems.append(
                "--device-resources: must name at least one resource under policy 'devices' "
                "(or use --node-lock-policy none)"
            )
    if o.debug_endpoints is not None:
        if o.debug_endpoints not in DEBUG_MODES:
            problems.append(
                f"--debug-endpoints: must be one of {', '.join(DEBUG_MODES)}, "
                f"got {o.debug_endpoints!r}"
            )
        changes["debug_endpoints"] = o.debug_endpoints
    if problems:
        raise ConfigError(problems)
    out = dataclasses.replace(config, **changes)
    found = [p for p in (plain_problem(out), debug_problem(out)) if p]
    if found:
        raise ConfigError(found)
    return out


def secure_problems(s: SecureServing) -> list[str]:
    """What is wrong with the secure serving flags (kube-scheduler's checks)."""
    problems = []
    if not 0 <= s.port < 65536:
        problems.append(f"--secure-port: must be in 0..65535, got {s.port}")
    if s.bind_address != "localhost":
        try:
            ipaddress.ip_address(s.bind_address)
        except ValueError:
            problems.append(f"--bind-address: not an IP address: {s.bind_address!r}")
    cert = s.certificate
    if bool(cert.cert_file) != bool(cert.key_file):
        problems.append("--tls-cert-file and --tls-private-key-file: give both or neither")
    for flag, name in (
        ("--tls-cert-file", cert.cert_file),
        ("--tls-private-key-file", cert.key_file),
        ("--client-ca-file", cert.client_ca_file),
    ):
        if name and not Path(name).is_file():
            problems.append(f"{flag}: no such file: {name}")
    try:
        PathMatcher(s.auth.always_allow_paths)
    except ValueError as exc:
        problems.append(f"--authorization-always-allow-paths: {exc}")
    for flag, ttl in (
        ("--authentication-token-webhook-cache-ttl", s.auth.token_ttl),
        ("--authorization-webhook-cache-authorized-ttl", s.auth.allowed_ttl),
        ("--authorization-webhook-cache-unauthorized-ttl", s.auth.denied_ttl),
    ):
        if ttl < 0:
            problems.append(f"{flag}: must not be negative, got {ttl:g}s")
    return problems


def plain_problem(config: SchedulerConfig) -> str:
    """Why the plain HTTP listener cannot be where it is asked for ("" when it can): it
    authenticates no one, so it stays on loopback unless explicitly allowed elsewhere."""
    if not config.http_address or config.allow_non_loopback_http:
        return ""
    host, _ = parse_address(config.http_address)
    if is_loopback(host):
        return ""
    return (
        f"httpAddress: the plain HTTP listener answers anyone, so only on a loopback address "
        f"(127.0.0.1:PORT), not {config.http_address}; serve on the secure port "
        f"(--secure-port), or allow it there with --allow-non-loopback-http "
        f"(ascheduler.allowNonLoopbackHTTP)"
    )


def debug_problem(config: SchedulerConfig) -> str:
    """Why the debug endpoints cannot be served as configured ("" when they can):
    `loopback` needs the plain listener on a loopback address, `authorized` the secure
    port."""
    mode = config.debug_endpoints
    if mode == "loopback":
        if not config.http_address:
            return (
                "debugEndpoints: loopback serves them on the plain HTTP listener, so it needs "
                "one (--http-address 127.0.0.1:PORT)"
            )
        host, _ = parse_address(config.http_address)
        if not is_loopback(host):
            return (
                f"debugEndpoints: loopback serves them without a token, so only on a loopback "
                f"address (127.0.0.1:PORT), not {config.http_address}; use authorized to serve "
                f"them on the secure port"
            )
    if mode == "authorized" and not config.secure_serving.port:
        return "debugEndpoints: authorized serves them on the secure port, so it needs one"
    return ""


def parse(data: Any, registry: Registry) -> SchedulerConfig:
    """Validate and default a decoded configuration; `ConfigError` lists every problem."""
    p = Problems()
    top = p.obj(data, "", _TOP)
    if top.get("apiVersion") != API_VERSION:
        p.add("apiVersion", f"must be {API_VERSION!r}, got {top.get('apiVersion')!r}")
    if top.get("kind") != KIND:
        p.add("kind", f"must be {KIND!r}, got {top.get('kind')!r}")
    # Accepted as kube-scheduler accepts them, with no effect on ascheduler (see
    # docs/configuration.md): no worker pool to size, no pprof handlers, and the informers
    # fill only once leading whatever delayCacheUntilActive says.
    p.int_(top.get("parallelism"), "parallelism", 16, low=1, high=2**31 - 1)
    for flag in ("enableProfiling", "enableContentionProfiling", "delayCacheUntilActive"):
        p.bool_(top.get(flag), flag, False)
    pct = p.int_(
        top.get("percentageOfNodesToScore"), "percentageOfNodesToScore", 0, low=0, high=100
    )
    initial = p.int_(top.get("podInitialBackoffSeconds"), "podInitialBackoffSeconds", 1, low=1)
    maximum = p.int_(top.get("podMaxBackoffSeconds"), "podMaxBackoffSeconds", 10, low=1)
    if maximum < initial:
        p.add("podMaxBackoffSeconds", "must be at least podInitialBackoffSeconds")
    client = p.obj(top.get("clientConnection"), "clientConnection", _CLIENT)
    kubeconfig = p.str_(client.get("kubeconfig"), "clientConnection.kubeconfig", "") or None
    for field_name in ("contentType", "acceptContentTypes"):
        # Any accepted, as by kube-scheduler; ascheduler reads and writes JSON regardless.
        p.str_(client.get(field_name), f"clientConnection.{field_name}", "")
    qps = client.get("qps")
    if qps is not None and (not isinstance(qps, int | float) or isinstance(qps, bool)):
        p.add("clientConnection.qps", f"expected a number, got {qps!r}")
        qps = None
    elif qps is not None and qps <= 0:
        qps = None  # 0: unset (kube-scheduler's default applies); negative: no limit
    burst = p.int_(client.get("burst"), "clientConnection.burst", 100, low=0) or 100
    leader = p.obj(top.get("leaderElection"), "leaderElection", _LEADER)
    elect = p.bool_(leader.get("leaderElect"), "leaderElection.leaderElect", True)
    # kube-scheduler validates the election's settings only when it elects.
    lease = _lease_duration(p, leader, "leaseDuration", 15.0, checked=elect)
    renew = _lease_duration(p, leader, "renewDeadline", 10.0, checked=elect)
    retry = _lease_duration(p, leader, "retryPeriod", 2.0, checked=elect)
    if elect and renew >= lease:
        p.add("leaderElection.leaseDuration", "must be greater than renewDeadline")
    lock_kind = p.str_(leader.get("resourceLock"), "leaderElection.resourceLock", "leases")
    if elect and lock_kind not in ("", "leases"):
        p.add("leaderElection.resourceLock", f'must be "leases", got {lock_kind!r}')
    election = LeaderElection(
        leader_elect=elect,
        lease_duration=lease,
        renew_deadline=renew,
        retry_period=retry,
        resource_name=p.str_(
            leader.get("resourceName"), "leaderElection.resourceName", "ascheduler"
        )
        or "ascheduler",
        resource_namespace=p.str_(
            leader.get("resourceNamespace"), "leaderElection.resourceNamespace", "kube-system"
        )
        or "kube-system",
    )

    own = p.obj(top.get("ascheduler"), "ascheduler", _OWN)
    lock = p.obj(own.get("nodeLock"), "ascheduler.nodeLock", _LOCK)
    policy = lock.get("policy", "devices")
    if policy not in POLICIES:
        p.add("ascheduler.nodeLock.policy", f"must be one of {', '.join(POLICIES)}, got {policy!r}")
        policy = "devices"
    devices = list(DEFAULT_DEVICE_RESOURCES)
    raw_devices = lock.get("deviceResources")
    if raw_devices is not None:
        path = "ascheduler.nodeLock.deviceResources"
        devices = []
        for i, item in enumerate(p.seq(raw_devices, path)):
            if isinstance(item, str) and item:
                devices.append(item)
            else:
                p.add(f"{path}[{i}]", f"expected a resource name, got {item!r}")
        if isinstance(raw_devices, list) and not raw_devices and policy == "devices":
            p.add(path, "must name at least one resource under policy 'devices' (or use 'none')")
    timeout = (
        p.duration(lock.get("timeout"), "ascheduler.nodeLock.timeout", 300.0)
        if lock.get("timeout") is not None
        else None
    )
    key = p.str_(lock.get("key"), "ascheduler.nodeLock.key", DEFAULT_KEY) or DEFAULT_KEY
    on = lock.get("object")
    if on is not None and on not in LOCK_OBJECTS:
        p.add(
            "ascheduler.nodeLock.object",
            f"must be one of {', '.join(LOCK_OBJECTS)}, got {on!r}",
        )
        on = None
    if on == "lease" and key == HAMI_KEY:
        p.add(
            "ascheduler.nodeLock.object",
            f"the {HAMI_KEY} lock is HAMi's Node annotation: it cannot live on a Lease",
        )
        on = None
    linger = DEFAULT_LINGER
    if lock.get("linger") is not None:  # 0 allowed: release at once
        try:
            linger = parse_seconds(str(lock["linger"]))
        except ValueError:
            p.add("ascheduler.nodeLock.linger", f"not a duration: {lock['linger']!r}")
    try:
        lock_settings = LockSettings.from_env(key=key, timeout=timeout, on=on)
    except ValueError as exc:
        p.add("ascheduler.nodeLock.timeout", f"${EXPIRE_ENV}: {exc}")
        lock_settings = LockSettings(key=key, on=on)
    try:
        lock_settings = dataclasses.replace(lock_settings, linger=linger)
    except ValueError as exc:
        p.add("ascheduler.nodeLock.linger", str(exc))
    when_alone = lock.get("whenAlone", "skip")
    if when_alone not in WHEN_ALONE:
        p.add(
            "ascheduler.nodeLock.whenAlone",
            f"must be one of {', '.join(WHEN_ALONE)}, got {when_alone!r}",
        )
        when_alone = "skip"
    member_duration = p.duration(
        lock.get("memberDuration"), "ascheduler.nodeLock.memberDuration", DEFAULT_MEMBER_SECONDS
    )
    on_leases = lock_settings.lock_object == "lease"
    lease_groups = p.int_(
        lock.get("leaseGroups"),
        "ascheduler.nodeLock.leaseGroups",
        default_lease_groups(lock_settings.lock_object),
        low=0,
        high=MAX_LEASE_GROUPS,
    )
    if lease_groups and not on_leases:
        p.add("ascheduler.nodeLock.leaseGroups", "lease groups need the locks on Leases")
        lease_groups = 0
    lock_settings = dataclasses.replace(
        lock_settings,
        when_alone=when_alone,
        member_duration=member_duration,
        lease_groups=lease_groups,
    )
    mode = own.get("binding", "direct")
    if mode not in MODES:
        p.add("ascheduler.binding", f"must be one of {', '.join(MODES)}, got {mode!r}")
        mode = "direct"
    binding = BindSettings(
        mode=mode,
        policy=policy,
        device_resources=frozenset(devices),
        annotation_prefix=p.str_(
            own.get("annotationPrefix"), "ascheduler.annotationPrefix", "ascheduler.io"
        )
        or "ascheduler.io",
        lock=lock_settings,
    )
    address: str | None = p.str_(own.get("httpAddress"), "ascheduler.httpAddress", "") or None
    if address is not None:
        try:
            parse_address(address)
        except ValueError as exc:
            p.add("ascheduler.httpAddress", str(exc))
            address = None
    anywhere = p.bool_(own.get("allowNonLoopbackHTTP"), "ascheduler.allowNonLoopbackHTTP", False)
    concurrency = p.int_(own.get("bindingConcurrency"), "ascheduler.bindingConcurrency", 256, low=1)
    connections = p.int_(
        own.get("writeConnections"), "ascheduler.writeConnections", WRITE_CONNECTIONS, low=1
    )
    debug = own.get("debugEndpoints", "off")
    if debug not in DEBUG_MODES:
        p.add(
            "ascheduler.debugEndpoints", f"must be one of {', '.join(DEBUG_MODES)}, got {debug!r}"
        )
        debug = "off"

    profiles = []
    raw_profiles = p.seq(top.get("profiles"), "profiles") or [{}]
    seen: set[str] = set()
    single = DEFAULT_SCHEDULER_NAME if len(raw_profiles) == 1 else None
    for i, raw in enumerate(raw_profiles):
        spec = profile(p, raw, f"profiles[{i}]", registry, default_name=single)
        if spec.scheduler_name in seen:
            p.add(f"profiles[{i}].schedulerName", f"duplicate {spec.scheduler_name!r}")
        seen.add(spec.scheduler_name)
        profiles.append(spec)
    p.items.extend(queue_sort_problems(profiles))
    decoded: list[tuple[int, ExtenderConfig]] = []
    for i, raw in enumerate(p.seq(top.get("extenders"), "extenders")):
        try:
            decoded.append((i, decode(ExtenderConfig, raw, f"extenders[{i}]")))
        except ConfigError as exc:
            p.items.extend(exc.problems)
    p.items.extend(validate_extenders(decoded))
    extenders = [e for _, e in decoded]
    ignored = ignored_by_scheduler(extenders)
    if ignored:
        # kube-scheduler: resources extenders manage and the scheduler ignores replace
        # NodeResourcesFit's ignoredResources in every profile.
        profiles = [_ignoring(spec, ignored) for spec in profiles]
    if not p.items:
        # Build each profile once, computing nothing: plugin args and the extension-point
        # rules (one QueueSort, a Bind) are checked by the same code that runs them.
        for spec in profiles:
            try:
                Framework(spec, registry, Handle())
            except ConfigError as exc:
                p.items.extend(exc.problems)
    if p.items:
        raise ConfigError(p.items)
    return SchedulerConfig(
        profiles=tuple(profiles),
        percentage_of_nodes_to_score=pct,
        queue=QueueSettings(initial_backoff=float(initial), max_backoff=float(maximum)),
        kubeconfig=kubeconfig,
        qps=None if qps is None else float(qps),
        burst=burst,
        leader_election=election,
        binding=binding,
        binding_concurrency=concurrency,
        write_pool=connections,
        http_address=address,
        allow_non_loopback_http=anywhere,
        debug_endpoints=debug,
        extenders=tuple(extenders),
        lease_groups_named=lock.get("leaseGroups") is not None,
    )


def _lease_duration(
    p: Problems, leader: Mapping[str, Any], name: str, default: float, *, checked: bool
) -> float:
    """A leader election duration: 0 or left out is the default (component-base's
    recommended defaulting); otherwise positive, checked only when electing."""
    raw = leader.get(name)
    if raw is None:
        return default
    try:
        seconds = parse_seconds(str(raw))
    except ValueError:
        p.add(f"leaderElection.{name}", f"not a duration: {raw!r}")
        return default
    if seconds == 0:
        return default
    if seconds < 0:
        if checked:
            p.add(f"leaderElection.{name}", "must be greater than zero")
        return default
    return seconds


def _ignoring(spec: ProfileSpec, resources: tuple[str, ...]) -> ProfileSpec:
    args = dict(spec.args)
    args["NodeResourcesFit"] = {
        **args.get("NodeResourcesFit", {}),
        "ignoredResources": list(resources),
    }
    return dataclasses.replace(spec, args=args)


def _has_fields(args: Any) -> bool:
    return dataclasses.is_dataclass(args) and bool(dataclasses.fields(args))


def to_document(config: SchedulerConfig, registry: Registry) -> dict[str, Any]:
    """The effective configuration, every default filled in, as a document `parse` accepts."""
    le = config.leader_election
    lock = config.binding.lock
    profiles = []
    for spec in config.profiles:
        multi = spec.points.get("multiPoint")
        refs = default_plugins(registry) if multi is None else multi
        plugins: dict[str, Any] = {
            "multiPoint": {"enabled": [{"name": r.name, "weight": r.weight} for r in refs]}
        }
        for point, refs in spec.points.items():
            if point != "multiPoint":
                plugins.setdefault(point, {})["enabled"] = [
                    {"name": r.name, "weight": r.weight} for r in refs
                ]
        for point, names in spec.disabled.items():
            plugins.setdefault(point, {})["disabled"] = [{"name": n} for n in sorted(names)]
        # Every enabled plugin's arguments, defaults filled in, as its own type decodes them.
        fw = Framework(spec, registry, Handle())
        args = {name: encode(value) for name, value in fw.args.items() if _has_fields(value)}
        profiles.append(
            {
                "schedulerName": spec.scheduler_name,
                "plugins": plugins,
                "pluginConfig": [{"name": n, "args": a} for n, a in args.items()],
            }
        )
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        **({"extenders": [encode(e) for e in config.extenders]} if config.extenders else {}),
        "percentageOfNodesToScore": config.percentage_of_nodes_to_score,
        "podInitialBackoffSeconds": int(config.queue.initial_backoff),
        "podMaxBackoffSeconds": int(config.queue.max_backoff),
        "clientConnection": {
            "kubeconfig": config.kubeconfig or "",
            **({"qps": config.qps} if config.qps is not None else {}),
            "burst": config.burst,
        },
        "leaderElection": {
            "leaderElect": le.leader_elect,
            "leaseDuration": f"{le.lease_duration:g}s",
            "renewDeadline": f"{le.renew_deadline:g}s",
            "retryPeriod": f"{le.retry_period:g}s",
            "resourceLock": "leases",
            "resourceName": le.resource_name,
            "resourceNamespace": le.resource_namespace,
        },
        "profiles": profiles,
        "ascheduler": {
            "httpAddress": config.http_address or "",
            "allowNonLoopbackHTTP": config.allow_non_loopback_http,
            "debugEndpoints": config.debug_endpoints,
            "bindingConcurrency": config.binding_concurrency,
            "writeConnections": config.write_pool,
            "annotationPrefix": config.binding.annotation_prefix,
            "binding": config.binding.mode,
            "nodeLock": {
                "policy": config.binding.policy,
                "key": lock.key,
                "object": lock.lock_object,
                "timeout": f"{lock.timeout:g}s",
                "linger": f"{lock.linger:g}s",
                "whenAlone": lock.when_alone,
                "memberDuration": f"{lock.member_duration:g}s",
                "leaseGroups": lock.lease_groups,
                "deviceResources": sorted(config.binding.device_resources),
            },
        },
    }


def read(path: str | Path) -> Any:
    """The YAML document at `path`; ConfigError if it cannot be read or parsed."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError([f"{path}: {exc.strerror or exc}"]) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"{path}: not YAML: {exc}"]) from exc


def load(path: str | Path, registry: Registry) -> SchedulerConfig:
    return parse(read(path), registry)
