"""The in-tree plugins, registered under kube-scheduler's names."""

from __future__ import annotations

from ascheduler.framework.interface import PluginFactory
from ascheduler.plugins import (
    defaultbinder,
    nodeaffinity,
    nodename,
    nodeports,
    noderesources,
    nodeunschedulable,
    prioritysort,
    schedulinggates,
    tainttoleration,
)

IN_TREE: dict[str, PluginFactory] = {
    prioritysort.NAME: prioritysort.new,
    schedulinggates.NAME: schedulinggates.new,
    nodeunschedulable.NAME: nodeunschedulable.new,
    nodename.NAME: nodename.new,
    tainttoleration.NAME: tainttoleration.new,
    nodeaffinity.NAME: nodeaffinity.new,
    nodeports.NAME: nodeports.new,
    noderesources.FIT: noderesources.new_fit,
    noderesources.BALANCED: noderesources.new_balanced,
    defaultbinder.NAME: defaultbinder.new,
}

__all__ = ["IN_TREE"]
