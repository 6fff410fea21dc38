"""The command-line flags of `ascheduler run` and `ascheduler binder`, each written once.

`FLAGS` is the one table: a row says a flag's name, help, type, default and argparse
group, where in `SchedulerConfig` it lands (`setting`) and how its value is applied over
the file (`apply`). From it come the argparse options (`add_flags`), the values given on a
command line (`Overrides.from_args`) and their application (`apply`), as kube-scheduler's
`cmd/kube-scheduler/app/options` flags override its configuration file.

A flag left out (None) changes nothing. The flags are applied in stages, in the table's order
within each: the plain ones, the secure port's, the leader election's, the node locks', the
binding's, the sharding's, the debug endpoints'; each stage ends with the checks across its
flags, and the file's values they leave in place (the file's leader election, for one, goes
unchecked while it does not elect, and is checked here once a flag makes it elect). Every
problem names its flag; all of them are reported at once.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from ascheduler import features
from ascheduler.auth import DEFAULT_ALWAYS_ALLOW_PATHS
from ascheduler.binding.binder import MODES, POLICIES
from ascheduler.config import defaults
from ascheduler.config.decode import parse, read
from ascheduler.config.defaults import NO_FILE
from ascheduler.config.draft import FINISH, STAGES, Draft, Stage
from ascheduler.config.profiles import ignoring
from ascheduler.config.types import SchedulerConfig
from ascheduler.config.validation import debug_problem, plain_problem, sharding_problems
from ascheduler.durations import parse_seconds
from ascheduler.framework import ConfigError, Registry, multipoint
from ascheduler.framework.extender import ignored_by_scheduler
from ascheduler.http import DEBUG_MODES, parse_address
from ascheduler.locks.keys import LOCK_OBJECTS
from ascheduler.locks.settings import (
    DEFAULT_LEASE_GROUPS,
    DEFAULT_LINGER,
    WHEN_ALONE,
)

#: The argparse groups the flags are shown in (None: the command's own options).
GROUPS: Final[Mapping[str, str]] = {
    "secure serving": "/healthz, /livez, /readyz, /metrics (and /debug/* when authorized) over "
    "TLS, each request authenticated (TokenReview, client certificates) and authorized "
    "(SubjectAccessReview) by the API server, as kube-scheduler's secure port",
    "plain HTTP": "the same endpoints without TLS or authentication, off unless asked for",
    "leader election": "one active replica per Lease; standbys take over within the "
    "lease duration (the config file's leaderElection section does the same)",
    "sharding": "several active instances split the pending pods among themselves (each "
    "binding under the node locks, with --node-lock-policy all and no leader election)",
    "node locks": "binds guarded by an asyncio lock per node under a Node-annotation lock, "
    "so several scheduler instances can share nodes",
}


@dataclass(frozen=True)
class Flag:
    """One flag: how it is parsed, shown and applied."""

    name: str
    stage: Stage
    #: Applies the given value (never None) over `Draft`.
    apply: Callable[[Draft, Any], None]
    #: Where the flag lands (for the reader, and the test that each one does).
    setting: Callable[[SchedulerConfig], Any]
    help: str | None = None
    group: str | None = None
    type: Callable[[str], Any] | None = None
    default: Any = None
    choices: Sequence[str] | None = None
    metavar: str | None = None
    #: repeatable (its values a tuple), or --NAME / --no-NAME.
    action: Literal["store", "append", "switch"] = "store"
    dest: str = ""

    @property
    def key(self) -> str:
        """The argparse destination, and the keyword of `Overrides`."""
        return self.dest or self.name.removeprefix("--").replace("-", "_")

    def add_to(self, parser: argparse._ActionsContainer, *, help: str | None = "") -> None:
        """The option on `parser`, with the row's help unless `help` says another (another
        command's; None: none)."""
        options: dict[str, Any] = {
            "dest": self.key,
            "default": self.default,
            "help": self.help if help == "" else help,
        }
        if self.action == "append":
            options["action"] = "append"
        elif self.action == "switch":
            options["action"] = argparse.BooleanOptionalAction
        if self.type is not None:
            options["type"] = self.type
        if self.choices is not None:
            options["choices"] = self.choices
        if self.metavar is not None:
            options["metavar"] = self.metavar
        parser.add_argument(self.name, **options)


# -- applying each flag ------------------------------------------------------------------


