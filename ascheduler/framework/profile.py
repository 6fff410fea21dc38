"""A profile as the framework takes it: the plugins of each extension point and their args,
before they are built (`Framework` builds them; `ascheduler.config` reads them from a
`KubeSchedulerConfiguration`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from ascheduler.features import Features
from ascheduler.framework.interface import ExtensionPoint, PluginSet
from ascheduler.framework.registry import Registry


@dataclass(frozen=True)
class PluginRef:
    name: str
    weight: int = 1


@dataclass(frozen=True)
class MultiPointChanges:
    """A file's `plugins.multiPoint`: merged onto the default profile of the release the
    scheduler behaves as, once it is known (`multipoint_plugins`)."""

    enabled: tuple[PluginRef, ...] = ()
    disabled: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ProfileSpec:
    """A profile: the plugins of each extension point, in order, and their arguments.

    `points["multiPoint"]` is the list as given; left out, the default profile, changed by
    `multi_point` when a file changes it."""

    scheduler_name: str
    points: Mapping[PluginSet, Sequence[PluginRef]] = field(default_factory=dict)
    #: Raw `pluginConfig` args by plugin name (decoded by each plugin's registration).
    args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Plugins removed from single extension points (`*`: every multiPoint plugin there).
    disabled: Mapping[ExtensionPoint, frozenset[str]] = field(default_factory=dict)
    #: Where each plugin's args came from, for error messages (`profiles[0].pluginConfig[1]`).
    arg_paths: Mapping[str, str] = field(default_factory=dict)
    #: Prefix of error paths (`profiles[0].`).
    path: str = ""
    #: The profile's own percentageOfNodesToScore (None: the global one).
    percentage_of_nodes_to_score: int | None = None
    #: A file's multiPoint, merged onto the defaults when the profile is built.
    multi_point: MultiPointChanges | None = None


def multipoint(
    scheduler_name: str,
    plugins: Sequence[PluginRef] | None = None,
    args: Mapping[str, Mapping[str, Any]] | None = None,
) -> ProfileSpec:
    """Every listed plugin (None: the default profile's) at every extension point it
    implements (resolved when the profile is built)."""
    points: dict[PluginSet, Sequence[PluginRef]] = (
        {} if plugins is None else {"multiPoint": tuple(plugins)}
    )
    return ProfileSpec(scheduler_name, points, dict(args or {}))


def default_plugins(registry: Registry, features: Features | None = None) -> tuple[PluginRef, ...]:
    """The registry's default profile at a release, with its gates (kube-scheduler's
    `getDefaultPlugins` and `applyFeatureGates`, restricted to what the registry holds):
    registration order, a plugin whose registration names a `default_gate` only while that
    gate is on, and from 1.37 NodeName before NodeUnschedulable."""
    gates = features if features is not None else Features.defaults()
    refs = [
        PluginRef(name, weight)
        for name, weight, gate in registry.default_profile()
        if gate is None or gate in gates
    ]
    names = [r.name for r in refs]
    if gates.since(1, 37) and "NodeName" in names and "NodeUnschedulable" in names:
        first, second = names.index("NodeUnschedulable"), names.index("NodeName")
        if first < second:
            refs[first], refs[second] = refs[second], refs[first]
    return tuple(refs)


def merge(
    defaults: Sequence[PluginRef], enabled: Sequence[PluginRef], disabled: Set[str]
) -> tuple[PluginRef, ...]:
    """kube-scheduler's `mergePluginSet`: the defaults not disabled, each replaced in place by
    the last enabled entry naming it, then every other enabled entry in order (a name listed
    twice stays twice, for the framework to refuse)."""
    last = {ref.name: i for i, ref in enumerate(enabled)}
    replacing: set[int] = set()
    merged: list[PluginRef] = []
    if "*" not in disabled:
        for ref in defaults:
            if ref.name in disabled:
                continue
            if ref.name in last:
                replacing.add(last[ref.name])
                ref = enabled[last[ref.name]]
            merged.append(ref)
    merged.extend(ref for i, ref in enumerate(enabled) if i not in replacing)
    return tuple(merged)


def multipoint_plugins(
    spec: ProfileSpec, registry: Registry, features: Features | None = None
) -> tuple[PluginRef, ...]:
    """The profile's multiPoint plugins at a release: as listed, else the defaults with the
    file's changes merged on."""
    listed = spec.points.get("multiPoint")
    if listed is not None:
        return tuple(listed)
    defaults = default_plugins(registry, features)
    if spec.multi_point is None:
        return defaults
    return merge(defaults, spec.multi_point.enabled, spec.multi_point.disabled)
