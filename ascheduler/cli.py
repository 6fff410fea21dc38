"""The `ascheduler` command line."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ascheduler import __version__

if TYPE_CHECKING:
    from ascheduler.config import SchedulerConfig
    from ascheduler.framework import Registry


def _say(message: str) -> None:
    print(f"ascheduler: {message}", file=sys.stderr, flush=True)


def _run_options(run: argparse.ArgumentParser) -> None:
    """The options `run` and `binder` share (the binder reads the same file and flags): the
    file, the flags of `ascheduler.config.flags` over it, logging and plugins."""
    from ascheduler.config.flags import add_flags

    run.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file; the flags "
        "below override what it (or, without one, the defaults) says",
    )
    run.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    _plugins_option(run)
    add_flags(run)


def _cluster_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = sub.add_parser(
        "cluster",
        help="build and run a local control plane (etcd, kube-apiserver, kwok) on loopback",
        description="A real Kubernetes control plane on loopback for development, tests, the "
        "demo and benchmarks. Binaries are built from their Go modules once and cached.",
    )
    verbs = cluster.add_subparsers(dest="verb", required=True, metavar="VERB")

    build = verbs.add_parser(
        "build",
        help="build etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, kwok",
    )
    build.add_argument("--force", action="store_true", help="rebuild even if cached")

    def with_release(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        from ascheduler.devcluster.versions import DEFAULT_RELEASE, RELEASE_ENV, RELEASES

        p.add_argument(
            "--kubernetes-version",
            default=None,
            metavar="VERSION",
            help=f"the Kubernetes release to build or run: "
            f"{', '.join(r.kubernetes for r in RELEASES.values())} (default: ${RELEASE_ENV}, "
            f"else {RELEASES[DEFAULT_RELEASE].kubernetes}); etcd and kwok follow it",
        )
        return p

    with_release(build)

    def with_state_dir(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument(
            "--state-dir",
            type=Path,
            default=None,
            help="where the plane keeps its state (default: <cache>/plane)",
        )
        return p

    up = with_release(
        with_state_dir(verbs.add_parser("up", help="start a plane and print its KUBECONFIG"))
    )
    up.add_argument(
        "--benchmark",
        action="store_true",
        help="turn off API priority-and-fairness and inflight limits",
    )
    up.add_argument(
        "--apiserver-port",
        type=int,
        default=0,
        help="kube-apiserver's port on 127.0.0.1 (default: a free one)",
    )
    up.add_argument("--nodes", type=int, default=0, help="also create this many fake nodes")
    up.add_argument(
        "--feature-gates",
        default="",
        help="feature gates of the plane's apiserver, controller manager and kube-scheduler, "
        "e.g. GenericWorkload=true (it also serves the Workload API; before 1.37 gangs need "
        "GangScheduling=true too)",
    )
    with_state_dir(verbs.add_parser("down", help="stop every process of the plane and remove it"))
    with_state_dir(verbs.add_parser("status", help="show the plane's processes"))
    with_state_dir(verbs.add_parser("env", help="print `export KUBECONFIG=...` for the plane"))


def _plugins_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--plugin",
        action="append",
        dest="plugins",
        default=[],
        metavar="MODULE:ATTRIBUTE",
        help="also register this plugin Registration from a module on the path (repeatable); "
        "installed packages' plugins (entry-point group ascheduler.plugins) always are",
    )


def _explain_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`explain`: a few of run's flags (from the same table, with help of its own)."""
    from ascheduler.config.flags import flag

    explain = sub.add_parser(
        "explain",
        help="why a pod is pending, where it would go, how many copies fit",
        description="List the cluster and run the scheduler's plugins over it in a dry run "
        "(nothing is written): the message kube-scheduler would give, the nodes each filter "
        "rejected and why, in numbers, the victims preemption would pick, and each feasible "
        "node's scores. POD is NAMESPACE/NAME, NAME (with -n) or pod/NAME; or give -f with a "
        "manifest of a pod not created yet.",
    )
    explain.add_argument("pod", nargs="?", help="NAMESPACE/NAME, NAME or pod/NAME")
    explain.add_argument("-n", "--namespace", default=None, help="the pod's namespace")
    explain.add_argument(
        "-f", "--filename", default=None, metavar="FILE", help="a Pod manifest ('-': stdin)"
    )
    explain.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="a KubeSchedulerConfiguration to try (default: kube-scheduler's default "
        "plugins, as a profile named after the pod's schedulerName)",
    )
    flag("kubeconfig").add_to(explain, help="default: $KUBECONFIG, ~/.kube/config")
    explain.add_argument("--context", default=None, help="the kubeconfig context to use")
    explain.add_argument(
        "--profile",
        default=None,
        metavar="SCHEDULER_NAME",
        help="explain under this profile of the configuration (default: the pod's schedulerName)",
    )
    flag("emulated_version").add_to(explain, help=None)
    flag("feature_gates").add_to(explain, help=None)
    flag("percentage_of_nodes_to_score").add_to(explain, help="as kube-scheduler's")
    explain.add_argument(
        "-o", "--output", default="table", choices=("table", "json", "yaml"), help="default: table"
    )
    explain.add_argument(
        "--replicas",
        type=int,
        default=0,
        metavar="N",
        help="also place N copies one after another as the scheduler would: how many fit, where",
    )
    explain.add_argument(
        "--limit",
        type=int,
        default=10,
        metavar="N",
        help="nodes shown per group of rejected nodes and feasible nodes shown with scores "
        "(default: 10; 0: all)",
    )
    explain.add_argument(
        "--log-level", default="warning", choices=["debug", "info", "warning", "error"]
    )
    _plugins_option(explain)


