"""The registry refuses what does not conform, naming the plugin; plugin arguments are decoded
by each plugin's own type, every problem with its path; out-of-tree plugins load by module."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ascheduler.config import parse
from ascheduler.framework import (
    ConfigError,
    CycleState,
    FilterPlugin,
    FilterResult,
    Handle,
    NoArgs,
    NodeTable,
    PluginArgsError,
    PluginRef,
    PodInfo,
    Registration,
    Registry,
    ScorePlugin,
    default_plugins,
    multipoint,
)
from ascheduler.framework.registry import conformance_problems, load_registration
from ascheduler.framework.runtime import Framework
from ascheduler.plugins import IN_TREE

HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


class Good(FilterPlugin):
    name = "Good"

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        return None


class Misspelt(FilterPlugin):
    name = "Misspelt"

    def filters(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> None:
        return None


class WrongSignature(FilterPlugin):
    name = "WrongSignature"

    def filter(self, pod: PodInfo) -> None:  # type: ignore[override]
        return None


class AsyncFilter(FilterPlugin):
    name = "AsyncFilter"

    async def filter(  # type: ignore[override]
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> None:
        return None


class NoPoint:
    name = "NoPoint"

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> None:
        return None


def profile_with(*registrations: Registration[Any]) -> Framework:
    registry = Registry([*IN_TREE.values(), *registrations])
    extra = [PluginRef(r.name) for r in registrations]
    spec = multipoint("x", (*default_plugins(IN_TREE), *extra))
    return Framework(spec, registry, Handle())


def test_a_conforming_plugin_is_built() -> None:
    fw = profile_with(Registration("Good", lambda a, h: Good(), NoArgs))
    assert fw.plugins["Good"] in fw.filter_plugins


def test_a_misspelt_method_is_refused_naming_the_plugin() -> None:
    with pytest.raises(ConfigError) as err:
        profile_with(Registration("Misspelt", lambda a, h: Misspelt(), NoArgs))  # type: ignore[abstract]
    (problem,) = err.value.problems
    assert problem.startswith("plugin 'Misspelt': ")
    assert "abstract method" in problem
    assert "filter" in problem


@pytest.mark.parametrize(
    ("cls", "says"),
    [
        (
            WrongSignature,
            "FilterPlugin.filter: cannot be called as (self, state, pod, nodes)",
        ),
        (AsyncFilter, "FilterPlugin.filter: must not be async"),
    ],
)
def test_a_wrong_signature_is_refused_naming_the_method(cls: type[Any], says: str) -> None:
    with pytest.raises(ConfigError) as err:
        profile_with(Registration(cls.name, lambda a, h: cls(), NoArgs))
    (problem,) = err.value.problems
    assert problem.startswith(f"plugin {cls.name!r}: {says}")


class ExtraDefaulted(FilterPlugin):
    name = "ExtraDefaulted"

    def filter(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        strict: bool = False,
        *,
        why: str = "",
    ) -> FilterResult | None:
        return None


class Static(FilterPlugin):
    name = "Static"

    @staticmethod
    def filter(state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        return None


class StaticMissingOne(FilterPlugin):
    name = "StaticMissingOne"

    @staticmethod
    def filter(state: CycleState, pod: PodInfo) -> FilterResult | None:  # type: ignore[override]
        return None


class RequiredKeyword(FilterPlugin):
    name = "RequiredKeyword"

    def filter(  # type: ignore[override]
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, *, why: str
    ) -> FilterResult | None:
        return None


class NotCallable(FilterPlugin):
    name = "NotCallable"
    filter = None  # type: ignore[assignment]


@pytest.mark.parametrize("cls", [ExtraDefaulted, Static])
def test_an_override_the_framework_can_call_conforms(cls: type[Any]) -> None:
    assert conformance_problems(cls()) == []


@pytest.mark.parametrize(
    ("cls", "says"),
    [
        (StaticMissingOne, "FilterPlugin.filter: cannot be called as (state, pod, nodes)"),
        (RequiredKeyword, "FilterPlugin.filter: cannot be called as"),
        (NotCallable, "FilterPlugin.filter: is not a method (None)"),
    ],
)
def test_an_override_the_framework_cannot_call_is_refused(cls: type[Any], says: str) -> None:
    (problem,) = conformance_problems(cls())
    assert problem.startswith(says)


def test_a_factory_that_raises_is_a_config_error_naming_the_plugin() -> None:
    def factory(args: NoArgs, handle: Handle) -> Good:
        raise KeyError("GPU_MODEL")

    with pytest.raises(ConfigError) as err:
        profile_with(Registration("Good", factory, NoArgs))
    assert err.value.problems == ["plugin 'Good': cannot be built: KeyError: 'GPU_MODEL'"]


def test_a_plugin_implementing_no_extension_point_is_refused() -> None:
    assert conformance_problems(NoPoint()) == [
        "is not a Plugin: subclass the interfaces ascheduler.framework exports"
    ]
    with pytest.raises(ConfigError, match="'NoPoint': is not a Plugin"):
        profile_with(Registration("NoPoint", lambda a, h: NoPoint(), NoArgs))  # type: ignore[arg-type,return-value]


def test_a_plugin_that_calls_itself_by_another_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="'Renamed': calls itself 'Good'"):
        profile_with(Registration("Renamed", lambda a, h: Good(), NoArgs))


def test_every_in_tree_plugin_conforms() -> None:
    for name, registration in IN_TREE.items():
        plugin = registration.build(registration.decode_args(None, "args"), Handle())
        assert conformance_problems(plugin) == [], name


def test_a_name_is_registered_once() -> None:
    with pytest.raises(ConfigError, match="registered twice"):
        Registry([IN_TREE["NodeName"], IN_TREE["NodeName"]])


# -- arguments -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Band:
    low: int = 0
    high: int = 10

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise PluginArgsError("low: must not exceed high")


@dataclass(frozen=True)
class CostArgs:
    label: str = "example.com/cost"
    weights: tuple[int, ...] = (1,)
    band: Band = Band()
    mode: str = "prefer"


class Cost(ScorePlugin):
    name = "Cost"

    def __init__(self, args: CostArgs) -> None:
        self.args = args

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Any) -> Any:
        return feasible * 0


COST = Registration("Cost", lambda args, handle: Cost(args), CostArgs)


def test_out_of_tree_args_are_decoded_by_their_own_type() -> None:
    config = parse(
        {
            **HEAD,
            "profiles": [
                {
                    "plugins": {"multiPoint": {"enabled": [{"name": "Cost"}]}},
                    "pluginConfig": [
                        {"name": "Cost", "args": {"label": "tier", "band": {"high": 3}}}
                    ],
                }
            ],
        },
        Registry([*IN_TREE.values(), COST]),
    )
    fw = Framework(config.profiles[0], Registry([*IN_TREE.values(), COST]), Handle())
    assert fw.args["Cost"] == CostArgs(label="tier", band=Band(0, 3))


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"labell": "x"}, "args.labell: unknown field"),
        ({"label": 3}, "args.label: expected a string, got 3"),
        ({"weights": [1, "two"]}, "args.weights[1]: expected an integer, got 'two'"),
        ({"band": {"low": 5, "high": 1}}, "args.band.low: must not exceed high"),
        ({"band": []}, "args.band: expected an object, got list []"),
    ],
)
def test_out_of_tree_args_are_refused_with_their_path(args: dict[str, Any], problem: str) -> None:
    registry = Registry([*IN_TREE.values(), COST])
    with pytest.raises(ConfigError) as err:
        parse(
            {
                **HEAD,
                "profiles": [
                    {
                        "plugins": {"multiPoint": {"enabled": [{"name": "Cost"}]}},
                        "pluginConfig": [{"name": "Cost", "args": args}],
                    }
                ],
            },
            registry,
        )
    assert err.value.problems == [f"profiles[0].pluginConfig[0].{problem}"]


def test_args_of_a_plugin_without_args_are_passed_over() -> None:
    """kube-scheduler has no args type for NodeName: what a file gives it is not read."""
    config = parse(
        {**HEAD, "profiles": [{"pluginConfig": [{"name": "NodeName", "args": {"x": 1}}]}]},
        IN_TREE,
    )
    assert config.profiles[0].args["NodeName"] == {"x": 1}


# -- loading out-of-tree plugins -------------------------------------------------------------


def test_a_plugin_module_on_the_path_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "myplugin.py").write_text(
        textwrap.dedent(
            """
            from ascheduler.framework import CycleState, FilterPlugin, NoArgs, Registration

            class Mine(FilterPlugin):
                name = "Mine"

                def filter(self, state, pod, nodes):
                    return None

            REGISTRATION = Registration("Mine", lambda args, handle: Mine(), NoArgs)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = IN_TREE.with_modules(["myplugin:REGISTRATION"])
    assert "Mine" in registry
    assert "Mine" not in IN_TREE
    sys.modules.pop("myplugin", None)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("nomodule", "expected module:attribute"),
        ("no_such_module_xyz:X", "cannot import"),
        ("ascheduler.plugins:IN_TREE", "is not a plugin Registration"),
    ],
)
def test_a_bad_plugin_spec_is_refused(spec: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load_registration(spec)


def test_a_plugin_module_that_raises_on_import_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "brokenplugin.py").write_text("raise RuntimeError('needs CUDA')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="cannot import brokenplugin: needs CUDA"):
        load_registration("brokenplugin:REGISTRATION")
    sys.modules.pop("brokenplugin", None)
