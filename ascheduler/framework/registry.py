"""The plugin registry: every plugin the scheduler can enable, by name.

Each plugin module declares one `Registration`: its name, its factory, the dataclass of its
arguments (validated by `framework.args`, with defaults), the cluster events that may make a
pod it rejected schedulable, and its weight if it belongs to the default profile. The registry
builds the default profile, validates `pluginConfig` and prints `config defaults` from these
declarations alone.

Plugins outside this repository register the same way: an installed package names its
`Registration` in the `ascheduler.plugins` entry-point group, or `ascheduler run --plugin
module:attribute` loads one from a module on the path. They are then enabled by name in a
`KubeSchedulerConfiguration` exactly like the in-tree ones.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from ascheduler.features import Features
from ascheduler.framework.args import decode
from ascheduler.framework.errors import ConfigError
from ascheduler.framework.handle import Handle
from ascheduler.framework.interface import EXTENSION_POINTS, ClusterEvent, Plugin

A = TypeVar("A")
ENTRY_POINT_GROUP: Final = "ascheduler.plugins"


@dataclass(frozen=True)
class NoArgs:
    """The arguments of a plugin that takes none (any given is an unknown field)."""


@dataclass(frozen=True)
class Registration(Generic[A]):
    """A plugin as the registry knows it."""

    name: str
    #: Builds the plugin from its decoded arguments and the profile's handle.
    factory: Callable[[A, Handle], Plugin]
    #: The dataclass of its `pluginConfig` args; every field has a default.
    args: type[A]
    #: Events that may make a pod it rejected schedulable (a plugin that also subclasses
    #: EnqueueExtensions says so itself); None: any event (kube-scheduler's default).
    events: frozenset[ClusterEvent] | None = None
    #: Its weight in the default profile; None: not in the default profile.
    default_weight: int | None = None
    #: The feature gate that puts it in the default profile (None: it always is, when it
    #: has a `default_weight`).
    default_gate: str | None = None
    #: Extension points where kube-scheduler's plugin of this name also runs and this one
    #: does that work at another point (NodeResourcesFit's PreFilter and PreScore are in its
    #: columnar Filter and Score): a profile enabling it there is accepted, as kube-scheduler
    #: accepts it, and changes nothing.
    kube_points: frozenset[str] = frozenset()
    #: What a release refuses in args that decode (a rule a release changed): problems as
    #: `field: message`, relative to the args. The args dataclass checks what every release
    #: does; this, what depends on the release, so the same file is read as each release
    #: reads it.
    check: Callable[[A, Features], Sequence[str]] | None = None
    #: The args with what a release (or its gates) defaults beside the dataclass's own
    #: defaults (kube-scheduler's `SetDefaults_...` reading a gate).
    release_defaults: Callable[[A, Features], A] | None = None

    def decode_args(
        self, raw: Mapping[str, Any] | None, path: str, features: Features | None = None
    ) -> A:
        """The args decoded and checked as the release of `features` (None: the default
        release) checks them; ConfigError naming each problem by its path."""
        if self.args is NoArgs:
            # kube-scheduler passes args of a plugin without an args type through, unread.
            return self.args()
        args = decode(self.args, raw, path)
        gates = features if features is not None else Features.defaults()
        if self.check is not None:
            problems = self.check(args, gates)
            if problems:
                raise ConfigError([f"{path}.{p}" for p in problems])
        if self.release_defaults is not None:
            args = self.release_defaults(args, gates)
        return args

    def build(self, args: A, handle: Handle) -> Plugin:
        """The plugin, checked against the interfaces it claims; ConfigError naming it if
        it cannot be built or does not conform."""
        try:
            plugin = self.factory(args, handle)
        except ConfigError as exc:
            raise ConfigError([f"plugin {self.name!r}: {p}" for p in exc.problems]) from exc
        except Exception as exc:
            hint = " (a method missing or misspelt?)" if "abstract" in str(exc) else ""
            raise ConfigError(
                [f"plugin {self.name!r}: cannot be built: {type(exc).__name__}: {exc}{hint}"]
            ) from exc
        problems = conformance_problems(plugin)
        if plugin.name != self.name:
            problems.append(f"calls itself {plugin.name!r}")
        if problems:
            raise ConfigError([f"plugin {self.name!r}: {p}" for p in problems])
        return plugin


def conformance_problems(plugin: object) -> list[str]:
    """What is wrong with `plugin` as a plugin: not subclassing any extension point, or an
    override whose parameters (or async-ness) differ from the interface's."""
    if not isinstance(plugin, Plugin):
        return ["is not a Plugin: subclass the interfaces ascheduler.framework exports"]
    problems = []
    if not any(isinstance(plugin, point) for point in EXTENSION_POINTS.values()):
        points = ", ".join(cls.__name__ for cls in EXTENSION_POINTS.values())
        problems.append(f"implements no extension point (subclass one of {points})")
    for interface in type(plugin).__mro__:
        # Every interface the framework defines that the plugin derives from, adapters too.
        if not (
            issubclass(interface, Plugin)
            and interface.__module__.startswith("ascheduler.framework.")
        ):
            continue
        for method in vars(interface):
            want = getattr(interface, method)
            if method.startswith("_") or not inspect.isfunction(want):
                continue
            got = inspect.getattr_static(type(plugin), method)
            if isinstance(got, (staticmethod, classmethod)):
                # Bound, it takes what the interface takes after self.
                got = getattr(type(plugin), method)
                skip = 0
            else:
                skip = 1
            if not callable(got):
                problems.append(f"{interface.__name__}.{method}: is not a method ({got!r})")
                continue
            problem = _mismatch(want, got, skip)
            if problem:
                problems.append(f"{interface.__name__}.{method}: {problem}")
    return problems