def _registry(args: argparse.Namespace) -> Registry:
    """In-tree plugins, installed packages' plugins, and those named with --plugin."""
    from ascheduler.plugins import IN_TREE

    return IN_TREE.with_entry_points().with_modules(args.plugins)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ascheduler",
        description="An asyncio-native Kubernetes scheduler with kube-scheduler's semantics.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("version", help="print the version")
    run = sub.add_parser(
        "run",
        help="run the scheduler",
        description="Schedule every pod whose spec.schedulerName names one of the profiles "
        "(default: ascheduler) and leave all other pods alone.",
    )
    _run_options(run)
    binder = sub.add_parser(
        "binder",
        help="bind the pods BindRequests name (for schedulers run with --binding bindrequest)",
        description="Watch BindRequests and bind their pods, under the node locks the lock "
        "policy asks for; retry failed binds with backoff up to each request's backoffLimit. "
        "Reads the scheduler's configuration file and flags (kubeconfig, client, leader "
        "election, node locks, serving); its Lease defaults to ascheduler-binder and its "
        "secure port to 10260.",
    )
    _run_options(binder)
    binder.add_argument(
        "--workers", type=int, default=64, help="BindRequests handled at once (default: 64)"
    )
    binder.add_argument(
        "--finished-ttl",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long a request whose pod is bound is kept before it is deleted (default: 30)",
    )
    _explain_parser(sub)
    config = sub.add_parser("config", help="check or print scheduler configuration files")
    config_verbs = config.add_subparsers(dest="verb", required=True, metavar="VERB")
    validate = config_verbs.add_parser(
        "validate", help="report every problem in a file, with its path; exit 2 if any"
    )
    validate.add_argument("file")
    _plugins_option(validate)
    defaults = config_verbs.add_parser("defaults", help="print the effective default configuration")
    _plugins_option(defaults)
    from ascheduler.config.flags import flag
    from ascheduler.features import DEFAULT_RELEASE

    for verb in (validate, defaults):
        # A release reads a configuration its own way (its default profile, plugin args).
        flag("emulated_version").add_to(
            verb,
            help=f"read as this release's kube-scheduler does (default: {DEFAULT_RELEASE}, "
            f"the newest supported)",
        )
        flag("feature_gates").add_to(verb, help=None)
    _cluster_parser(sub)
    return parser


def _config(args: argparse.Namespace) -> int:
    import yaml

    from ascheduler.config import Overrides, SchedulerConfig, apply, load, parse, to_document
    from ascheduler.features import DEFAULT_RELEASE
    from ascheduler.framework import ConfigError

    try:
        # No API server to ask: the release is the one named, else the default one, and the
        # gates are checked there as that release's kube-scheduler checks them.
        release = Overrides(
            emulated_version=args.emulated_version or str(DEFAULT_RELEASE),
            feature_gates=args.feature_gates,
        )
        gates = apply(SchedulerConfig(), release).features
    except ConfigError as exc:
        for problem in exc.problems:  # each names its flag
            print(problem, file=sys.stderr)
        return 2
    try:
        registry = _registry(args)
        if args.verb == "defaults":
            defaults = parse(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                },
                registry,
                gates,
            )
            print(yaml.safe_dump(to_document(defaults, registry), sort_keys=False), end="")
            return 0
        # With no flag given, as `run` would start from it: the checks across settings too.
        apply(load(args.file, registry, gates), Overrides())
    except ConfigError as exc:
        where = f"{args.file}: " if args.verb == "validate" else ""
        for problem in exc.problems:
            print(f"{where}{problem}", file=sys.stderr)
        return 2
    print(f"{args.file}: valid")
    return 0


