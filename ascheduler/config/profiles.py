"""A `KubeSchedulerConfiguration`'s profiles, merged onto the default one as kube-scheduler's are.

kube-scheduler (`apis/config/v1/default_plugins.go`, `mergePluginSet`) merges each plugin set of
a profile onto its defaults, and `framework/runtime` then expands `multiPoint`. The defaults
are a release's (`default_plugins`), so multiPoint's changes are kept here and merged when the
profile is built, once the release is known (`multipoint_plugins`):

* `multiPoint`: the default plugins, less those disabled (`*`: all of them); an enabled entry
  naming a default plugin *replaces* it in place, weight and all (left out, the weight is 0,
  which a Score plugin reads as 1: `multiPoint.enabled: [{name: TaintToleration}]` scores
  taints at weight 1, not the default 3); the other enabled entries follow in their order.
  A plugin both disabled and enabled there moves to the end.
* every other point starts empty: its `enabled` is its list, its `disabled` keeps multiPoint's
  plugins (`*`: all of them) away from that point only.
* unknown names in `disabled` are ignored, as kube-scheduler ignores them (a file written for
  kube-scheduler may disable a plugin ascheduler does not have); unknown names in `enabled`
  are errors.

Duplicates, the order at each point and the weights are the framework's (`Framework`), which
follows kube-scheduler's `expandMultiPointPlugins` and `getScoreWeights`.

A release reads a profile as its own: the plugin sets its `Plugins` type has (`RELEASE_POINTS`:
`placementGenerate` and `placementScore` from 1.36, `podGroupPostFilter` from 1.37, the
workload scheduling points) are fields there and unknown before. `podGroupPostFilter` is an
extension point of ascheduler's (DynamicResources and DefaultPreemption implement it); it has no
plugin at the placement points, so a set there may disable plugins but enable none. Plugin
args are checked by the release's rules (`Registration.check`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ascheduler.config.validation import Problems
from ascheduler.features import Features, Release
from ascheduler.framework import (
    EXTENSION_POINTS,
    POINT_SINCE,
    ConfigError,
    MultiPointChanges,
    PluginRef,
    ProfileSpec,
    Registry,
)
from ascheduler.framework.interface import ExtensionPoint, PluginSet

#: A profile's fields.
PROFILE_FIELDS: Final = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
INT32: Final = (-(2**31), 2**31 - 1)
#: `Plugins` fields a release added, with the release: the extension points of workload
#: scheduling; ascheduler has plugins at `podGroupPostFilter` only, whose release is the
#: framework's (`POINT_SINCE`).
RELEASE_POINTS: Final[Mapping[str, Release]] = {
    "placementGenerate": Release(1, 36),
    "placementScore": Release(1, 36),
    **{point: Release(*since) for point, since in POINT_SINCE.items()},
}


def release_points(features: Features) -> frozenset[str]:
    """The `RELEASE_POINTS` the release of `features` has."""
    return frozenset(k for k, since in RELEASE_POINTS.items() if features.release >= since)


def plugin_set(
    p: Problems, raw: Any, path: str, registry: Registry
) -> tuple[list[PluginRef], set[str]]:
    """A `PluginSet`'s enabled entries (weight 0 where left out) and disabled names."""
    body = p.obj(raw, path, {"enabled", "disabled"})
    enabled: list[PluginRef] = []
    for i, item in enumerate(p.seq(body.get("enabled"), f"{path}.enabled")):
        entry = p.obj(item, f"{path}.enabled[{i}]", {"name", "weight"})
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            p.add(f"{path}.enabled[{i}].name", "required")
            continue
        if name not in registry:
            p.add(f"{path}.enabled[{i}].name", f'unknown plugin "{name}"')
            continue
        # kube-scheduler takes any int32 here; the framework refuses totals that overflow.
        weight = p.int_(
            entry.get("weight"), f"{path}.enabled[{i}].weight", 0, low=INT32[0], high=INT32[1]
        )
        enabled.append(PluginRef(name, weight))
    disabled: set[str] = set()
    for i, item in enumerate(p.seq(body.get("disabled"), f"{path}.disabled")):
        entry = p.obj(item, f"{path}.disabled[{i}]", {"name"})
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            p.add(f"{path}.disabled[{i}].name", "required")
        else:
            disabled.add(name)
    return enabled, disabled


def profile(
    p: Problems,
    raw: Any,
    path: str,
    registry: Registry,
    *,
    default_name: str | None,
    features: Features | None = None,
) -> ProfileSpec:
    """One profile, merged onto the default; `default_name` None: `schedulerName` is required
    (kube-scheduler defaults it only when there is a single profile)."""
    body = p.obj(raw, path, PROFILE_FIELDS)
    name = body.get("schedulerName", default_name)
    if not isinstance(name, str) or not name:
        p.add(f"{path}.schedulerName", "required")
        name = f"{path}.schedulerName"
    percentage = None
    if body.get("percentageOfNodesToScore") is not None:
        percentage = p.int_(
            body.get("percentageOfNodesToScore"),
            f"{path}.percentageOfNodesToScore",
            0,
            low=0,
            high=100,
        )
    gates = features if features is not None else Features.defaults()
    points, disabled, multi = _plugins(p, body, path, registry, gates)
    args, arg_paths = _plugin_config(p, body, path, registry, gates)
    return ProfileSpec(
        name,
        points,
        args,
        disabled=disabled,
        arg_paths=arg_paths,
        path=f"{path}.",
        percentage_of_nodes_to_score=percentage,
        multi_point=multi,
    )