def _mismatch(want: Callable[..., Any], got: Callable[..., Any], skip: int) -> str:
    """Why `got` cannot be called as the interface calls `want` (positionally, self first
    unless `skip` is 0), or ""."""
    wants_async = inspect.iscoroutinefunction(inspect.unwrap(want))
    if wants_async != inspect.iscoroutinefunction(inspect.unwrap(got)):
        return "must be async def" if wants_async else "must not be async"
    try:
        wanted = list(inspect.signature(want).parameters.values())[1:]
        given = list(inspect.signature(got).parameters.values())[skip:]
    except (TypeError, ValueError):
        return ""
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    takes_rest = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in given)
    slots = [p for p in given if p.kind in positional]
    required = [p for p in slots if p.default is inspect.Parameter.empty]
    keyword_required = [
        p
        for p in given
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty
    ]
    names = ", ".join(p.name for p in wanted)
    if (
        len(required) > len(wanted)
        or (len(slots) < len(wanted) and not takes_rest)
        or keyword_required
    ):
        extra = "self, " if skip else ""
        return f"cannot be called as ({extra}{names}), the interface's parameters"
    return ""


class Registry(Mapping[str, "Registration[Any]"]):
    """Registrations by name, in the order they were added (the default profile's order)."""

    def __init__(self, registrations: Iterable[Registration[Any]] = ()) -> None:
        self._by_name: dict[str, Registration[Any]] = {}
        for registration in registrations:
            self.add(registration)

    def __getitem__(self, name: str) -> Registration[Any]:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def add(self, registration: Registration[Any]) -> None:
        if not isinstance(registration, Registration):
            raise ConfigError([f"not a plugin Registration: {registration!r}"])
        if registration.name in self._by_name:
            raise ConfigError([f"plugin {registration.name!r} is registered twice"])
        self._by_name[registration.name] = registration

    def default_profile(self) -> tuple[tuple[str, int, str | None], ...]:
        """(name, weight, gate) of the default profile's plugins, in registration order (a
        plugin with a gate is in it only while the gate is on: `default_plugins`)."""
        return tuple(
            (r.name, r.default_weight, r.default_gate)
            for r in self._by_name.values()
            if r.default_weight is not None
        )

    def with_entry_points(self, group: str = ENTRY_POINT_GROUP) -> Registry:
        """This registry plus every Registration installed packages publish in `group`."""
        out = Registry(self._by_name.values())
        for entry in importlib.metadata.entry_points(group=group):
            try:
                loaded = entry.load()
            except Exception as exc:
                raise ConfigError(
                    [f"plugin entry point {entry.name!r} ({entry.value}): cannot load: {exc}"]
                ) from exc
            out.add(loaded)
        return out

    def with_modules(self, specs: Iterable[str]) -> Registry:
        """This registry plus each `module:attribute` Registration (`--plugin`)."""
        out = Registry(self._by_name.values())
        for spec in specs:
            out.add(load_registration(spec))
        return out


def load_registration(spec: str) -> Registration[Any]:
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError([f"--plugin {spec!r}: expected module:attribute"])
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError([f"--plugin {spec!r}: cannot import {module_name}: {exc}"]) from exc
    registration = getattr(module, attribute, None)
    if not isinstance(registration, Registration):
        raise ConfigError([f"--plugin {spec!r}: {attribute} is not a plugin Registration"])
    return registration
