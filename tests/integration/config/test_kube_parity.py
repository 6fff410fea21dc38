"""Configuration files as kube-scheduler reads them: the corpus in `corpus/`, each file run
through the plane release's kube-scheduler `--write-config-to` (v1.35 unless
`ASCHEDULER_KUBE_VERSION` names another) and through `ascheduler.config.parse` at that release.

ascheduler must accept exactly the files kube-scheduler accepts, and end with the same
effective profiles: the plugins of each extension point in order, the Score weights
(kube-scheduler logs them at -v=2, "the scheduler starts to work with those plugins"), and
each plugin's args after defaulting (the written file's pluginConfig). Each file's first line
says what kube-scheduler does with it, and a line `# from 1.36 kube-scheduler accepts: ...`
after it what a later release does instead, so a corpus file that stops meaning what it says
fails too. `PENDING` names the files a release reads in a way ascheduler does not yet.

Only the kube-scheduler binary is needed, not the plane: `--master` points it at an address
nothing listens on (it writes the file and exits before connecting), `--secure-port 0` binds
nothing, so the runs go side by side.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from ascheduler.cli import main
from ascheduler.config import parse
from ascheduler.devcluster import ensure_built, versions
from ascheduler.durations import parse_seconds
from ascheduler.features import Features, Release
from ascheduler.framework import EXTENSION_POINTS, ConfigError, Handle, multipoint
from ascheduler.framework.args import encode
from ascheduler.framework.runtime import Framework
from ascheduler.plugins import IN_TREE

CORPUS = Path(__file__).parent / "corpus"
FILES = sorted(CORPUS.glob("*.yaml"))
#: The plane's release, which both read the files as.
RELEASE = Release.parse(versions.release().kubernetes)
FEATURES = Features.defaults(RELEASE)
#: Files a release reads in a way ascheduler does not yet: (file, from release) -> why.
PENDING: dict[tuple[str, Release], str] = {}
#: Plugins whose written args a release defaults in a way ascheduler does not yet: (plugin,
#: from release) -> why; their args are not compared there.
PENDING_ARGS: dict[tuple[str, Release], str] = {}
#: Plugins ascheduler has that kube-scheduler v1.35 does not run by default.
ASCHEDULER_ONLY = frozenset({"Coscheduling", "GangScheduling", "BindRequestBinder"})
#: kube-scheduler's ListPlugins keys, and the Framework's lists.
POINTS = {
    "PreEnqueue": "pre_enqueue_plugins",
    "QueueSort": "queue_sort",
    "PreFilter": "pre_filter_plugins",
    "Filter": "filter_plugins",
    "PostFilter": "post_filter_plugins",
    "PodGroupPostFilter": "pod_group_post_filter_plugins",
    "PreScore": "pre_score_plugins",
    "Score": "score_plugins",
    "Reserve": "reserve_plugins",
    "Permit": "permit_plugins",
    "PreBind": "pre_bind_plugins",
    "Bind": "bind_plugins",
    "PostBind": "post_bind_plugins",
}
_STARTS = re.compile(r'"the scheduler starts to work with those plugins" Plugins=(\{.*\})\s*$')


@dataclass
class KubeVerdict:
    accepted: bool
    #: The written configuration (accepted files only).
    written: dict[str, Any]
    #: Per profile, in order: extension point -> [(plugin, weight)].
    plugins: list[dict[str, list[tuple[str, int]]]]
    stderr: str


def _kube(binary: Path, source: Path, out: Path) -> KubeVerdict:
    done = subprocess.run(
        [
            str(binary),
            "--config",
            str(source),
            "--master",
            "https://127.0.0.1:1",
            "--secure-port",
            "0",
            "--write-config-to",
            str(out),
            "-v=2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0 or not out.exists():
        failed = [line for line in done.stderr.splitlines() if "command failed" in line]
        return KubeVerdict(False, {}, [], "\n".join(failed) or done.stderr[-2000:])
    plugins = []
    for line in done.stderr.splitlines():
        match = _STARTS.search(line)
        if match:
            listed = json.loads(match.group(1))
            plugins.append(
                {
                    point: [(p["Name"], p["Weight"]) for p in (sets.get("Enabled") or [])]
                    for point, sets in listed.items()
                    if point in POINTS
                }
            )
    return KubeVerdict(True, yaml.safe_load(out.read_text()), plugins, done.stderr)


@pytest.fixture(scope="module")
def kube_verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KubeVerdict]:
    binary = ensure_built(progress=lambda _: None).kube_scheduler
    out = tmp_path_factory.mktemp("written")
    with ThreadPoolExecutor(max_workers=4) as pool:
        verdicts = pool.map(lambda f: _kube(binary, f, out / f.name), FILES)
        return {f.name: v for f, v in zip(FILES, verdicts, strict=True)}


def _ours(fw: Framework) -> dict[str, list[tuple[str, int]]]:
    out = {}
    for point, attribute in POINTS.items():
        listed = getattr(fw, attribute)
        plugins = listed if isinstance(listed, list) else [listed]
        out[point] = [
            (p.name, fw.weights[p.name] if point == "Score" else 0)
            for p in plugins
            if p.name not in ASCHEDULER_ONLY
        ]
    return out


def _both_implement(
    listed: dict[str, list[tuple[str, int]]], kube_points: dict[str, set[str]]
) -> dict[str, list[tuple[str, int]]]:
    """`listed` restricted, point by point, to the plugins both schedulers implement there:
    ascheduler's plugins do some work at other points than kube-scheduler's (NodeResourcesFit
    needs no PreScore, its Score reads the node table), which is not configuration."""
    ours = Framework(multipoint("all"), IN_TREE, Handle(features=FEATURES)).plugins
    return {
        point: [
            (name, weight)
            for name, weight in entries
            if name in kube_points[point]
            and name in ours
            and isinstance(ours[name], EXTENSION_POINTS[point[0].lower() + point[1:]])
        ]
        for point, entries in listed.items()
    }


def _plain(value: Any) -> Any:
    """`value` without what only says "nothing" (empty lists and maps, None, and the zero
    values Go's `omitempty` leaves out), which one side writes and the other does not."""
    if isinstance(value, dict):
        kept = {k: _plain(v) for k, v in value.items() if k not in ("apiVersion", "kind")}
        return {k: v for k, v in kept.items() if v not in (None, [], {}, "", 0)}  # False == 0
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _expectation(path: Path, release: Release = RELEASE) -> bool:
    """What the file's header says kube-scheduler of `release` does with it."""
    lines = path.read_text().splitlines()
    match = re.fullmatch(r"# kube-scheduler (accepts|refuses): .+", lines[0])
    assert match, f"{path.name}: the first line says what kube-scheduler does with it"
    verdict = match.group(1)
    for line in lines[1:]:
        later = re.fullmatch(r"# from (\d+\.\d+) kube-scheduler (accepts|refuses): .+", line)
        if later is None:
            break
        if release >= Release.parse(later.group(1)):
            verdict = later.group(2)
    return verdict == "accepts"


def _pending(path: Path) -> str | None:
    found = [
        why for (name, since), why in PENDING.items() if name == path.name and since <= RELEASE
    ]
    return found[0] if found else None


def test_the_corpus_has_both_kinds() -> None:
    kinds = {_expectation(f) for f in FILES}
    assert kinds == {True, False}


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_ascheduler_reads_the_file_as_kube_scheduler_does(
    path: Path, kube_verdicts: dict[str, KubeVerdict]
) -> None:
    kube = kube_verdicts[path.name]
    # Which plugin kube-scheduler runs at which point: its default profile lists them all.
    kube_points = {
        point: {name for name, _ in entries}
        for point, entries in kube_verdicts["empty.yaml"].plugins[0].items()
    }
    assert kube.accepted == _expectation(path), kube.stderr
    pending = _pending(path)
    if pending is not None:
        pytest.xfail(pending)
    document = yaml.safe_load(path.read_text())
    if not kube.accepted:
        with pytest.raises(ConfigError):
            parse(document, IN_TREE, FEATURES)
        return
    try:
        config = parse(document, IN_TREE, FEATURES)
    except ConfigError as exc:
        pytest.fail(f"kube-scheduler accepts it; ascheduler refuses it: {exc.problems}")
    written = kube.written
    assert config.percentage_of_nodes_to_score == written["percentageOfNodesToScore"]
    assert config.queue.initial_backoff == written["podInitialBackoffSeconds"]
    assert config.queue.max_backoff == written["podMaxBackoffSeconds"]
    election, theirs_election = config.leader_election, written["leaderElection"]
    assert election.leader_elect == theirs_election["leaderElect"]
    if election.leader_elect:
        for ours_seconds, key in (
            (election.lease_duration, "leaseDuration"),
            (election.renew_deadline, "renewDeadline"),
            (election.retry_period, "retryPeriod"),
        ):
            assert ours_seconds == parse_seconds(theirs_election[key]), key
        assert election.resource_namespace == theirs_election["resourceNamespace"]
        if "resourceName" in (document.get("leaderElection") or {}):
            assert election.resource_name == theirs_election["resourceName"]
    client = document.get("clientConnection") or {}
    assert config.burst == written["clientConnection"]["burst"]
    if (client.get("qps") or 0) > 0:  # unset, ascheduler sets no limit where kube's is 50
        assert config.qps == written["clientConnection"]["qps"]
    assert [_plain(encode(e)) for e in config.extenders] == [
        _plain(e) for e in written.get("extenders") or []
    ]
    assert len(config.profiles) == len(written["profiles"]) == len(kube.plugins)
    for i, (spec, theirs, listed) in enumerate(
        zip(config.profiles, written["profiles"], kube.plugins, strict=True)
    ):
        if "schedulerName" in (document.get("profiles") or [{}])[i]:
            assert spec.scheduler_name == theirs["schedulerName"]
        assert spec.percentage_of_nodes_to_score == theirs.get("percentageOfNodesToScore")
        fw = Framework(spec, IN_TREE, Handle(features=FEATURES))
        theirs_listed = {point: listed.get(point, []) for point in POINTS}
        assert _both_implement(_ours(fw), kube_points) == _both_implement(
            theirs_listed, kube_points
        )
        their_args = {c["name"]: _plain(c["args"]) for c in theirs.get("pluginConfig") or []}
        for name, args in fw.args.items():
            # A plugin without args passes what it is given through, unread, on both sides.
            pending = any(n == name and since <= RELEASE for n, since in PENDING_ARGS)
            if name in their_args and dataclasses.fields(args) and not pending:
                assert _plain(encode(args)) == their_args[name], name


def test_config_defaults_at_the_release_are_kube_scheduler_s(
    kube_verdicts: dict[str, KubeVerdict], capsys: pytest.CaptureFixture[str]
) -> None:
    """`ascheduler config defaults --emulated-version <the plane's release>` prints what that
    release's kube-scheduler writes for an empty file: the default profile's plugins in order
    and every plugin's defaulted args (the ones both have and compare)."""
    assert main(["config", "defaults", "--emulated-version", str(RELEASE)]) == 0
    ours = yaml.safe_load(capsys.readouterr().out)
    theirs = kube_verdicts["empty.yaml"].written
    for key in ("percentageOfNodesToScore", "podInitialBackoffSeconds", "podMaxBackoffSeconds"):
        assert ours[key] == theirs[key], key
    (profile,) = ours["profiles"]
    (their_profile,) = theirs["profiles"]
    assert [
        p["name"]
        for p in profile["plugins"]["multiPoint"]["enabled"]
        if p["name"] not in ASCHEDULER_ONLY
    ] == [p["name"] for p in their_profile["plugins"]["multiPoint"]["enabled"]]
    our_args = {c["name"]: _plain(c["args"]) for c in profile["pluginConfig"]}
    their_args = {c["name"]: _plain(c["args"]) for c in their_profile["pluginConfig"]}
    compared = {
        name
        for name in their_args
        if not any(n == name and since <= RELEASE for n, since in PENDING_ARGS)
    }
    assert compared
    for name in sorted(compared):
        assert our_args.get(name, {}) == their_args[name], name
