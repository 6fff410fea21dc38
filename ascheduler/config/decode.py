"""Decoding: a `KubeSchedulerConfiguration` document read strictly into a `SchedulerConfig`,
every field left out defaulted (`defaults`), every problem kept with its path (`validation`)
and all of them reported at once, as kube-scheduler's scheme decodes, defaults and
validates its versioned files.

One step per part of the document, in the document's order (so are its problems): the
header, the queue, the client, the leader election, ascheduler's own section (node locks,
binding, serving), then the profiles and the extenders, and last every profile built once, so
plugin arguments and the extension points' rules are checked by the code that runs them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from ascheduler.binding.binder import (
    DEFAULT_DEVICE_RESOURCES,
    MODES,
    POLICIES,
    BindSettings,
)
from ascheduler.config import defaults
from ascheduler.config.defaults import API_VERSION, KIND
from ascheduler.config.profiles import ignoring, profile, queue_sort_problems
from ascheduler.config.types import LeaderElection, SchedulerConfig
from ascheduler.config.validation import Problems
from ascheduler.durations import parse_seconds
from ascheduler.features import Features
from ascheduler.framework import ConfigError, Handle, ProfileSpec, Registry
from ascheduler.framework.args import decode
from ascheduler.framework.extender import ExtenderConfig, ignored_by_scheduler
from ascheduler.framework.extender import validate as validate_extenders
from ascheduler.framework.runtime import Framework
from ascheduler.http import DEBUG_MODES, parse_address
from ascheduler.locks import LockSettings
from ascheduler.locks.keys import DEFAULT_KEY, HAMI_KEY, LOCK_OBJECTS, LockObject
from ascheduler.locks.settings import (
    DEFAULT_LINGER,
    DEFAULT_MEMBER_SECONDS,
    EXPIRE_ENV,
    MAX_LEASE_GROUPS,
    WHEN_ALONE,
    default_lease_groups,
)
from ascheduler.queue import QueueSettings
from ascheduler.shards import ShardSettings
from ascheduler.shards import members as shard_members

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
    "sharding",
}
_SHARDING: Final = {"enabled", "group", "memberDuration"}
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
_LOCK_PATH: Final = "ascheduler.nodeLock"


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


def load(path: str | Path, registry: Registry, features: Features | None = None) -> SchedulerConfig:
    return parse(read(path), registry, features)


def parse(data: Any, registry: Registry, features: Features | None = None) -> SchedulerConfig:
    """Validate and default a decoded configuration as the release of `features` reads it
    (None: the default release); `ConfigError` lists every problem. The release ascheduler
    behaves as may be known only once the API server is asked: `release_problems` then
    checks the result again, at that release."""
    gates = features if features is not None else Features.defaults()
    p = Problems()
    top = p.obj(data, "", _TOP)
    _header(p, top)
    pct = p.int_(
        top.get("percentageOfNodesToScore"),
        "percentageOfNodesToScore",
        defaults.PERCENTAGE_OF_NODES_TO_SCORE,
        low=0,
        high=100,
    )
    queue = _queue(p, top)
    client = _client(p, top)
    election = _leader_election(p, top)
    own = p.obj(top.get("ascheduler"), "ascheduler", _OWN)
    lock = p.obj(own.get("nodeLock"), _LOCK_PATH, _LOCK)
    binding = _binding(p, own, lock)
    serving = _serving(p, own)
    sharding = _sharding(p, own)
    profiles = _profiles(p, top, registry, gates)
    extenders = _extenders(p, top)
    ignored = ignored_by_scheduler(extenders)
    if ignored:
        # kube-scheduler: resources extenders manage and the scheduler ignores replace
        # NodeResourcesFit's ignoredResources in every profile.
        profiles = [ignoring(spec, ignored) for spec in profiles]
    if not p.items:
        _build_each(p, profiles, registry, gates)
    if p.items:
        raise ConfigError(p.items)
    return SchedulerConfig(
        profiles=tuple(profiles),
        percentage_of_nodes_to_score=pct,
        queue=queue,
        kubeconfig=client.kubeconfig,
        qps=client.qps,
        burst=client.burst,
        leader_election=election,
        binding=binding,
        binding_concurrency=serving.concurrency,
        sharding=sharding,
        write_pool=serving.connections,
        http_address=serving.address,
        allow_non_loopback_http=serving.anywhere,
        debug_endpoints=serving.debug,
        extenders=tuple(extenders),
        lease_groups_named=lock.get("leaseGroups") is not None,
        features=gates,
    )


def _header(p: Problems, top: Mapping[str, Any]) -> None:
    """The type, and the fields accepted as kube-scheduler accepts them with no effect on
    ascheduler (see docs/configuration.md): no worker pool to size, no pprof handlers, and
    the informers fill only once leading whatever delayCacheUntilActive says."""
    if top.get("apiVersion") != API_VERSION:
        p.add("apiVersion", f"must be {API_VERSION!r}, got {top.get('apiVersion')!r}")
    if top.get("kind") != KIND:
        p.add("kind", f"must be {KIND!r}, got {top.get('kind')!r}")
    p.int_(top.get("parallelism"), "parallelism", defaults.PARALLELISM, low=1, high=2**31 - 1)
    for flag in ("enableProfiling", "enableContentionProfiling", "delayCacheUntilActive"):
        p.bool_(top.get(flag), flag, False)


def _queue(p: Problems, top: Mapping[str, Any]) -> QueueSettings:
    initial = p.int_(
        top.get("podInitialBackoffSeconds"),
        "podInitialBackoffSeconds",
        defaults.POD_INITIAL_BACKOFF_SECONDS,
        low=1,
    )
    maximum = p.int_(
        top.get("podMaxBackoffSeconds"),
        "podMaxBackoffSeconds",
        defaults.POD_MAX_BACKOFF_SECONDS,
        low=1,
    )
    if maximum < initial:
        p.add("podMaxBackoffSeconds", "must be at least podInitialBackoffSeconds")
    return QueueSettings(initial_backoff=float(initial), max_backoff=float(maximum))


@dataclass(frozen=True)
class _Client:
    kubeconfig: str | None
    qps: float | None
    burst: int


def _client(p: Problems, top: Mapping[str, Any]) -> _Client:
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
    burst = (
        p.int_(client.get("burst"), "clientConnection.burst", defaults.BURST, low=0)
        or defaults.BURST
    )
    return _Client(kubeconfig, None if qps is None else float(qps), burst)


def _leader_election(p: Problems, top: Mapping[str, Any]) -> LeaderElection:
    leader = p.obj(top.get("leaderElection"), "leaderElection", _LEADER)
    elect = p.bool_(leader.get("leaderElect"), "leaderElection.leaderElect", True)
    # kube-scheduler validates the election's settings only when it elects.
    lease = _lease_duration(p, leader, "leaseDuration", defaults.LEASE_DURATION, checked=elect)
    renew = _lease_duration(p, leader, "renewDeadline", defaults.RENEW_DEADLINE, checked=elect)
    retry = _lease_duration(p, leader, "retryPeriod", defaults.RETRY_PERIOD, checked=elect)
    if elect and renew >= lease:
        p.add("leaderElection.leaseDuration", "must be greater than renewDeadline")
    lock_kind = p.str_(leader.get("resourceLock"), "leaderElection.resourceLock", "leases")
    if elect and lock_kind not in ("", "leases"):
        p.add("leaderElection.resourceLock", f'must be "leases", got {lock_kind!r}')
    name = p.str_(leader.get("resourceName"), "leaderElection.resourceName", defaults.LEASE_NAME)
    namespace = p.str_(
        leader.get("resourceNamespace"),
        "leaderElection.resourceNamespace",
        defaults.LEASE_NAMESPACE,
    )
    return LeaderElection(
        leader_elect=elect,
        lease_duration=lease,
        renew_deadline=renew,
        retry_period=retry,
        resource_name=name or defaults.LEASE_NAME,
        resource_namespace=namespace or defaults.LEASE_NAMESPACE,
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


def _binding(p: Problems, own: Mapping[str, Any], lock: Mapping[str, Any]) -> BindSettings:
    """`ascheduler.nodeLock` and `ascheduler.binding`: which binds lock their node, where and
    how, and who binds."""
    policy = lock.get("policy", "devices")
    if policy not in POLICIES:
        p.add(f"{_LOCK_PATH}.policy", f"must be one of {', '.join(POLICIES)}, got {policy!r}")
        policy = "devices"
    devices = _device_resources(p, lock, policy)
    settings = _lock_settings(p, lock)
    mode = own.get("binding", "direct")
    if mode not in MODES:
        p.add("ascheduler.binding", f"must be one of {', '.join(MODES)}, got {mode!r}")
        mode = "direct"
    prefix = p.str_(
        own.get("annotationPrefix"), "ascheduler.annotationPrefix", defaults.ANNOTATION_PREFIX
    )
    return BindSettings(
        mode=mode,
        policy=policy,
        device_resources=frozenset(devices),
        annotation_prefix=prefix or defaults.ANNOTATION_PREFIX,
        lock=settings,
    )


def _device_resources(p: Problems, lock: Mapping[str, Any], policy: str) -> list[str]:
    raw = lock.get("deviceResources")
    if raw is None:
        return list(DEFAULT_DEVICE_RESOURCES)
    path = f"{_LOCK_PATH}.deviceResources"
    devices = []
    for i, item in enumerate(p.seq(raw, path)):
        if isinstance(item, str) and item:
            devices.append(item)
        else:
            p.add(f"{path}[{i}]", f"expected a resource name, got {item!r}")
    if isinstance(raw, list) and not raw and policy == "devices":
        p.add(path, "must name at least one resource under policy 'devices' (or use 'none')")
    return devices


def _lock_settings(p: Problems, lock: Mapping[str, Any]) -> LockSettings:
    """Where a node's lock lives and for how long: key, object, timeout (or
    `$ASCHEDULER_NODELOCK_EXPIRE`), linger, when alone, membership, lease groups."""
    timeout = (
        p.duration(lock.get("timeout"), f"{_LOCK_PATH}.timeout", 300.0)
        if lock.get("timeout") is not None
        else None
    )
    key = p.str_(lock.get("key"), f"{_LOCK_PATH}.key", DEFAULT_KEY) or DEFAULT_KEY
    on = lock.get("object")
    if on is not None and on not in LOCK_OBJECTS:
        p.add(f"{_LOCK_PATH}.object", f"must be one of {', '.join(LOCK_OBJECTS)}, got {on!r}")
        on = None
    if on == "lease" and key == HAMI_KEY:
        p.add(
            f"{_LOCK_PATH}.object",
            f"the {HAMI_KEY} lock is HAMi's Node annotation: it cannot live on a Lease",
        )
        on = None
    linger = DEFAULT_LINGER
    if lock.get("linger") is not None:  # 0 allowed: release at once
        try:
            linger = parse_seconds(str(lock["linger"]))
        except ValueError:
            p.add(f"{_LOCK_PATH}.linger", f"not a duration: {lock['linger']!r}")
    try:
        settings = LockSettings.from_env(key=key, timeout=timeout, on=on)
    except ValueError as exc:
        p.add(f"{_LOCK_PATH}.timeout", f"${EXPIRE_ENV}: {exc}")
        settings = LockSettings(key=key, on=on)
    try:
        settings = dataclasses.replace(settings, linger=linger)
    except ValueError as exc:
        p.add(f"{_LOCK_PATH}.linger", str(exc))
    when_alone = lock.get("whenAlone", "skip")
    if when_alone not in WHEN_ALONE:
        p.add(
            f"{_LOCK_PATH}.whenAlone",
            f"must be one of {', '.join(WHEN_ALONE)}, got {when_alone!r}",
        )
        when_alone = "skip"
    member_duration = p.duration(
        lock.get("memberDuration"), f"{_LOCK_PATH}.memberDuration", DEFAULT_MEMBER_SECONDS
    )
    return dataclasses.replace(
        settings,
        when_alone=when_alone,
        member_duration=member_duration,
        lease_groups=_lease_groups(p, lock, settings.lock_object),
    )


def _lease_groups(p: Problems, lock: Mapping[str, Any], lock_object: LockObject) -> int:
    """`nodeLock.leaseGroups`: by default `default_lease_groups` of where the locks are."""
    lease_groups = p.int_(
        lock.get("leaseGroups"),
        f"{_LOCK_PATH}.leaseGroups",
        default_lease_groups(lock_object),
        low=0,
        high=MAX_LEASE_GROUPS,
    )
    if lease_groups and lock_object != "lease":
        p.add(f"{_LOCK_PATH}.leaseGroups", "lease groups need the locks on Leases")
        lease_groups = 0
    return lease_groups


def _sharding(p: Problems, own: Mapping[str, Any]) -> ShardSettings:
    """`ascheduler.sharding`: several active instances splitting the pending pods."""
    path = "ascheduler.sharding"
    section = p.obj(own.get("sharding"), path, _SHARDING)
    enabled = p.bool_(section.get("enabled"), f"{path}.enabled", False)
    group = p.str_(section.get("group"), f"{path}.group", shard_members.DEFAULT_GROUP)
    duration = p.duration(
        section.get("memberDuration"),
        f"{path}.memberDuration",
        shard_members.DEFAULT_MEMBER_SECONDS,
    )
    try:
        return ShardSettings(enabled=enabled, group=group, member_duration=duration)
    except ValueError as exc:
        p.add(path, str(exc))
        return ShardSettings(enabled=enabled)


@dataclass(frozen=True)
class _Serving:
    address: str | None
    anywhere: bool
    concurrency: int
    connections: int
    debug: str


def _serving(p: Problems, own: Mapping[str, Any]) -> _Serving:
    """The plain listener, the debug endpoints and the bind and write pools' sizes."""
    address: str | None = p.str_(own.get("httpAddress"), "ascheduler.httpAddress", "") or None
    if address is not None:
        try:
            parse_address(address)
        except ValueError as exc:
            p.add("ascheduler.httpAddress", str(exc))
            address = None
    anywhere = p.bool_(own.get("allowNonLoopbackHTTP"), "ascheduler.allowNonLoopbackHTTP", False)
    concurrency = p.int_(
        own.get("bindingConcurrency"),
        "ascheduler.bindingConcurrency",
        defaults.BINDING_CONCURRENCY,
        low=1,
    )
    connections = p.int_(
        own.get("writeConnections"),
        "ascheduler.writeConnections",
        defaults.WRITE_CONNECTIONS,
        low=1,
    )
    debug = own.get("debugEndpoints", defaults.DEBUG_ENDPOINTS)
    if debug not in DEBUG_MODES:
        p.add(
            "ascheduler.debugEndpoints", f"must be one of {', '.join(DEBUG_MODES)}, got {debug!r}"
        )
        debug = defaults.DEBUG_ENDPOINTS
    return _Serving(address, anywhere, concurrency, connections, debug)