def _set(name: str) -> Callable[[Draft, Any], None]:
    def apply(d: Draft, value: Any) -> None:
        d.changes[name] = value

    return apply


def _scheduler_names(d: Draft, names: Sequence[str]) -> None:
    if d.file_profiles:
        d.problem("--scheduler-name", "the file names its profiles; set schedulerName there")
    ignored = ignored_by_scheduler(d.config.extenders)
    d.changes["profiles"] = tuple(
        ignoring(multipoint(n), ignored) if ignored else multipoint(n) for n in dict.fromkeys(names)
    )


def _binding_concurrency(d: Draft, value: int) -> None:
    if value < 1:
        d.problem("--binding-concurrency", f"must be at least 1, got {value}")
    d.changes["binding_concurrency"] = value


def _emulated_version(d: Draft, value: str) -> None:
    try:
        release = features.parse_emulated_version(value)
    except ValueError as exc:
        d.problem("--emulated-version", str(exc))
        return
    d.changes["emulated_version"] = release
    try:
        d.changes["features"] = features.parse_gates(d.config.feature_gates, release)
    except ValueError as exc:
        d.problem("--feature-gates", str(exc))


def _feature_gates(d: Draft, value: str) -> None:
    release = d.changes.get("emulated_version", d.config.emulated_version)
    try:
        if release is not None:
            d.changes["features"] = features.parse_gates(value, release)
        else:
            # Without --emulated-version the release is the API server's, known only once
            # it is asked (`app.behave_as` parses the gates again there).
            d.changes["features"] = _at_some_release(value)
    except ValueError as exc:
        d.problem("--feature-gates", str(exc))
    d.changes["feature_gates"] = value


def _at_some_release(value: str) -> features.Features:
    """The gates as the default release reads them or, if it refuses them, as the newest
    supported release that accepts them does, for now (the checks of the API server's
    release, dependencies included, are `app.behave_as`'s). ValueError when every release
    refuses them in the same words (a value that is not a bool, a locked gate) or they name a
    gate no release knows; gates the releases refuse each their own way (unknown to one,
    missing a dependency in another) are left to the API server's release, with the default
    release's defaults meanwhile."""
    problems: list[str] = []
    for release in (features.DEFAULT_RELEASE, *reversed(features.SUPPORTED)):
        try:
            return features.parse_gates(value, release)
        except ValueError as exc:
            problems.append(str(exc))
    if len(set(problems)) == 1:
        raise ValueError(problems[0])
    for item in value.split(","):
        name = item.partition("=")[0].strip()
        known = any(features.spec_at(name, r) is not None for r in features.SUPPORTED)
        if name and name not in ("AllAlpha", "AllBeta") and not known:
            raise ValueError(f"unrecognized feature gate: {name}")
    return features.Features.defaults(features.DEFAULT_RELEASE)


def _percentage(d: Draft, value: int) -> None:
    if not 0 <= value <= 100:
        d.problem("--percentage-of-nodes-to-score", f"must be in 0..100, got {value}")
    d.changes["percentage_of_nodes_to_score"] = value


def _http_address(d: Draft, value: str) -> None:
    if value:
        try:
            parse_address(value)
        except ValueError as exc:
            d.problem("--http-address", str(exc))
    d.changes["http_address"] = value or None


def _secure(path: str, convert: Callable[[Any], Any] = lambda v: v) -> Callable[[Draft, Any], None]:
    """Sets one field of the secure serving: `port`, or one of its certificate's
    (`certificate.cert_file`) or its delegated auth's (`auth.token_ttl`)."""
    part, _, name = path.rpartition(".")

    def apply(d: Draft, value: Any) -> None:
        s = d.secure or d.config.secure_serving
        new = convert(value)
        if part:
            new = dataclasses.replace(getattr(s, part), **{name: new})
        d.secure = dataclasses.replace(s, **{part or name: new})

    return apply


def _ttl(flag: str, name: str) -> Callable[[Draft, Any], None]:
    def apply(d: Draft, value: str) -> None:
        try:
            seconds = parse_seconds(value)
        except ValueError as exc:
            d.problem(flag, str(exc))
            return
        _secure(f"auth.{name}")(d, seconds)

    return apply


