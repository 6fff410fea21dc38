"""A profile as the framework takes it: the plugins of each extension point and their args,
before they are built (`Framework` builds them; `ascheduler.config` reads them from a
`KubeSchedulerConfiguration`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ascheduler.framework.interface import ExtensionPoint, PluginSet
from ascheduler.framework.registry import Registry


@dataclass(frozen=True)
class PluginRef:
    name: str
    weight: int = 1


@dataclass(frozen=True)
class ProfileSpec:
    """A profile: the plugins of each extension point, in order, and their arguments.

    `points["multiPoint"]` left out means the registry's default profile."""

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


def default_plugins(registry: Registry) -> tuple[PluginRef, ...]:
    """The registry's default profile (kube-scheduler's, restricted to what it holds)."""
    return tuple(PluginRef(name, weight) for name, weight in registry.default_profile())
