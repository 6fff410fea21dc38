"""What a configuration is once read: `SchedulerConfig` and its parts, as kube-scheduler's
`apis/config/types.go` are what its versioned files decode into.

Every field's default is `defaults`'; the file is read into these by `decode`, and the flags
are applied over them by `flags`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ascheduler import features
from ascheduler.binding.binder import BindSettings
from ascheduler.config import defaults
from ascheduler.framework import ProfileSpec, multipoint
from ascheduler.framework.extender import ExtenderConfig
from ascheduler.http import SecureServing
from ascheduler.queue import QueueSettings
from ascheduler.shards import ShardSettings


@dataclass(frozen=True)
class LeaderElection:
    leader_elect: bool = True
    lease_duration: float = defaults.LEASE_DURATION
    renew_deadline: float = defaults.RENEW_DEADLINE
    retry_period: float = defaults.RETRY_PERIOD
    resource_name: str = defaults.LEASE_NAME
    resource_namespace: str = defaults.LEASE_NAMESPACE


@dataclass(frozen=True)
class SchedulerConfig:
    """Everything `ascheduler run` runs with: the file (or its defaults), then the flags."""

    profiles: tuple[ProfileSpec, ...] = (multipoint(defaults.DEFAULT_SCHEDULER_NAME),)
    percentage_of_nodes_to_score: int = defaults.PERCENTAGE_OF_NODES_TO_SCORE
    queue: QueueSettings = field(default_factory=QueueSettings)
    kubeconfig: str | None = None
    #: The kubeconfig context to use (None: its current context).
    context: str | None = None
    #: None: no client-side limit (kube-scheduler defaults to 50; set it to get one).
    qps: float | None = None
    burst: int = defaults.BURST
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    binding: BindSettings = field(default_factory=BindSettings)
    binding_concurrency: int = defaults.BINDING_CONCURRENCY
    #: Several active instances splitting the pending pods (off by default).
    sharding: ShardSettings = field(default_factory=ShardSettings)
    #: The plain HTTP listener, with no authentication (None: none, the default).
    http_address: str | None = None
    #: Whether `http_address` may be another than a loopback address.
    allow_non_loopback_http: bool = False
    #: The secure port, its certificate and its delegated authentication and authorization
    #: (flags only, as kube-scheduler's).
    secure_serving: SecureServing = field(default_factory=SecureServing)
    #: `/debug/...`: off, loopback (on the plain listener, which must be on loopback) or
    #: authorized (on the secure port, to users the API server authorizes).
    debug_endpoints: str = defaults.DEBUG_ENDPOINTS
    #: Connections of the client for writes (binds, events, locks): HTTP/1.1 carries one
    #: request in flight per connection, and each new one costs a TLS handshake of the
    #: client's CPU and the API server's when a burst first needs it (benchmarks/README.md
    #: measures it). Fewer save that CPU; more keep binds flowing when the API server is
    #: slow to answer.
    write_pool: int = defaults.WRITE_CONNECTIONS
    #: How long a graceful stop waits for binding cycles in flight.
    shutdown_grace: float = defaults.SHUTDOWN_GRACE
    #: kube-scheduler's HTTP extenders, consulted after the plugins.
    extenders: tuple[ExtenderConfig, ...] = ()
    #: Whether the file named `nodeLock.leaseGroups`: if not, the number follows where the
    #: flags put the locks (`default_lease_groups`).
    lease_groups_named: bool = False
    #: `--feature-gates` as given: applied to the defaults of the release ascheduler behaves
    #: as, which is known once the API server is asked (`app.build`).
    feature_gates: str = ""
    #: `--emulated-version`: the release to behave as whatever the API server's (None: the
    #: API server's).
    emulated_version: features.Release | None = None
    #: The release and the gates on. Until the API server is asked, at `emulated_version`
    #: or the default release; `app.build` sets it for the cluster's.
    features: features.Features = field(default_factory=features.Features.defaults)