def _plugins(
    p: Problems, body: Mapping[str, Any], path: str, registry: Registry, features: Features
) -> tuple[
    dict[PluginSet, Sequence[PluginRef]], dict[ExtensionPoint, frozenset[str]], MultiPointChanges
]:
    """`plugins`: each point's own list, what each point disables, and multiPoint's changes
    to the defaults (merged once the release is known: `multipoint_plugins`)."""
    extra = release_points(features)
    # The points ascheduler has plugins at, as far as this release has them.
    known = [p for p in EXTENSION_POINTS if p not in RELEASE_POINTS or p in extra]
    plugins = p.obj(body.get("plugins"), f"{path}.plugins", {"multiPoint", *known, *extra})
    for point in sorted((extra - EXTENSION_POINTS.keys()) & plugins.keys()):
        where = f"{path}.plugins.{point}"
        enabled, _ = plugin_set(p, plugins[point], where, registry)
        for i, ref in enumerate(enabled):
            p.add(
                f"{where}.enabled[{i}].name",
                f"{ref.name!r} does not extend {point}: ascheduler has no {point} plugins",
            )
    multi_enabled, multi_disabled = plugin_set(
        p, plugins.get("multiPoint"), f"{path}.plugins.multiPoint", registry
    )
    multi = MultiPointChanges(tuple(multi_enabled), frozenset(multi_disabled))
    points: dict[PluginSet, Sequence[PluginRef]] = {}
    disabled: dict[ExtensionPoint, frozenset[str]] = {}
    for point in known:
        if point not in plugins:
            continue
        enabled, off = plugin_set(p, plugins[point], f"{path}.plugins.{point}", registry)
        points[point] = tuple(enabled)
        if off:
            disabled[point] = frozenset(off)
    return points, disabled, multi


def _plugin_config(
    p: Problems, body: Mapping[str, Any], path: str, registry: Registry, features: Features
) -> tuple[dict[str, Mapping[str, Any]], dict[str, str]]:
    """`pluginConfig`: each known plugin's raw args, checked, and where they came from."""
    args: dict[str, Mapping[str, Any]] = {}
    arg_paths: dict[str, str] = {}
    seen: set[str] = set()
    for i, item in enumerate(p.seq(body.get("pluginConfig"), f"{path}.pluginConfig")):
        where = f"{path}.pluginConfig[{i}]"
        entry = p.obj(item, where, {"name", "args"})
        plugin = entry.get("name")
        if not isinstance(plugin, str) or not plugin:
            p.add(f"{where}.name", "required")
            continue
        if plugin in seen:
            p.add(f"{where}.name", f"duplicate config for plugin {plugin!r}")
            continue
        seen.add(plugin)
        raw_args = entry.get("args")
        if raw_args is not None and not isinstance(raw_args, Mapping):
            p.add(f"{where}.args", "expected an object")
            continue
        registration = registry.get(plugin)
        if registration is None:
            continue  # kube-scheduler keeps args of plugins it does not know, unused
        # Checked whether or not the plugin is enabled, as kube-scheduler decodes and
        # validates every plugin's args it knows.
        try:
            registration.decode_args(raw_args or {}, f"{where}.args", features)
        except ConfigError as exc:
            p.items.extend(exc.problems)
            continue
        args[plugin] = raw_args or {}
        arg_paths[plugin] = f"{where}.args"
    return args, arg_paths


def queue_sort_problems(profiles: Sequence[ProfileSpec]) -> list[str]:
    """kube-scheduler's `validateCommonQueueSort`: every profile sorts its queue the same way
    (the queue is shared), so their `queueSort` plugin sets must be the same."""
    if not profiles:
        return []
    first = profiles[0]
    canon = (tuple(first.points.get("queueSort", ())), first.disabled.get("queueSort"))
    return [
        f"{spec.path}plugins.queueSort: must be the same for all profiles"
        for spec in profiles[1:]
        if (tuple(spec.points.get("queueSort", ())), spec.disabled.get("queueSort")) != canon
    ]


def ignoring(spec: ProfileSpec, resources: tuple[str, ...]) -> ProfileSpec:
    """`spec` with NodeResourcesFit ignoring `resources`: kube-scheduler gives it the
    resources extenders manage and the scheduler ignores, in every profile."""
    args = dict(spec.args)
    args["NodeResourcesFit"] = {
        **args.get("NodeResourcesFit", {}),
        "ignoredResources": list(resources),
    }
    return dataclasses.replace(spec, args=args)