def _profiles(
    p: Problems, top: Mapping[str, Any], registry: Registry, features: Features
) -> list[ProfileSpec]:
    """Each profile merged onto the default one (`profiles`); names unique, one queue sort."""
    profiles = []
    raw_profiles = p.seq(top.get("profiles"), "profiles") or [{}]
    seen: set[str] = set()
    single = defaults.DEFAULT_SCHEDULER_NAME if len(raw_profiles) == 1 else None
    for i, raw in enumerate(raw_profiles):
        spec = profile(p, raw, f"profiles[{i}]", registry, default_name=single, features=features)
        if spec.scheduler_name in seen:
            p.add(f"profiles[{i}].schedulerName", f"duplicate {spec.scheduler_name!r}")
        seen.add(spec.scheduler_name)
        profiles.append(spec)
    p.items.extend(queue_sort_problems(profiles))
    return profiles


def _extenders(p: Problems, top: Mapping[str, Any]) -> list[ExtenderConfig]:
    decoded: list[tuple[int, ExtenderConfig]] = []
    for i, raw in enumerate(p.seq(top.get("extenders"), "extenders")):
        try:
            decoded.append((i, decode(ExtenderConfig, raw, f"extenders[{i}]")))
        except ConfigError as exc:
            p.items.extend(exc.problems)
    p.items.extend(validate_extenders(decoded))
    return [e for _, e in decoded]


