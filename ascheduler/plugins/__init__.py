"""The in-tree plugins, registered under kube-scheduler's names, in the default profile's order."""

from __future__ import annotations

from ascheduler.framework import Registry
from ascheduler.plugins import (
    balancedallocation,
    bindrequest,
    coscheduling,
    defaultbinder,
    defaultpreemption,
    deferredpodscheduling,
    dynamicresources,
    gangscheduling,
    imagelocality,
    interpodaffinity,
    nodeaffinity,
    nodedeclaredfeatures,
    nodename,
    nodeports,
    noderesources,
    nodeunschedulable,
    nodevolumelimits,
    podtopologyspread,
    prioritysort,
    schedulinggates,
    tainttoleration,
    volumebinding,
    volumerestrictions,
    volumezone,
)

IN_TREE = Registry(
    [
        schedulinggates.REGISTRATION,
        prioritysort.REGISTRATION,
        nodeunschedulable.REGISTRATION,
        nodename.REGISTRATION,
        tainttoleration.REGISTRATION,
        nodeaffinity.REGISTRATION,
        nodeports.REGISTRATION,
        # kube-scheduler inserts it before NodeResourcesFit while its gate is on.
        deferredpodscheduling.REGISTRATION,
        noderesources.FIT_REGISTRATION,
        volumerestrictions.REGISTRATION,
        nodevolumelimits.REGISTRATION,
        volumebinding.REGISTRATION,
        volumezone.REGISTRATION,
        podtopologyspread.REGISTRATION,
        interpodaffinity.REGISTRATION,
        dynamicresources.REGISTRATION,
        defaultpreemption.REGISTRATION,
        balancedallocation.BALANCED_REGISTRATION,
        imagelocality.REGISTRATION,
        defaultbinder.REGISTRATION,
        # kube-scheduler appends it to the default profile while its gate is on.
        nodedeclaredfeatures.REGISTRATION,
        gangscheduling.REGISTRATION,
        coscheduling.REGISTRATION,
        bindrequest.REGISTRATION,
    ]
)

__all__ = ["IN_TREE"]