def _cluster(args: argparse.Namespace) -> int:
    from ascheduler.devcluster import BuildError, ControlPlane, PlaneError, ensure_built
    from ascheduler.devcluster.versions import UnsupportedRelease, release

    try:
        if args.verb in ("build", "up"):
            kubernetes = release(args.kubernetes_version)
        if args.verb == "build":
            bins = ensure_built(force=args.force, progress=_say, release=kubernetes)
            for path in bins.all():
                print(path)
            return 0
        if args.verb == "up":
            bins = ensure_built(progress=_say, release=kubernetes)
            plane = ControlPlane(
                args.state_dir,
                bins=bins,
                benchmark=args.benchmark,
                apiserver_port=args.apiserver_port,
                progress=_say,
                feature_gates=args.feature_gates,
            )
            state = plane.up()
            if args.nodes:
                _say(f"creating {args.nodes} fake nodes")
                asyncio.run(_create_nodes(state.admin_kubeconfig, args.nodes))
            _say(
                f"Kubernetes {state.kubernetes_version} plane ready at {state.server} "
                f"(state in {state.state_dir})"
            )
            _say(f"kubectl: {bins.kubectl} (add its directory to PATH after the export below)")
            print(f"export KUBECONFIG={state.admin_kubeconfig}")
            print(f"export PATH={bins.kubectl.parent}:$PATH")
            return 0
        plane_or_none = ControlPlane.attach(args.state_dir)
        if plane_or_none is None:
            _say("no plane is up" + (f" in {args.state_dir}" if args.state_dir else ""))
            return 0 if args.verb == "down" else 1
        if args.verb == "down":
            plane_or_none.down()
            _say("plane stopped")
        elif args.verb == "status":
            state = plane_or_none.require_state()
            print(f"server {state.server}")
            for record in state.processes:
                alive = plane_or_none.status()[record.name]
                print(
                    f"{record.name:16} pid {record.pid:<8} {'running' if alive else 'DEAD'}"
                    f"  log {record.log}"
                )
            return 0 if all(plane_or_none.status().values()) else 1
        elif args.verb == "env":
            for key, value in plane_or_none.env().items():
                print(f"export {key}={value}")
        return 0
    except (BuildError, PlaneError, UnsupportedRelease) as exc:
        _say(f"error: {exc}")
        return 1


async def _create_nodes(kubeconfig: Path, count: int) -> None:
    from ascheduler.devcluster.nodes import FakeNodes, create_fake_nodes, wait_nodes_ready
    from ascheduler.kube import KubeClient

    async with await KubeClient.connect(str(kubeconfig)) as kube:
        names = await create_fake_nodes(kube, FakeNodes(count=count))
        await wait_nodes_ready(kube, names)


def _config_of(
    args: argparse.Namespace, secure_port: int
) -> tuple[SchedulerConfig, Registry] | None:
    """The configuration `run` and `binder` start from: the file, then the flags (the
    secure port `secure_port` unless --secure-port); None after printing every problem."""
    from ascheduler import logs
    from ascheduler.config import Overrides, resolve
    from ascheduler.framework import ConfigError

    logs.configure(args.log_level)
    overrides = Overrides.from_args(args, secure_port=secure_port)
    try:
        registry = _registry(args)
        return resolve(args.config, overrides, registry), registry
    except ConfigError as exc:
        where = f"{args.config}: " if args.config else ""
        for problem in exc.problems:
            print(
                f"ascheduler: {where if not problem.startswith('--') else ''}{problem}",
                file=sys.stderr,
            )
        return None


def _run(args: argparse.Namespace) -> int:
    import uvloop

    from ascheduler import app
    from ascheduler.http import DEFAULT_SECURE_PORT

    resolved = _config_of(args, DEFAULT_SECURE_PORT)
    if resolved is None:
        return 2
    config, registry = resolved
    from ascheduler.framework import ConfigError

    try:
        return uvloop.run(app.main(config, registry))
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"ascheduler: {problem}", file=sys.stderr)
        return 2


