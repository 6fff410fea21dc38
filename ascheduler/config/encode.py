"""The other way: a `SchedulerConfig` written back as the document `decode.parse` reads, every
default filled in (`ascheduler config defaults`), as kube-scheduler's `--write-config-to`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ascheduler.config.defaults import API_VERSION, KIND
from ascheduler.config.types import SchedulerConfig
from ascheduler.features import Features
from ascheduler.framework import Handle, ProfileSpec, Registry, multipoint_plugins
from ascheduler.framework.args import encode
from ascheduler.framework.runtime import Framework


def _has_fields(args: Any) -> bool:
    return dataclasses.is_dataclass(args) and bool(dataclasses.fields(args))


def to_document(config: SchedulerConfig, registry: Registry) -> dict[str, Any]:
    """The effective configuration, every default filled in, as a document `parse` accepts."""
    le = config.leader_election
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
        "profiles": [_profile(spec, registry, config.features) for spec in config.profiles],
        "ascheduler": _own(config),
    }


def _profile(spec: ProfileSpec, registry: Registry, features: Features) -> dict[str, Any]:
    """A profile's plugin sets as merged at the release `features` are of, and every enabled
    plugin's arguments, defaults filled in, as its own type decodes them."""
    refs = multipoint_plugins(spec, registry, features)
    plugins: dict[str, Any] = {
        "multiPoint": {"enabled": [{"name": r.name, "weight": r.weight} for r in refs]}
    }
    for point, listed in spec.points.items():
        if point != "multiPoint":
            plugins.setdefault(point, {})["enabled"] = [
                {"name": r.name, "weight": r.weight} for r in listed
            ]
    for point, names in spec.disabled.items():
        plugins.setdefault(point, {})["disabled"] = [{"name": n} for n in sorted(names)]
    fw = Framework(spec, registry, Handle(features=features))
    args = {name: encode(value) for name, value in fw.args.items() if _has_fields(value)}
    return {
        "schedulerName": spec.scheduler_name,
        "plugins": plugins,
        "pluginConfig": [{"name": n, "args": a} for n, a in args.items()],
    }


def _own(config: SchedulerConfig) -> dict[str, Any]:
    """ascheduler's own section."""
    lock = config.binding.lock
    return {
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
        "sharding": {
            "enabled": config.sharding.enabled,
            "group": config.sharding.group,
            "memberDuration": f"{config.sharding.member_duration:g}s",
        },
    }