def _paths(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def _election(name: str) -> Callable[[Draft, Any], None]:
    def apply(d: Draft, value: Any) -> None:
        d.election = dataclasses.replace(d.election, **{name: value})

    return apply


def _lease_duration(d: Draft, lease: float) -> None:
    if lease <= 0:
        d.problem("--leader-elect-lease-duration", f"must be positive, got {lease:g}")
        return
    d.election = dataclasses.replace(
        d.election,
        lease_duration=lease,
        renew_deadline=lease * 2 / 3,
        retry_period=max(lease / 7.5, 0.2),
    )


def _lock_object(d: Draft, value: str) -> None:
    if value == "auto":
        d.on = None
    elif value in LOCK_OBJECTS:
        d.on = value
    else:
        d.problem(
            "--node-lock-object",
            f"must be one of {', '.join(LOCK_OBJECTS)} or auto, got {value!r}",
        )


def _lock_duration(flag: str, name: str) -> Callable[[Draft, Any], None]:
    def apply(d: Draft, value: str) -> None:
        try:
            seconds: dict[str, Any] = {name: parse_seconds(value)}
            d.lock = dataclasses.replace(d.lock, **seconds)
        except ValueError as exc:
            d.problem(flag, str(exc))

    return apply


def _when_alone(d: Draft, value: str) -> None:
    if value in WHEN_ALONE:
        d.lock = dataclasses.replace(d.lock, when_alone=value)
    else:
        d.problem(
            "--node-lock-when-alone", f"must be one of {', '.join(WHEN_ALONE)}, got {value!r}"
        )


def _lease_groups(d: Draft, value: int) -> None:
    d.lease_groups = value


def _lock_key(d: Draft, value: str) -> None:
    d.lock_key = value


def _binding(
    name: str, convert: Callable[[Any], Any] = lambda v: v
) -> Callable[[Draft, Any], None]:
    def apply(d: Draft, value: Any) -> None:
        d.binding[name] = convert(value)

    return apply


def _sharding(name: str) -> Callable[[Draft, Any], None]:
    def apply(d: Draft, value: Any) -> None:
        d.sharding[name] = value

    return apply


def _debug_endpoints(d: Draft, value: str) -> None:
    if value not in DEBUG_MODES:
        d.problem("--debug-endpoints", f"must be one of {', '.join(DEBUG_MODES)}, got {value!r}")
    d.changes["debug_endpoints"] = value


# -- the table -----------------------------------------------------------------------------

FLAGS: Final[tuple[Flag, ...]] = (
    Flag(
        "--kubeconfig",
        "plain",
        _set("kubeconfig"),
        lambda c: c.kubeconfig,
        help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)",
    ),
    Flag(
        "--scheduler-name",
        "plain",
        _scheduler_names,
        lambda c: tuple(p.scheduler_name for p in c.profiles),
        action="append",
        dest="scheduler_names",
        metavar="NAME",
        help="serve this schedulerName with the default plugins (repeatable; default: ascheduler)",
    ),
    Flag(
        "--binding-concurrency",
        "plain",
        _binding_concurrency,
        lambda c: c.binding_concurrency,
        type=int,
        help=f"binding cycles in flight at most (default: {defaults.BINDING_CONCURRENCY})",
    ),
    Flag(
        "--emulated-version",
        "plain",
        _emulated_version,
        lambda c: c.emulated_version,
        metavar="VERSION",
        help="behave as kube-scheduler of this release (1.35, 1.36, 1.37; also kube=1.36) "
        "whatever the API server's (default: the API server's release)",
    ),
    Flag(
        "--feature-gates",
        "plain",
        _feature_gates,
        lambda c: c.features,
        metavar="GATES",
        help="kube-scheduler's feature gates ascheduler knows, e.g. StorageCapacityScoring=true, "
        "over the defaults of the release it behaves as",
    ),
    Flag(
        "--percentage-of-nodes-to-score",
        "plain",
        _percentage,
        lambda c: c.percentage_of_nodes_to_score,
        type=int,
        help="as kube-scheduler's; 0 picks it from the cluster size (a profile's own "
        "percentageOfNodesToScore still wins for that profile)",
    ),
    Flag(
        "--http-address",
        "plain",
        _http_address,
        lambda c: c.http_address,
        group="plain HTTP",
        metavar="HOST:PORT",
        help="serve /metrics, /healthz, /livez, /readyz here, to anyone (default: the config "
        "file's ascheduler.httpAddress, else none; empty for none); a loopback address only, "
        "unless --allow-non-loopback-http",
    ),
    Flag(
        "--allow-non-loopback-http",
        "plain",
        _set("allow_non_loopback_http"),
        lambda c: c.allow_non_loopback_http,
        group="plain HTTP",
        action="switch",
        help="let --http-address be another than a loopback address: anyone who reaches it "
        "reads the metrics (ascheduler.allowNonLoopbackHTTP)",
    ),
    Flag(
        "--bind-address",
        "secure",
        _secure("bind_address"),
        lambda c: c.secure_serving.bind_address,
        group="secure serving",
        default="0.0.0.0",
        help="the secure port's address (default: 0.0.0.0)",
    ),
    Flag(
        "--secure-port",
        "secure",
        _secure("port"),
        lambda c: c.secure_serving.port,
        group="secure serving",
        type=int,
        metavar="PORT",
        help="HTTPS port (default: 10259 for run, 10260 for binder); 0 turns it off",
    ),
    Flag(
        "--tls-cert-file",
        "secure",
        _secure("certificate.cert_file"),
        lambda c: c.secure_serving.certificate.cert_file,
        group="secure serving",
        default="",
        metavar="FILE",
        help="the serving certificate (PEM, with its chain); without it and "
        "--tls-private-key-file, a self-signed one is made at start",
    ),
    Flag(
        "--tls-private-key-file",
        "secure",
        _secure("certificate.key_file"),
        lambda c: c.secure_serving.certificate.key_file,
        group="secure serving",
        default="",
        metavar="FILE",
    ),
    Flag(
        "--cert-dir",
        "secure",
        _secure("certificate.cert_dir"),
        lambda c: c.secure_serving.certificate.cert_dir,
        group="secure serving",
        default="",
        metavar="DIR",
        help="where the self-signed certificate is written (ascheduler.crt, .key) and read "
        "back; default: in memory only",
    ),
    Flag(
        "--client-ca-file",
        "secure",
        _secure("certificate.client_ca_file"),
        lambda c: c.secure_serving.certificate.client_ca_file,
        group="secure serving",
        default="",
        metavar="FILE",
        help="client certificates signed by these CAs authenticate as their common name, "
        "in their organizations as groups",
    ),
    Flag(
        "--authentication-kubeconfig",
        "secure",
        _secure("authentication_kubeconfig"),
        lambda c: c.secure_serving.authentication_kubeconfig,
        group="secure serving",
        metavar="FILE",
        help="the API server that reviews tokens (default: the scheduler's kubeconfig)",
    ),
    Flag(
        "--authorization-kubeconfig",
        "secure",
        _secure("authorization_kubeconfig"),
        lambda c: c.secure_serving.authorization_kubeconfig,
        group="secure serving",
        metavar="FILE",
        help="the API server that reviews access (default: the scheduler's kubeconfig)",
    ),
    Flag(
        "--authorization-always-allow-paths",
        "secure",
        _secure("auth.always_allow_paths", _paths),
        lambda c: c.secure_serving.auth.always_allow_paths,
        group="secure serving",
        default=",".join(DEFAULT_ALWAYS_ALLOW_PATHS),
        metavar="PATHS",
        help="paths anyone may get, without credentials (a trailing * matches a prefix; "
        "default: %(default)s)",
    ),
    Flag(
        "--authentication-token-webhook-cache-ttl",
        "secure",
        _ttl("--authentication-token-webhook-cache-ttl", "token_ttl"),
        lambda c: c.secure_serving.auth.token_ttl,
        group="secure serving",
        default="10s",
        metavar="DURATION",
        help="how long a TokenReview's answer is reused (default: 10s)",
    ),
    Flag(
        "--authorization-webhook-cache-authorized-ttl",
        "secure",
        _ttl("--authorization-webhook-cache-authorized-ttl", "allowed_ttl"),
        lambda c: c.secure_serving.auth.allowed_ttl,
        group="secure serving",
        default="10s",
        metavar="DURATION",
        help="how long an allowing SubjectAccessReview's answer is reused (default: 10s)",
    ),
    Flag(
        "--authorization-webhook-cache-unauthorized-ttl",
        "secure",
        _ttl("--authorization-webhook-cache-unauthorized-ttl", "denied_ttl"),
        lambda c: c.secure_serving.auth.denied_ttl,
        group="secure serving",
        default="10s",
        metavar="DURATION",
        help="how long a denying SubjectAccessReview's answer is reused (default: 10s)",
    ),
    Flag(
        "--leader-elect",
        "election",
        _election("leader_elect"),
        lambda c: c.leader_election.leader_elect,
        group="leader election",
        action="switch",
        help="take part in leader election (without a file, off unless given; "
        "--no-leader-elect turns off a file's leaderElect)",
    ),
    Flag(
        "--leader-elect-resource-namespace",
        "election",
        _election("resource_namespace"),
        lambda c: c.leader_election.resource_namespace,
        group="leader election",
        help=f"default: {defaults.LEASE_NAMESPACE}",
    ),
    Flag(
        "--leader-elect-resource-name",
        "election",
        _election("resource_name"),
        lambda c: c.leader_election.resource_name,
        group="leader election",
        help=f"default: {defaults.LEASE_NAME}",
    ),
    Flag(
        "--leader-elect-lease-duration",
        "election",
        _lease_duration,
        lambda c: c.leader_election.lease_duration,
        group="leader election",
        type=float,
        metavar="SECONDS",
        help=f"default: {defaults.LEASE_DURATION:g}; also sets the renew deadline to 2/3 of it "
        "and the retry period to 1/7.5 of it (at least 0.2), overriding the file's",
    ),
    Flag(
        "--node-lock-object",
        "locks",
        _lock_object,
        lambda c: c.binding.lock.lock_object,
        group="node locks",
        choices=("lease", "node", "auto"),
        help="where a node's lock is written: a Lease per node (ascheduler-node-NAME in the "
        "lease namespace) or the Node itself; auto (the default): a Lease, but the Node "
        "under HAMi's key",
    ),
    Flag(
        "--node-lock-timeout",
        "locks",
        _lock_duration("--node-lock-timeout", "timeout"),
        lambda c: c.binding.lock.timeout,
        group="node locks",
        metavar="DURATION",
        help="a lock older than this is stale (default: $ASCHEDULER_NODELOCK_EXPIRE, else 5m)",
    ),
    Flag(
        "--node-lock-linger",
        "locks",
        _lock_duration("--node-lock-linger", "linger"),
        lambda c: c.binding.lock.linger,
        group="node locks",
        metavar="DURATION",
        help="how long a node's lock stays taken after its binds, for the next ones (another "
        "instance asking for it ends that at once; 0: release at once; "
        f"default {DEFAULT_LINGER:g}s)",
    ),
    Flag(
        "--node-lock-when-alone",
        "locks",
        _when_alone,
        lambda c: c.binding.lock.when_alone,
        group="node locks",
        choices=("skip", "lock"),
        help="with locks on Leases, while no other instance shares the nodes: skip the node "
        "locks (the default; they engage as soon as another instance registers) or lock",
    ),
    Flag(
        "--node-lock-lease-groups",
        "locks",
        _lease_groups,
        lambda c: c.binding.lock.lease_groups,
        group="node locks",
        type=int,
        metavar="N",
        help="with locks on Leases: share one lock Lease among each of N groups of nodes "
        "(fewer lock writes in a burst, more waiting between binds to one group; every "
        f"instance sharing the nodes should use the same N; default {DEFAULT_LEASE_GROUPS}); "
        "0: a Lease per node",
    ),
    Flag(
        "--node-lock-key",
        "locks",
        _lock_key,
        lambda c: c.binding.lock.key,
        group="node locks",
        help="the Node annotation (hami.io/mutex.lock interoperates with HAMi)",
    ),
    Flag(
        "--binding",
        "binding",
        _binding("mode"),
        lambda c: c.binding.mode,
        dest="binding_mode",
        choices=MODES,
        help="direct (default): the scheduler binds each pod; bindrequest: it writes a "
        "BindRequest and `ascheduler binder` binds the pod (placements survive restarts)",
    ),
    Flag(
        "--node-lock-policy",
        "binding",
        _binding("policy"),
        lambda c: c.binding.policy,
        group="node locks",
        choices=POLICIES,
        help="which binds lock their node: pods requesting a device resource "
        "(default), all, or none",
    ),
    Flag(
        "--device-resource",
        "binding",
        _binding("device_resources", frozenset),
        lambda c: c.binding.device_resources,
        group="node locks",
        action="append",
        dest="device_resources",
        metavar="NAME",
        help="a device resource for the `devices` policy (repeatable; default: nvidia.com/gpu)",
    ),
    Flag(
        "--annotation-prefix",
        "binding",
        _binding("annotation_prefix"),
        lambda c: c.binding.annotation_prefix,
        group="node locks",
        help="prefix of the pod's bind-phase and bind-time annotations",
    ),
    Flag(
        "--sharding",
        "sharding",
        _sharding("enabled"),
        lambda c: c.sharding.enabled,
        group="sharding",
        action="switch",
        help="split the pending pods with the other instances of the sharding group, each "
        "holding a Lease in the lease namespace (ascheduler.sharding.enabled; default off)",
    ),
    Flag(
        "--sharding-group",
        "sharding",
        _sharding("group"),
        lambda c: c.sharding.group,
        group="sharding",
        metavar="NAME",
        help="the instances splitting the pods among themselves (default: ascheduler)",
    ),
    Flag(
        "--debug-endpoints",
        "debug",
        _debug_endpoints,
        lambda c: c.debug_endpoints,
        choices=("off", "loopback", "authorized"),
        help="serve /debug/pods/NS/NAME, /debug/queue and /debug/cache: loopback (on the "
        "plain HTTP listener, which must be on a loopback address; no token) or authorized "
        "(on the secure port, to users the API server authorizes for get on the path); "
        "default: off",
    ),
)
_BY_KEY: Final = {flag.key: flag for flag in FLAGS}


