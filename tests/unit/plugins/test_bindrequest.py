"""`--binding bindrequest`: every profile binds through BindRequestBinder instead of
DefaultBinder, and nothing else about the profile changes."""

from __future__ import annotations

import dataclasses

from ascheduler.app import build_frameworks
from ascheduler.binding.binder import BindSettings
from ascheduler.cache import Cache
from ascheduler.config import SchedulerConfig
from ascheduler.framework.profile import PluginRef, multipoint
from ascheduler.plugins import IN_TREE


def plugins_at(config: SchedulerConfig) -> dict[str, tuple[list[str], list[str]]]:
    frameworks = build_frameworks(config, IN_TREE, Cache(), None)
    return {
        name: (
            [p.name for p in fw.bind_plugins],
            [p.name for p in fw.filter_plugins],
        )
        for name, fw in frameworks.items()
    }


def test_bindrequest_mode_puts_bind_request_binder_in_default_binders_place() -> None:
    direct = SchedulerConfig(profiles=(multipoint("a"), multipoint("b")))
    durable = dataclasses.replace(direct, binding=BindSettings(mode="bindrequest"))
    before, after = plugins_at(direct), plugins_at(durable)
    assert before["a"][0] == ["DefaultBinder"]
    assert after["a"][0] == after["b"][0] == ["BindRequestBinder"]
    assert after["a"][1] == before["a"][1]  # the filters are the same


def test_a_bind_plugin_named_at_the_bind_point_stays_after_it() -> None:
    spec = multipoint("a")
    spec = dataclasses.replace(spec, points={"bind": (PluginRef("DefaultBinder"),)})
    config = SchedulerConfig(profiles=(spec,), binding=BindSettings(mode="bindrequest"))
    assert plugins_at(config)["a"][0] == ["BindRequestBinder", "DefaultBinder"]