def _binder(args: argparse.Namespace) -> int:
    import dataclasses

    import uvloop

    from ascheduler.binding import service

    if args.workers < 1:
        print(f"ascheduler: --workers: must be at least 1, got {args.workers}", file=sys.stderr)
        return 2
    # Its own secure port and Lease unless told otherwise: it runs beside the scheduler.
    resolved = _config_of(args, service.BINDER_SECURE_PORT)
    if resolved is None:
        return 2
    config, _ = resolved
    election = config.leader_election
    if args.leader_elect_resource_name is None and election.resource_name == "ascheduler":
        election = dataclasses.replace(election, resource_name=service.BINDER_LEASE)
    config = dataclasses.replace(config, leader_election=election)
    from ascheduler.framework import ConfigError

    try:
        return uvloop.run(
            service.main(config, workers=args.workers, finished_ttl=max(args.finished_ttl, 0.0))
        )
    except ConfigError as exc:  # the API server's release refuses the configuration
        for problem in exc.problems:
            print(f"ascheduler: {problem}", file=sys.stderr)
        return 2


def _pod_name(args: argparse.Namespace) -> tuple[str, str]:
    """(namespace, name) from POD and -n; ValueError when it says neither or both ways."""
    text = str(args.pod)
    if text.startswith(("pod/", "pods/", "po/")):
        text = text.split("/", 1)[1]
    namespace, sep, name = text.rpartition("/")
    if sep:
        if args.namespace and args.namespace != namespace:
            raise ValueError(f"{args.pod}: the namespace is given twice ({args.namespace})")
        if not namespace or not name:
            raise ValueError(f"{args.pod}: not NAMESPACE/NAME")
        return namespace, name
    return args.namespace or "default", name


def _explain(args: argparse.Namespace) -> int:
    import gc

    import uvloop

    # One short run that builds the cluster's objects once and keeps them to the end: the
    # cyclic collector would only walk them again and again.
    gc.disable()

    args.manifest = ""
    if args.filename is not None:
        try:
            args.manifest = (
                sys.stdin.read() if args.filename == "-" else Path(args.filename).read_text()
            )
        except OSError as exc:
            _say(f"explain: {exc}")
            return 2
    return uvloop.run(_explain_async(args))


async def _explain_async(args: argparse.Namespace) -> int:
    import dataclasses

    import yaml

    from ascheduler import logs
    from ascheduler.config import Overrides, resolve
    from ascheduler.explain.cold import ExplainError, explain_cold, pod_from_document, read_pod
    from ascheduler.explain.render import render, table
    from ascheduler.framework import ConfigError
    from ascheduler.kube import KubeClient

    logs.configure(args.log_level)
    if (args.pod is None) == (args.filename is None):
        _say("explain: give a POD or -f FILE (one of them)")
        return 2
    if args.replicas < 0:
        _say(f"explain: --replicas: must be at least 0, got {args.replicas}")
        return 2
    try:
        if args.filename is not None:
            text = args.manifest
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
            if len(docs) != 1:
                raise ExplainError(
                    f"{args.filename}: expected one Pod, found {len(docs)} documents"
                )
            pod = pod_from_document(docs[0], args.namespace)
        else:
            namespace, name = _pod_name(args)
            async with await KubeClient.connect(args.kubeconfig, context=args.context) as kube:
                pod = await read_pod(kube, namespace, name)
        names = None if args.config else (args.profile or pod.scheduler_name,)
        overrides = Overrides(
            kubeconfig=args.kubeconfig,
            scheduler_names=names,
            emulated_version=args.emulated_version,
            feature_gates=args.feature_gates,
            percentage_of_nodes_to_score=args.percentage_of_nodes_to_score,
        )
        registry = _registry(args)
        config = dataclasses.replace(
            resolve(args.config, overrides, registry), context=args.context, http_address=None
        )
        report = await explain_cold(
            config,
            registry,
            pod,
            profile=args.profile,
            replicas=args.replicas,
            limit=args.limit,
        )
    except ConfigError as exc:
        where = f"{args.config}: " if args.config else ""
        for problem in exc.problems:
            _say(f"{where}{problem}")
        return 2
    except (ExplainError, ValueError, OSError, yaml.YAMLError) as exc:
        _say(f"explain: {exc}")
        return 2
    if args.output == "table":
        sys.stdout.write(table(report.explanation, report.capacity))
    else:
        sys.stdout.write(render(report.to_dict(), args.output))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "version":
        print(f"ascheduler {__version__}")
        return 0
    if args.command == "config":
        return _config(args)
    if args.command == "cluster":
        return _cluster(args)
    if args.command == "run":
        return _run(args)
    if args.command == "binder":
        return _binder(args)
    if args.command == "explain":
        return _explain(args)
    raise AssertionError(f"unhandled command {args.command!r}")


def kubectl_main() -> int:
    """`kubectl ascheduler ...`: kubectl finds `kubectl-ascheduler` on the PATH and runs it
    with the words after `ascheduler` (the user's kubeconfig and context apply as they do
    for kubectl: $KUBECONFIG, or --kubeconfig / --context)."""
    return main(sys.argv[1:])