def flag(key: str) -> Flag:
    """The row of the flag whose key is `key` (`node_lock_key`)."""
    return _BY_KEY[key]


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Every flag of the table on `parser`, each in its group."""
    groups = {
        title: parser.add_argument_group(title, description)
        for title, description in GROUPS.items()
    }
    for flag in FLAGS:
        flag.add_to(parser if flag.group is None else groups[flag.group])


class Overrides:
    """The flags given on a command line, by their keys (`Flag.key`, e.g. `node_lock_key`);
    a flag left out or None changes nothing."""

    __slots__ = ("values",)

    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - _BY_KEY.keys())
        if unknown:
            raise TypeError(f"not a flag: {', '.join(unknown)}")
        self.values: dict[str, Any] = {
            key: tuple(value) if _BY_KEY[key].action == "append" else value
            for key, value in values.items()
            if value is not None
        }

    @classmethod
    def from_args(cls, args: argparse.Namespace, **fallbacks: Any) -> Overrides:
        """The table's flags in `args` (parsed by a parser `add_flags` filled); `fallbacks`
        stand for flags left out (the secure port, which differs by command)."""
        values = {flag.key: getattr(args, flag.key, None) for flag in FLAGS}
        for key, value in fallbacks.items():
            if values.get(key) is None:
                values[key] = value
        return cls(**values)

    def __repr__(self) -> str:
        return f"Overrides({', '.join(f'{k}={v!r}' for k, v in self.values.items())})"


# -- applying them ---------------------------------------------------------------------------


def resolve(path: str | None, overrides: Overrides, registry: Registry) -> SchedulerConfig:
    """The file at `path` (or `NO_FILE`), then `overrides`; ConfigError naming every problem,
    the file's by their paths and the flags' by their names."""
    document = read(path) if path else dict(NO_FILE)
    # The file is read as the release the flags name reads it (`--emulated-version`, the
    # gates), else as the default release's; `app.behave_as` checks it again at the API
    # server's.
    release_flags = {
        k: v for k, v in overrides.values.items() if k in ("emulated_version", "feature_gates")
    }
    gates = apply(SchedulerConfig(), Overrides(**release_flags)).features
    config = parse(document, registry, gates)
    named = isinstance(document, Mapping) and bool(document.get("profiles"))
    return apply(config, overrides, file_profiles=named)


def apply(config: SchedulerConfig, o: Overrides, *, file_profiles: bool = False) -> SchedulerConfig:
    """`config` with the flags in `o` applied; `file_profiles` says the file named profiles
    (which `--scheduler-name` must not silently replace)."""
    d = Draft(config, file_profiles)
    for stage in STAGES:
        for flag in FLAGS:
            if flag.stage == stage and flag.key in o.values:
                flag.apply(d, o.values[flag.key])
        FINISH[stage](d)
    if d.problems:
        raise ConfigError(d.problems)
    out = dataclasses.replace(config, **d.changes)
    found = [p for p in (plain_problem(out), debug_problem(out)) if p]
    found += sharding_problems(out)
    if found:
        raise ConfigError(found)
    return out
