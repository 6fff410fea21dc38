"""A profile's plugins built and placed at their extension points, as kube-scheduler's
`NewFramework` does: each enabled plugin built once from its registration and decoded
arguments, each point's list as `updatePluginList` and `expandMultiPointPlugins` order it,
the Score weights as `getScoreWeights` gives them, and the rules every profile keeps (one
QueueSort, at least one Bind). Every problem is collected, with its path, into one
ConfigError.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ascheduler.framework.errors import ConfigError
from ascheduler.framework.handle import Handle
from ascheduler.framework.interface import (
    EXTENSION_POINTS,
    MAX_NODE_SCORE,
    POINT_SINCE,
    ExtensionPoint,
    Plugin,
    ScorePlugin,
)
from ascheduler.framework.registry import Registry

if TYPE_CHECKING:
    from ascheduler.framework.profile import PluginRef, ProfileSpec

_MAX_TOTAL_SCORE: Final = 2**63 - 1  # kube-scheduler's MaxTotalScore (math.MaxInt64)


def _int64(value: int) -> int:
    """`value` wrapped into int64, as Go's arithmetic leaves it."""
    return (value + 2**63) % 2**64 - 2**63


@dataclass
class Assembly:
    """A profile's plugins: by name, with their decoded arguments, at each point, weighed."""

    plugins: dict[str, Plugin] = field(default_factory=dict)
    #: Each plugin's decoded arguments (what `config defaults` prints).
    args: dict[str, Any] = field(default_factory=dict)
    points: dict[ExtensionPoint, list[Plugin]] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)


def assemble(
    spec: ProfileSpec, registry: Registry, handle: Handle, multi: Sequence[PluginRef]
) -> Assembly:
    """`spec`'s plugins, `multi` its multiPoint list (the defaults filled in); ConfigError
    naming every problem."""
    return _Assembler(spec, registry, handle, tuple(multi)).run()


class _Assembler:
    def __init__(
        self,
        spec: ProfileSpec,
        registry: Registry,
        handle: Handle,
        multi: tuple[PluginRef, ...],
    ) -> None:
        self.spec = spec
        self.registry = registry
        self.handle = handle
        self.multi = multi
        self.out = Assembly()
        self.problems: list[str] = []
        self.failed: set[str] = set()

    def run(self) -> Assembly:
        for i, ref in enumerate(self.multi):
            self.instance(ref, f"plugins.multiPoint.enabled[{i}]")
        features = self.handle.features
        for point, interface in EXTENSION_POINTS.items():
            since = POINT_SINCE.get(point)
            if since is not None and not features.since(*since):
                self.out.points[point] = []  # not a point of this release
                continue
            self.out.points[point] = self.expand(point, interface)
        self.weigh()
        if not self.problems:
            self.check_required()
        if self.problems:
            raise ConfigError(self.problems)
        return self.out

    def instance(self, ref: PluginRef, path: str) -> Plugin | None:
        """The plugin `ref` names, built once (None: it could not be)."""
        plugins = self.out.plugins
        if ref.name in plugins or ref.name in self.failed:
            return plugins.get(ref.name)
        spec = self.spec
        registration = self.registry.get(ref.name)
        if registration is None:
            self.problems.append(f'{spec.path}{path}.name: unknown plugin "{ref.name}"')
            self.failed.add(ref.name)
            return None
        where = spec.arg_paths.get(ref.name, f"{spec.path}pluginConfig[{ref.name}].args")
        try:
            args = registration.decode_args(spec.args.get(ref.name), where, self.handle.features)
            plugin = registration.build(args, self.handle)
        except ConfigError as exc:
            self.problems.extend(exc.problems)
            self.failed.add(ref.name)
            return None
        plugins[ref.name] = plugin
        self.out.args[ref.name] = args
        return plugin

    def expand(self, point: ExtensionPoint, interface: type[Any]) -> list[Plugin]:
        """kube-scheduler's updatePluginList, then expandMultiPointPlugins: the point's
        own list, then multiPoint's plugins merged in."""
        own = self.own_entries(point, interface)
        off = self.spec.disabled.get(point, frozenset())
        overrides: set[str] = set()
        expanded: list[str] = []
        if "*" not in off:
            for ref in self.multi:
                plugin = self.out.plugins.get(ref.name)
                if plugin is None or not isinstance(plugin, interface) or ref.name in off:
                    continue
                if ref.name in own:
                    overrides.add(ref.name)  # the point's own entry says how
                elif ref.name in expanded:
                    # No index: the merged list's is not the file's.
                    twice = (
                        f"{self.spec.path}plugins.multiPoint.enabled: plugin {ref.name!r} is "
                        f"enabled twice"
                    )
                    if twice not in self.problems:
                        self.problems.append(twice)
                else:
                    expanded.append(ref.name)
        # The point's entries that override multiPoint's first, then multiPoint's, then
        # the point's other entries, as kube-scheduler orders them.
        order = (
            [n for n in own if n in overrides] + expanded + [n for n in own if n not in overrides]
        )
        return [self.out.plugins[n] for n in order]

    def own_entries(self, point: ExtensionPoint, interface: type[Any]) -> list[str]:
        """The point's own enabled plugins; those enabled where only kube-scheduler's
        version of the plugin runs are accepted and left out (inert)."""
        own: list[str] = []
        inert: list[str] = []
        for i, ref in enumerate(self.spec.points.get(point, ())):
            plugin = self.instance(ref, f"plugins.{point}.enabled[{i}]")
            if plugin is None:
                continue
            where = f"{self.spec.path}plugins.{point}.enabled[{i}].name"
            if ref.name in own or ref.name in inert:
                self.problems.append(f"{where}: plugin {ref.name!r} is already enabled at {point}")
            elif isinstance(plugin, interface):
                own.append(ref.name)
            elif point in self.registry[ref.name].kube_points:
                inert.append(ref.name)
            else:
                self.problems.append(f"{where}: plugin {ref.name!r} does not implement {point}")
        return own

    def weigh(self) -> None:
        """kube-scheduler's getScoreWeights: the Score point's own entry wins over
        multiPoint's; a weight left out (0) is 1. Its overflow check runs in int64, where a
        negative weight wraps the remaining room: a negative weight followed by any other
        Score plugin is refused, as there."""
        weights = self.out.weights
        room_used = 0
        for ref in (*self.spec.points.get("score", ()), *self.multi):
            if ref.name in weights or not isinstance(self.out.plugins.get(ref.name), ScorePlugin):
                continue
            weight = weights[ref.name] = ref.weight or 1
            if weight * MAX_NODE_SCORE > _int64(_MAX_TOTAL_SCORE - room_used):
                self.problems.append(
                    f"{self.spec.path}plugins: total score of Score plugins could overflow"
                )
                break
            room_used = _int64(room_used + weight * MAX_NODE_SCORE)

    def check_required(self) -> None:
        points = self.out.points
        path = self.spec.path
        if len(points["queueSort"]) != 1:
            self.problems.append(
                f"{path}plugins.queueSort: exactly one plugin must be enabled, found "
                f"{len(points['queueSort'])}"
            )
        if not points["bind"]:
            self.problems.append(f"{path}plugins.bind: at least one plugin must be enabled")
