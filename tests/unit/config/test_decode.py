"""KubeSchedulerConfiguration: strict parsing with paths, kube-scheduler's plugin merging, the
documented examples, and the CLI's validate/defaults."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ascheduler.config import Overrides, parse, resolve, to_document
from ascheduler.framework import ConfigError, multipoint_plugins
from ascheduler.locks.settings import DEFAULT_LEASE_GROUPS
from ascheduler.plugins import IN_TREE

CONFIG_DIR = Path(__file__).resolve().parents[3] / "config"
HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ascheduler", *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_examples_are_valid(path: Path) -> None:
    result = cli("config", "validate", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{path}: valid"


@pytest.mark.parametrize(
    "path", sorted((CONFIG_DIR / "invalid").glob("*.yaml")), ids=lambda p: p.name
)
def test_invalid_examples_report_their_documented_error(path: Path) -> None:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: ")
    expected = first.removeprefix("# expect: ")
    result = cli("config", "validate", str(path))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"{path}: {expected}"]


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        parse(
            {
                **HEAD,
                "colour": "blue",
                "percentageOfNodesToScore": 101,
                "profiles": [
                    {"schedulerName": "a", "plugins": {"filtr": {}}},
                    {"plugins": {"score": {"enabled": [{"name": "Nope"}]}}},
                ],
            },
            IN_TREE,
        )
    assert err.value.problems == [
        "colour: unknown field",
        "percentageOfNodesToScore: must be in 0..100, got 101",
        "profiles[0].plugins.filtr: unknown field",
        "profiles[1].schedulerName: required",
        'profiles[1].plugins.score.enabled[0].name: unknown plugin "Nope"',
    ]


def test_wrong_api_version_and_kind() -> None:
    with pytest.raises(ConfigError) as err:
        parse({"apiVersion": "v1", "kind": "Pod"}, IN_TREE)
    assert err.value.problems[0].startswith("apiVersion: must be")
    assert err.value.problems[1].startswith("kind: must be")


def _multipoint(config: Any, profile: int = 0) -> dict[str, int]:
    spec = config.profiles[profile]
    return {r.name: r.weight for r in multipoint_plugins(spec, IN_TREE, config.features)}


def test_plugins_merge_onto_the_defaults() -> None:
    config = parse(
        {
            **HEAD,
            "profiles": [
                {
                    "plugins": {
                        "multiPoint": {
                            "enabled": [{"name": "NodeAffinity", "weight": 7}],
                            "disabled": [{"name": "NodePorts"}],
                        }
                    }
                }
            ],
        },
        IN_TREE,
    )
    weights = _multipoint(config)
    assert weights["NodeAffinity"] == 7
    assert weights["TaintToleration"] == 3
    assert "NodePorts" not in weights
    everything_off = parse(
        {
            **HEAD,
            "profiles": [
                {
                    "plugins": {
                        "multiPoint": {
                            "disabled": [{"name": "*"}],
                            "enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"}],
                        }
                    }
                }
            ],
        },
        IN_TREE,
    )
    # Weights left out stay 0 in the merged set (the framework reads 0 as 1).
    assert _multipoint(everything_off) == {"PrioritySort": 0, "DefaultBinder": 0}


def test_a_profile_without_a_binder_is_rejected() -> None:
    with pytest.raises(ConfigError) as err:
        parse(
            {
                **HEAD,
                "profiles": [
                    {
                        "schedulerName": "x",
                        "plugins": {"multiPoint": {"disabled": [{"name": "DefaultBinder"}]}},
                    }
                ],
            },
            IN_TREE,
        )
    assert err.value.problems == ["profiles[0].plugins.bind: at least one plugin must be enabled"]


def test_defaults_round_trip_through_the_cli() -> None:
    result = cli("config", "defaults")
    assert result.returncode == 0
    document = yaml.safe_load(result.stdout)
    again = parse(document, IN_TREE)
    assert to_document(again, IN_TREE) == document
    assert _multipoint(again)["TaintToleration"] == 3
    assert document["ascheduler"]["nodeLock"]["policy"] == "devices"


def test_the_write_clients_connections_come_from_the_file() -> None:
    assert parse(HEAD, IN_TREE).write_pool == 128
    assert parse({**HEAD, "ascheduler": {"writeConnections": 8}}, IN_TREE).write_pool == 8
    with pytest.raises(ConfigError) as err:
        parse({**HEAD, "ascheduler": {"writeConnections": 0}}, IN_TREE)
    assert [p for p in err.value.problems if "writeConnections" in p] == [
        "ascheduler.writeConnections: must be in 1..inf, got 0"
    ]


def test_run_with_an_invalid_config_exits_2_naming_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\nprofiles: {}\n"
    )
    result = cli("run", "--config", str(bad))
    assert result.returncode == 2
    assert "profiles: expected a list, got dict" in result.stderr


def test_profile_percentage_overrides_the_global_one() -> None:
    from ascheduler.app import build_frameworks
    from ascheduler.cache import Cache

    config = parse(
        {
            **HEAD,
            "percentageOfNodesToScore": 30,
            "profiles": [
                {"schedulerName": "a"},
                {"schedulerName": "b", "percentageOfNodesToScore": 70},
            ],
        },
        IN_TREE,
    )
    frameworks = build_frameworks(config, IN_TREE, Cache(), None)
    assert frameworks["a"].percentage_of_nodes_to_score == 30
    assert frameworks["b"].percentage_of_nodes_to_score == 70


async def test_the_rate_limiter_spaces_requests_past_the_burst() -> None:
    """qps/burst as client-go applies them: sleeps are asked for, never measured."""
    import asyncio
    from unittest import mock

    from ascheduler.kube.client import RateLimiter

    limiter = RateLimiter(qps=10, burst=2)
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(round(seconds, 6))

    loop = asyncio.get_running_loop()
    with (
        mock.patch.object(loop, "time", return_value=100.0),
        mock.patch("ascheduler.kube.client.asyncio.sleep", fake_sleep),
    ):
        for _ in range(4):
            await limiter.wait()
    assert slept == [0.1, 0.2]  # two free (the burst), then 1/qps of debt each


def test_qps_is_applied_only_when_the_file_sets_it() -> None:
    assert parse(HEAD, IN_TREE).qps is None
    limited = parse({**HEAD, "clientConnection": {"qps": 200, "burst": 400}}, IN_TREE)
    assert (limited.qps, limited.burst) == (200.0, 400)
    # As client-go reads them: 0 is unset, a negative qps is no limit.
    assert parse({**HEAD, "clientConnection": {"qps": 0}}, IN_TREE).qps is None
    assert parse({**HEAD, "clientConnection": {"qps": -1}}, IN_TREE).qps is None
    with pytest.raises(ConfigError, match=r"clientConnection\.qps: expected a number"):
        parse({**HEAD, "clientConnection": {"qps": "fast"}}, IN_TREE)


# -- flags override the file ----------------------------------------------------------------


def resolved(document: dict[str, Any] | None, tmp_path: Path, **flags: Any) -> Any:
    path = None
    if document is not None:
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump({**HEAD, **document}))
    return resolve(str(path) if path else None, Overrides(**flags), IN_TREE)


def test_without_a_file_leader_election_is_off_unless_asked(tmp_path: Path) -> None:
    assert not resolved(None, tmp_path).leader_election.leader_elect
    assert resolved(None, tmp_path, leader_elect=True).leader_election.leader_elect
    assert resolved({}, tmp_path).leader_election.leader_elect  # a file: kube-scheduler's default


@pytest.mark.parametrize(
    ("flag", "expected"),
    [(None, "127.0.0.1:9000"), ("127.0.0.1:0", "127.0.0.1:0"), ("", None)],
)
def test_the_http_address_flag_overrides_the_file(
    tmp_path: Path, flag: str | None, expected: str | None
) -> None:
    document = {"ascheduler": {"httpAddress": "127.0.0.1:9000"}}
    assert resolved(document, tmp_path, http_address=flag).http_address == expected


def test_flags_override_what_the_file_says(tmp_path: Path) -> None:
    document = {
        "leaderElection": {"leaseDuration": "30s", "renewDeadline": "20s", "retryPeriod": "4s"},
        "ascheduler": {
            "bindingConcurrency": 10,
            "nodeLock": {"policy": "all", "timeout": "2m", "key": "a.io/lock"},
        },
    }
    config = resolved(
        document,
        tmp_path,
        binding_concurrency=5,
        node_lock_policy="none",
        node_lock_timeout="90s",
        leader_elect_lease_duration=6.0,
        kubeconfig="/k",
    )
    assert config.binding_concurrency == 5
    assert config.binding.policy == "none"
    assert config.binding.lock.timeout == 90.0
    assert config.binding.lock.key == "a.io/lock"  # not overridden: the file's
    election = config.leader_election
    assert (election.lease_duration, election.renew_deadline) == (6.0, 4.0)
    assert config.kubeconfig == "/k"
    untouched = resolved(document, tmp_path)
    assert (untouched.binding_concurrency, untouched.binding.policy) == (10, "all")


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        ({"binding_concurrency": 0}, "--binding-concurrency: must be at least 1, got 0"),
        ({"percentage_of_nodes_to_score": 101}, "--percentage-of-nodes-to-score: must be in"),
        ({"http_address": "nowhere"}, "--http-address: not HOST:PORT"),
        ({"node_lock_timeout": "0s"}, "--node-lock-timeout: node lock timeout must be positive"),
        ({"node_lock_timeout": "soon"}, "--node-lock-timeout: not a duration"),
        ({"leader_elect_lease_duration": -1.0}, "--leader-elect-lease-duration: must be"),
    ],
)
def test_bad_flags_are_refused_by_name(tmp_path: Path, flags: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        resolved(None, tmp_path, **flags)
    (reported,) = err.value.problems
    assert reported.startswith(problem)


def test_scheduler_names_cannot_override_the_files_profiles(tmp_path: Path) -> None:
    config = resolved(None, tmp_path, scheduler_names=("a", "b", "a"))
    assert [p.scheduler_name for p in config.profiles] == ["a", "b"]
    with pytest.raises(ConfigError, match="the file names its profiles"):
        resolved({"profiles": [{"schedulerName": "mine"}]}, tmp_path, scheduler_names=("x",))


def test_scheduler_names_may_replace_an_empty_profile_list(tmp_path: Path) -> None:
    config = resolved({"profiles": []}, tmp_path, scheduler_names=("x",))
    assert [p.scheduler_name for p in config.profiles] == ["x"]


def test_scheduler_names_keep_the_resources_extenders_manage_ignored(tmp_path: Path) -> None:
    document = {
        "extenders": [
            {
                "urlPrefix": "http://127.0.0.1:1/",
                "filterVerb": "filter",
                "managedResources": [{"name": "example.com/fpga", "ignoredByScheduler": True}],
            }
        ]
    }
    (profile,) = resolved(document, tmp_path, scheduler_names=("x",)).profiles
    assert profile.args["NodeResourcesFit"]["ignoredResources"] == ["example.com/fpga"]


def test_policy_devices_from_a_flag_needs_device_resources(tmp_path: Path) -> None:
    document = {"ascheduler": {"nodeLock": {"policy": "none", "deviceResources": []}}}
    with pytest.raises(ConfigError) as err:
        resolved(document, tmp_path, node_lock_policy="devices")
    (problem,) = err.value.problems
    assert problem.startswith("--device-resources: must name at least one resource")
    config = resolved(
        document, tmp_path, node_lock_policy="devices", device_resources=("example.com/gpu",)
    )
    assert config.binding.device_resources == frozenset({"example.com/gpu"})


@pytest.mark.parametrize(
    ("flag", "expected"), [("--leader-elect", True), ("--no-leader-elect", False)]
)
def test_leader_election_flag_turns_either_way(flag: str, expected: bool) -> None:
    from ascheduler.cli import build_parser

    args = build_parser().parse_args(["run", flag])
    assert args.leader_elect is expected
    assert build_parser().parse_args(["run"]).leader_elect is None


# -- nothing is silently ignored: each option is honoured or refused with its path ------------


def problems(document: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse({**HEAD, **document}, IN_TREE)
    return err.value.problems


def test_fields_kube_scheduler_accepts_without_effect_here_are_accepted() -> None:
    """A file written for kube-scheduler runs unchanged: see docs/configuration.md."""
    parse(
        {
            **HEAD,
            "parallelism": 32,
            "enableProfiling": False,
            "enableContentionProfiling": True,
            "delayCacheUntilActive": True,
            "clientConnection": {
                "contentType": "application/vnd.kubernetes.protobuf",
                "acceptContentTypes": "application/json",
            },
        },
        IN_TREE,
    )
    assert problems({"parallelism": 0}) == ["parallelism: must be in 1..2147483647, got 0"]
    assert problems({"delayCacheUntilActive": "yes"}) == [
        "delayCacheUntilActive: expected true or false, got 'yes'"
    ]


def test_leader_election_settings_are_checked_only_when_electing() -> None:
    odd = {"leaseDuration": "5s", "renewDeadline": "10s", "resourceLock": "endpoints"}
    parse({**HEAD, "leaderElection": {"leaderElect": False, **odd}}, IN_TREE)
    assert problems({"leaderElection": odd}) == [
        "leaderElection.leaseDuration: must be greater than renewDeadline",
        "leaderElection.resourceLock: must be \"leases\", got 'endpoints'",
    ]


def test_an_empty_device_list_is_refused_under_policy_devices() -> None:
    (problem,) = problems({"ascheduler": {"nodeLock": {"deviceResources": []}}})
    assert problem.startswith("ascheduler.nodeLock.deviceResources: must name at least one")
    config = parse(
        {**HEAD, "ascheduler": {"nodeLock": {"policy": "none", "deviceResources": []}}}, IN_TREE
    )
    assert config.binding.device_resources == frozenset()
    config = parse(
        {**HEAD, "ascheduler": {"nodeLock": {"deviceResources": ["x.io/fpga"]}}}, IN_TREE
    )
    assert config.binding.device_resources == frozenset({"x.io/fpga"})


def test_device_names_must_be_strings() -> None:
    (problem,) = problems({"ascheduler": {"nodeLock": {"deviceResources": ["a.io/b", 7]}}})
    assert problem == "ascheduler.nodeLock.deviceResources[1]: expected a resource name, got 7"


@pytest.mark.parametrize("value", ["false", "no", 0, 1])
def test_leader_elect_must_be_a_boolean(value: object) -> None:
    (problem,) = problems({"leaderElection": {"leaderElect": value}})
    assert problem == f"leaderElection.leaderElect: expected true or false, got {value!r}"


def test_leader_elect_false_is_honoured() -> None:
    config = parse({**HEAD, "leaderElection": {"leaderElect": False}}, IN_TREE)
    assert config.leader_election.leader_elect is False


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({"leaderElection": {"resourceName": 5}}, "leaderElection.resourceName"),
        ({"leaderElection": {"resourceNamespace": ["a"]}}, "leaderElection.resourceNamespace"),
        ({"clientConnection": {"kubeconfig": 3}}, "clientConnection.kubeconfig"),
        ({"ascheduler": {"nodeLock": {"key": True}}}, "ascheduler.nodeLock.key"),
        ({"ascheduler": {"annotationPrefix": 1}}, "ascheduler.annotationPrefix"),
        ({"ascheduler": {"httpAddress": 10251}}, "ascheduler.httpAddress"),
    ],
)
def test_strings_are_not_coerced(document: dict[str, Any], path: str) -> None:
    (problem,) = problems(document)
    assert problem.startswith(f"{path}: expected a string")


def test_a_non_positive_lock_timeout_from_the_environment_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASCHEDULER_NODELOCK_EXPIRE", "0")
    (problem,) = problems({})
    assert problem.startswith("ascheduler.nodeLock.timeout: $ASCHEDULER_NODELOCK_EXPIRE:")
    assert "must be positive" in problem
    (problem,) = problems({"ascheduler": {"nodeLock": {"timeout": "0s"}}})
    assert problem == "ascheduler.nodeLock.timeout: must be positive"


def test_run_refuses_a_non_positive_lock_timeout(tmp_path: Path) -> None:
    result = cli("run", "--node-lock-timeout", "0s", "--kubeconfig", str(tmp_path / "none"))
    assert result.returncode == 2
    assert "must be positive" in result.stderr


def test_the_binding_mode_comes_from_the_file_or_the_flag(tmp_path: Path) -> None:
    assert resolved({}, tmp_path).binding.mode == "direct"
    durable = {"ascheduler": {"binding": "bindrequest"}}
    assert resolved(durable, tmp_path).binding.mode == "bindrequest"
    assert resolved(durable, tmp_path, binding_mode="direct").binding.mode == "direct"
    assert resolved({}, tmp_path, binding_mode="bindrequest").binding.mode == "bindrequest"
    document = to_document(resolved(durable, tmp_path), IN_TREE)
    assert document["ascheduler"]["binding"] == "bindrequest"
    (problem,) = problems({"ascheduler": {"binding": "carrier-pigeon"}})
    assert problem == "ascheduler.binding: must be one of direct, bindrequest, got 'carrier-pigeon'"


def test_the_lock_object_is_a_lease_but_hami_s_key_stays_on_the_node(tmp_path: Path) -> None:
    assert parse(HEAD, IN_TREE).binding.lock.lock_object == "lease"
    hami = {**HEAD, "ascheduler": {"nodeLock": {"key": "hami.io/mutex.lock"}}}
    assert parse(hami, IN_TREE).binding.lock.lock_object == "node"
    node = {**HEAD, "ascheduler": {"nodeLock": {"object": "node"}}}
    assert parse(node, IN_TREE).binding.lock.lock_object == "node"
    (problem,) = problems({"ascheduler": {"nodeLock": {"object": "configmap"}}})
    assert problem == "ascheduler.nodeLock.object: must be one of lease, node, got 'configmap'"
    (problem,) = problems(
        {"ascheduler": {"nodeLock": {"key": "hami.io/mutex.lock", "object": "lease"}}}
    )
    assert problem.startswith("ascheduler.nodeLock.object: the hami.io/mutex.lock lock is HAMi's")
    # Flags: auto goes back to the default rule; HAMi's key on a Lease is refused.
    assert resolved(node, tmp_path, node_lock_object="auto").binding.lock.lock_object == "lease"
    with pytest.raises(ConfigError, match="--node-lock-key, --node-lock-object: the hami"):
        resolved(None, tmp_path, node_lock_object="lease", node_lock_key="hami.io/mutex.lock")


def test_when_alone_and_the_member_duration(tmp_path: Path) -> None:
    lock = parse(HEAD, IN_TREE).binding.lock
    assert (lock.when_alone, lock.member_duration) == ("skip", 15.0)
    given = {**HEAD, "ascheduler": {"nodeLock": {"whenAlone": "lock", "memberDuration": "45s"}}}
    lock = parse(given, IN_TREE).binding.lock
    assert (lock.when_alone, lock.member_duration) == ("lock", 45.0)
    assert problems(
        {"ascheduler": {"nodeLock": {"whenAlone": "never", "memberDuration": "0s"}}}
    ) == [
        "ascheduler.nodeLock.whenAlone: must be one of skip, lock, got 'never'",
        "ascheduler.nodeLock.memberDuration: must be positive",
    ]
    flag = resolved(given, tmp_path, node_lock_when_alone="skip").binding.lock
    assert flag.when_alone == "skip"
    with pytest.raises(ConfigError, match="--node-lock-when-alone"):
        resolved(None, tmp_path, node_lock_when_alone="sometimes")


def test_lease_groups_from_the_file_and_the_flag(tmp_path: Path) -> None:
    assert parse(HEAD, IN_TREE).binding.lock.lease_groups == DEFAULT_LEASE_GROUPS
    given = {**HEAD, "ascheduler": {"nodeLock": {"leaseGroups": 64}}}
    assert parse(given, IN_TREE).binding.lock.lease_groups == 64
    assert problems({"ascheduler": {"nodeLock": {"leaseGroups": -1}}}) == [
        "ascheduler.nodeLock.leaseGroups: must be in 0..1000000, got -1"
    ]
    assert problems({"ascheduler": {"nodeLock": {"leaseGroups": "many"}}}) == [
        "ascheduler.nodeLock.leaseGroups: expected an integer, got 'many'"
    ]
    assert problems({"ascheduler": {"nodeLock": {"leaseGroups": 8, "object": "node"}}}) == [
        "ascheduler.nodeLock.leaseGroups: lease groups need the locks on Leases"
    ]
    assert resolved(given, tmp_path, node_lock_lease_groups=0).binding.lock.lease_groups == 0
    assert resolved(None, tmp_path, node_lock_lease_groups=16).binding.lock.lease_groups == 16
    with pytest.raises(ConfigError, match="--node-lock-lease-groups: node lock lease groups"):
        resolved(None, tmp_path, node_lock_lease_groups=16, node_lock_object="node")
    # HAMi's key, on the Node, beside a file's lease groups: the key is what conflicts.
    with pytest.raises(ConfigError, match="--node-lock-object: node lock lease groups need"):
        resolved(given, tmp_path, node_lock_key="hami.io/mutex.lock")
    document = to_document(parse(given, IN_TREE), IN_TREE)
    assert document["ascheduler"]["nodeLock"]["leaseGroups"] == 64


def test_lease_groups_default_follows_where_the_locks_are(tmp_path: Path) -> None:
    """Unnamed, the number is the default on Leases and none on Nodes (HAMi's key puts
    them there), wherever the file or the flags put the locks; named, it stays."""

    def groups(document: dict[str, Any] | None, **flags: Any) -> int:
        return int(resolved(document, tmp_path, **flags).binding.lock.lease_groups)

    assert groups(None) == DEFAULT_LEASE_GROUPS
    assert groups({}) == DEFAULT_LEASE_GROUPS
    assert groups(None, node_lock_object="node") == 0
    assert groups(None, node_lock_key="hami.io/mutex.lock") == 0
    on_nodes = {"ascheduler": {"nodeLock": {"object": "node"}}}
    assert groups(on_nodes) == 0
    assert groups(on_nodes, node_lock_object="lease") == DEFAULT_LEASE_GROUPS
    hami = {"ascheduler": {"nodeLock": {"key": "hami.io/mutex.lock"}}}
    assert groups(hami) == 0
    per_node = {"ascheduler": {"nodeLock": {"leaseGroups": 0}}}
    assert groups(per_node) == 0
    assert groups(per_node, node_lock_lease_groups=8) == 8
    # A number the file named is kept, and still conflicts with locks moved off Leases.
    with pytest.raises(ConfigError, match="lease groups need"):
        resolved(
            {"ascheduler": {"nodeLock": {"leaseGroups": 8}}}, tmp_path, node_lock_object="node"
        )
    # The effective configuration names the number: read back, it stays.
    document = to_document(resolved(None, tmp_path, node_lock_object="node"), IN_TREE)
    assert document["ascheduler"]["nodeLock"]["leaseGroups"] == 0


def test_the_lock_linger_is_a_duration_zero_allowed(tmp_path: Path) -> None:
    assert parse(HEAD, IN_TREE).binding.lock.linger == 10.0
    zero = {**HEAD, "ascheduler": {"nodeLock": {"linger": "0s"}}}
    assert parse(zero, IN_TREE).binding.lock.linger == 0.0
    (problem,) = problems({"ascheduler": {"nodeLock": {"linger": "soon"}}})
    assert problem == "ascheduler.nodeLock.linger: not a duration: 'soon'"
    assert resolved(zero, tmp_path, node_lock_linger="30s").binding.lock.linger == 30.0
    with pytest.raises(ConfigError, match="--node-lock-linger"):
        resolved(None, tmp_path, node_lock_linger="-1s")


def test_an_election_the_flag_turns_on_is_checked(tmp_path: Path) -> None:
    odd = {"leaderElection": {"leaderElect": False, "leaseDuration": "5s", "renewDeadline": "10s"}}
    assert not resolved(odd, tmp_path).leader_election.leader_elect
    with pytest.raises(ConfigError) as err:
        resolved(odd, tmp_path, leader_elect=True)
    assert err.value.problems == [
        "leaderElection.leaseDuration: must be greater than renewDeadline (5s <= 10s)"
    ]


def test_the_sharding_section_is_read_and_written_back() -> None:
    own = {"sharding": {"enabled": True, "group": "team-a", "memberDuration": "30s"}}
    config = parse({**HEAD, "ascheduler": own}, IN_TREE)
    assert (config.sharding.enabled, config.sharding.group) == (True, "team-a")
    assert config.sharding.member_duration == 30.0
    assert to_document(config, IN_TREE)["ascheduler"]["sharding"] == own["sharding"]
    assert not parse(HEAD, IN_TREE).sharding.enabled  # off unless asked for


def test_a_bad_sharding_section_names_each_problem() -> None:
    with pytest.raises(ConfigError) as err:
        parse(
            {
                **HEAD,
                "ascheduler": {
                    "sharding": {"enabled": "yes", "memberDuration": "-1s", "members": 3}
                },
            },
            IN_TREE,
        )
    assert set(err.value.problems) >= {
        "ascheduler.sharding.members: unknown field",
        "ascheduler.sharding.enabled: expected true or false, got 'yes'",
        "ascheduler.sharding.memberDuration: must be positive",
    }
    with pytest.raises(ConfigError, match=r"ascheduler\.sharding: group must be"):
        parse({**HEAD, "ascheduler": {"sharding": {"group": "a_b"}}}, IN_TREE)