def _build_each(
    p: Problems, profiles: list[ProfileSpec], registry: Registry, features: Features
) -> None:
    """Build each profile once, computing nothing: plugin args and the extension-point
    rules (one QueueSort, a Bind) are checked by the same code that runs them."""
    for spec in profiles:
        try:
            Framework(spec, registry, Handle(features=features))
        except ConfigError as exc:
            p.items.extend(exc.problems)


def release_problems(config: SchedulerConfig, registry: Registry, features: Features) -> list[str]:
    """What the release of `features` refuses in `config`, parsed at another release: each
    profile's plugin args by that release's rules (every plugin's, enabled or not, as
    kube-scheduler validates them) and each profile built there. A newer release only adds
    `Plugins` fields, so what parse accepted of those stays accepted."""
    problems: list[str] = []
    for spec in config.profiles:
        found: list[str] = []
        for name, raw in spec.args.items():
            registration = registry.get(name)
            if registration is None:
                continue
            where = spec.arg_paths.get(name, f"{spec.path}pluginConfig[{name}].args")
            try:
                registration.decode_args(raw, where, features)
            except ConfigError as exc:
                found.extend(exc.problems)
        if not found:
            try:
                Framework(spec, registry, Handle(features=features))
            except ConfigError as exc:
                found.extend(exc.problems)
        problems.extend(found)
    return list(dict.fromkeys(problems))
