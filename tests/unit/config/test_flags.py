"""The flag table: every flag parsed from a command line, carried as an override and applied
over the configuration lands where its row says, with the value given; flags left out change
nothing; and the table is the command's whole set of configuration flags."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from ascheduler.cli import build_parser
from ascheduler.config import FLAGS, NO_FILE, Overrides, SchedulerConfig, add_flags, apply, parse
from ascheduler.features import Release
from ascheduler.framework import ConfigError
from ascheduler.plugins import IN_TREE


def samples(tmp: Path) -> dict[str, tuple[list[str], Any]]:
    """For each flag's key: a command line giving it, and the value it must land as (or a
    check of that value). Each differs from the default, so landing is seen."""
    cert, key, ca = (tmp / name for name in ("tls.crt", "tls.key", "ca.crt"))
    for path in (cert, key, ca):
        path.write_text("")
    both = ["--tls-cert-file", str(cert), "--tls-private-key-file", str(key)]
    return {
        "kubeconfig": (["--kubeconfig", "/etc/k.conf"], "/etc/k.conf"),
        "scheduler_names": (["--scheduler-name", "a", "--scheduler-name", "b"], ("a", "b")),
        "binding_concurrency": (["--binding-concurrency", "7"], 7),
        "emulated_version": (["--emulated-version", "kube=1.36"], Release(1, 36)),
        "feature_gates": (
            ["--feature-gates", "GenericWorkload=true"],
            lambda gates: "GenericWorkload" in gates,
        ),
        "percentage_of_nodes_to_score": (["--percentage-of-nodes-to-score", "40"], 40),
        "http_address": (["--http-address", "127.0.0.1:10251"], "127.0.0.1:10251"),
        "allow_non_loopback_http": (["--allow-non-loopback-http"], True),
        "bind_address": (["--bind-address", "127.0.0.2"], "127.0.0.2"),
        "secure_port": (["--secure-port", "8443"], 8443),
        "tls_cert_file": (both, str(cert)),
        "tls_private_key_file": (both, str(key)),
        "cert_dir": (["--cert-dir", str(tmp)], str(tmp)),
        "client_ca_file": (["--client-ca-file", str(ca)], str(ca)),
        "authentication_kubeconfig": (["--authentication-kubeconfig", "/a"], "/a"),
        "authorization_kubeconfig": (["--authorization-kubeconfig", "/z"], "/z"),
        "authorization_always_allow_paths": (
            ["--authorization-always-allow-paths", "/x, /y/*"],
            ("/x", "/y/*"),
        ),
        "authentication_token_webhook_cache_ttl": (
            ["--authentication-token-webhook-cache-ttl", "2m"],
            120.0,
        ),
        "authorization_webhook_cache_authorized_ttl": (
            ["--authorization-webhook-cache-authorized-ttl", "30s"],
            30.0,
        ),
        "authorization_webhook_cache_unauthorized_ttl": (
            ["--authorization-webhook-cache-unauthorized-ttl", "0"],
            0.0,
        ),
        "leader_elect": (["--leader-elect"], True),
        "leader_elect_resource_namespace": (
            ["--leader-elect-resource-namespace", "ns"],
            "ns",
        ),
        "leader_elect_resource_name": (["--leader-elect-resource-name", "nm"], "nm"),
        "leader_elect_lease_duration": (["--leader-elect-lease-duration", "30"], 30.0),
        "node_lock_object": (["--node-lock-object", "node"], "node"),
        "node_lock_timeout": (["--node-lock-timeout", "90s"], 90.0),
        "node_lock_linger": (["--node-lock-linger", "3s"], 3.0),
        "node_lock_when_alone": (["--node-lock-when-alone", "lock"], "lock"),
        "node_lock_lease_groups": (["--node-lock-lease-groups", "8"], 8),
        "node_lock_key": (["--node-lock-key", "example.com/lock"], "example.com/lock"),
        "binding_mode": (["--binding", "bindrequest"], "bindrequest"),
        "node_lock_policy": (["--node-lock-policy", "all"], "all"),
        "device_resources": (
            ["--device-resource", "x.io/a", "--device-resource", "x.io/b"],
            frozenset({"x.io/a", "x.io/b"}),
        ),
        "annotation_prefix": (["--annotation-prefix", "p.example.com"], "p.example.com"),
        "debug_endpoints": (["--debug-endpoints", "authorized"], "authorized"),
        "sharding": (["--sharding", "--node-lock-policy", "all"], True),
        "sharding_group": (["--sharding-group", "team-a"], "team-a"),
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_flags(p)
    return p


def defaults() -> SchedulerConfig:
    return parse(dict(NO_FILE), IN_TREE)


def test_every_flag_has_a_sample(tmp_path: Path) -> None:
    assert {flag.key for flag in FLAGS} == set(samples(tmp_path))


@pytest.mark.parametrize("flag", FLAGS, ids=lambda f: f.name)
def test_each_flag_round_trips_from_argv_to_the_config(flag: Any, tmp_path: Path) -> None:
    argv, expected = samples(tmp_path)[flag.key]
    args = parser().parse_args(argv)
    overrides = Overrides.from_args(args)
    config = apply(defaults(), overrides)
    landed = flag.setting(config)
    if callable(expected):
        assert expected(landed), landed
        assert not expected(flag.setting(defaults()))
    else:
        assert landed == expected
        assert flag.setting(defaults()) != expected


def test_flags_left_out_change_nothing() -> None:
    config = defaults()
    assert apply(config, Overrides.from_args(parser().parse_args([]))) == config
    assert apply(config, Overrides()) == config


def test_overrides_take_only_the_table_s_flags() -> None:
    with pytest.raises(TypeError, match="not a flag: nope"):
        Overrides(nope=1)


def test_run_and_binder_take_every_flag_of_the_table() -> None:
    def options(command: str) -> set[str]:
        sub = build_parser()._subparsers._group_actions[0]  # type: ignore[union-attr]
        return {o for a in sub.choices[command]._actions for o in a.option_strings}

    names = {flag.name for flag in FLAGS}
    for command in ("run", "binder"):
        assert names <= options(command)


#: A file setting, to values of its own, every field a flag also sets.
FILE: dict[str, Any] = {
    **NO_FILE,
    "percentageOfNodesToScore": 70,
    "clientConnection": {"kubeconfig": "/etc/file.conf"},
    "leaderElection": {
        "leaderElect": False,
        "leaseDuration": "20s",
        "resourceName": "file-lease",
        "resourceNamespace": "file-ns",
    },
    "ascheduler": {
        "bindingConcurrency": 99,
        "httpAddress": "127.0.0.1:7777",
        "annotationPrefix": "file.example.com",
        "nodeLock": {
            "policy": "none",
            "key": "file.example.com/lock",
            "object": "lease",
            "timeout": "60s",
            "linger": "20s",
            "deviceResources": ["file.example.com/dev"],
        },
        "sharding": {"enabled": False, "group": "file-group", "memberDuration": "20s"},
    },
}
#: The flags the file above sets too (a file naming leaseGroups keeps its locks on Leases:
#: tests/unit/config/test_decode.py holds that).
IN_THE_FILE = (
    "kubeconfig",
    "percentage_of_nodes_to_score",
    "binding_concurrency",
    "http_address",
    "leader_elect",
    "leader_elect_resource_namespace",
    "leader_elect_resource_name",
    "leader_elect_lease_duration",
    "node_lock_policy",
    "node_lock_key",
    "node_lock_object",
    "node_lock_timeout",
    "node_lock_linger",
    "device_resources",
    "annotation_prefix",
    "sharding",
    "sharding_group",
)


@pytest.mark.parametrize("key", IN_THE_FILE)
def test_each_flag_overrides_the_file(key: str, tmp_path: Path) -> None:
    row = next(f for f in FLAGS if f.key == key)
    argv, expected = samples(tmp_path)[key]
    from_file = parse(FILE, IN_TREE)
    assert row.setting(from_file) != expected
    config = apply(from_file, Overrides.from_args(parser().parse_args(argv)))
    assert row.setting(config) == expected


def test_sharding_needs_every_bind_locked_and_no_leader() -> None:
    """Every member is active and shares every node: the flags that make it so are asked
    for, all at once, and with them it runs."""
    elected = parse({**NO_FILE, "leaderElection": {"leaderElect": True}}, IN_TREE)
    with pytest.raises(ConfigError) as err:
        apply(elected, Overrides(sharding=True, binding_mode="bindrequest"))
    text = str(err.value)
    assert "--no-leader-elect" in text
    assert "--node-lock-policy all" in text
    assert "BindRequests" in text
    config = apply(elected, Overrides(sharding=True, leader_elect=False, node_lock_policy="all"))
    assert config.sharding.enabled
    assert config.sharding.group == "ascheduler"


def test_a_sharding_group_that_cannot_name_a_lease_is_refused() -> None:
    with pytest.raises(ConfigError, match="--sharding-group: group must be"):
        apply(defaults(), Overrides(sharding_group="Team A"))
