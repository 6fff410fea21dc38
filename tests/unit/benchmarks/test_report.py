"""What a benchmark run reports: medians and run-by-run ratios per mode, the faster ceiling and
which limit the ceilings show, the result files, and benchmarks/README.md's tables (one per
mode) from the newest result of each workload and mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ascheduler.devcluster.versions import DEFAULT_RELEASE, RELEASES
from benchmarks import report
from benchmarks.common import save
from benchmarks.summary import ceiling_verdict, per_second, percentile, ratios, summarise

BASIC = "SchedulingBasic_500Nodes_1000Pods"


def run_result(
    scheduler: str, pods_per_s: float, *, mode: str = "steady", rss: int = 100 * 2**20
) -> dict[str, Any]:
    paced = (
        {"first_bind_s": 1.5, "last_bind_s": 10.0}
        if mode == "backlog"
        else {"latency_p50": 0.5, "latency_p90": 0.8, "latency_p99": 1.0}
    )
    return {
        "scheduler": scheduler,
        "mode": mode,
        "pods": 100,
        "throughput_avg": pods_per_s,
        "throughput_p50": pods_per_s,
        "throughput_p90": pods_per_s,
        "throughput_p99": pods_per_s,
        **paced,
        "cpu_seconds": 3.0,
        "peak_rss_bytes": rss,
        "requests_per_pod": 2.0,
        "requests": {"POST 201": 200.0},
        "created_per_s": 900.0,
        "samples": [10, int(pods_per_s), int(pods_per_s)],
    }


def result(
    workload: str, date: str, runs: dict[str, list[dict[str, Any]]], mode: str | None = "steady"
) -> dict[str, Any]:
    summary = {w: summarise(r) for w, r in runs.items()}
    data = {
        "workload": workload,
        "mode": mode,
        "description": "d",
        "date": date,
        "repeat": len(next(iter(runs.values()))),
        "plane": "local",
        "summary": summary,
        "ratios": ratios(runs, mode or "steady"),
        "ceiling_limit": ceiling_verdict(summary),
        "runs": runs,
        "versions": {"kubernetes": RELEASES[DEFAULT_RELEASE].kubernetes},
        "machine": {"cpus": 2},
    }
    if mode is None:  # written before there were modes
        del data["mode"]
    return data


def test_percentile_and_summary_are_medians_of_runs() -> None:
    assert percentile([], 0.5) == 0.0
    assert percentile([5, 1, 3], 0.5) == 3
    assert percentile(range(101), 0.99) == 99
    s = summarise([run_result("a", 100), run_result("a", 300), run_result("a", 200)])
    assert s["throughput_avg"] == 200
    assert "mode" not in s
    assert "requests" not in s


def test_per_second_counts_binds_in_each_second_from_the_first() -> None:
    assert per_second([10.0, 10.2, 10.9, 11.0, 12.5], 10.0) == [3, 1, 1]
    assert per_second([3.0], 3.0) == [1]


def test_ratios_pair_runs_by_index() -> None:
    runs = {
        "ascheduler": [run_result("ascheduler", 300), run_result("ascheduler", 200)],
        "kube-scheduler": [run_result("kube-scheduler", 100), run_result("kube-scheduler", 200)],
        "ceiling-go": [run_result("ceiling-go", 600), run_result("ceiling-go", 250)],
        "ceiling-python": [run_result("ceiling-python", 300), run_result("ceiling-python", 400)],
    }
    r = ratios(runs)
    assert r["throughput_avg ascheduler/kube-scheduler"] == {"median": 2.0, "min": 1.0, "max": 3.0}
    assert r["peak_rss_bytes ascheduler/kube-scheduler"]["median"] == 1.0
    assert r["throughput_avg ascheduler/ceiling-go"] == {"median": 0.65, "min": 0.5, "max": 0.8}
    # The ceiling is the faster one run by run: go's 600, then python's 400.
    assert r["throughput_avg ascheduler/ceiling"] == {"median": 0.5, "min": 0.5, "max": 0.5}
    assert r["throughput_avg ceiling-python/ceiling-go"]["max"] == 1.6
    assert "latency_p99 ascheduler/ceiling" not in r
    assert ratios({"kube-scheduler": runs["kube-scheduler"]}) == {}


def test_backlog_ratios_compare_time_to_the_binds_not_latency() -> None:
    runs = {
        "ascheduler": [run_result("ascheduler", 300, mode="backlog")],
        "kube-scheduler": [run_result("kube-scheduler", 100, mode="backlog")],
    }
    r = ratios(runs, "backlog")
    assert r["first_bind_s ascheduler/kube-scheduler"]["median"] == 1.0
    assert r["last_bind_s ascheduler/kube-scheduler"]["median"] == 1.0
    assert not [k for k in r if k.startswith("latency")]


@pytest.mark.parametrize(
    ("go", "python", "says"),
    [
        (1000, 950, "the plane: client-go and the Python client bind at the same rate"),
        (1000, 600, "the Python client: client-go binds 1000 pods/s, ascheduler's client 600"),
        (500, 900, "client-go's transport"),
    ],
)
def test_the_verdict_names_the_limit_the_ceilings_show(go: int, python: int, says: str) -> None:
    summary = {
        "ceiling-go": summarise([run_result("ceiling-go", go)]),
        "ceiling-python": summarise([run_result("ceiling-python", python)]),
    }
    assert ceiling_verdict(summary).startswith(says)
    assert ceiling_verdict({"ceiling-go": summary["ceiling-go"]}) == ""


def test_write_leaves_json_markdown_and_png_per_mode(tmp_path: Path) -> None:
    runs = {
        "ascheduler": [run_result("ascheduler", 300, mode="backlog")],
        "ceiling-go": [run_result("ceiling-go", 400, mode="backlog")],
        "ceiling-python": [run_result("ceiling-python", 380, mode="backlog")],
    }
    paths = report.write(result("W", "2026-01-02T03:04:05+00:00", runs, "backlog"), tmp_path)
    assert paths["json"].name == "2026-01-02-W-backlog.json"
    assert json.loads(paths["json"].read_text())["summary"]["ceiling-go"]["throughput_avg"] == 400
    md = paths["md"].read_text()
    assert md.startswith("### W, backlog\n")
    assert "| first bind s | last bind s |" in md
    assert "| ascheduler | 300 |" in md
    assert "| throughput_avg ascheduler/ceiling | 0.75 (0.75-0.75) |" in md
    assert "The ceilings show the limit of the plane" in md
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_readme_tables_take_the_newest_result_of_each_workload_and_mode(tmp_path: Path) -> None:
    old = {"ascheduler": [run_result("ascheduler", 111)]}
    new = {
        "ascheduler": [run_result("ascheduler", 222)],
        "kube-scheduler": [run_result("kube-scheduler", 111, rss=200 * 2**20)],
    }
    backlog = {
        "ascheduler": [run_result("ascheduler", 900, mode="backlog")],
        "kube-scheduler": [run_result("kube-scheduler", 300, mode="backlog")],
        "ceiling-go": [run_result("ceiling-go", 1000, mode="backlog")],
        "ceiling-python": [run_result("ceiling-python", 950, mode="backlog")],
    }
    for name, workload, date, runs, mode in (
        ("a", BASIC, "2026-01-01T00:00:00+00:00", new, "steady"),
        ("b", BASIC, "2025-12-01T00:00:00+00:00", old, None),
        ("c", "Smoke_10Nodes_40Pods", "2026-01-03T00:00:00+00:00", old, "steady"),
        ("d", BASIC, "2026-01-01T00:00:00+00:00", backlog, "backlog"),
    ):
        (tmp_path / f"{name}.json").write_text(json.dumps(result(workload, date, runs, mode)))
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n{report.BEGIN}\nstale\n{report.END}\nafter\n")
    assert report.update_readme(tmp_path, readme)
    text = readme.read_text()
    assert "stale" not in text
    assert text.startswith("# x\n\nbefore\n")
    assert text.endswith("after\n")
    steady, backlog_table = text.split(report.MODE_TITLES["backlog"])
    (row,) = [line for line in steady.splitlines() if line.startswith(f"| {BASIC}")]
    assert row.split(" | ")[1:5] == ["222", "111", "- / -", "2.00 (2.00-2.00)"]
    assert "100 / 200" in row
    (row,) = [line for line in backlog_table.splitlines() if line.startswith(f"| {BASIC}")]
    cells = row.split(" | ")
    assert cells[1:7] == [
        "900",
        "300",
        "1000 / 950",
        "3.00 (3.00-3.00)",
        "0.90 (0.90-0.90)",
        "the plane",
    ]
    assert "1.5 / 1.5" in row  # first bind, ascheduler / kube-scheduler
    assert "first bind s (a / k)" in backlog_table
    assert "Smoke" not in text  # smoke runs never reach the README
    assert report.update_readme(tmp_path, readme)  # idempotent: markers kept
    assert readme.read_text() == text


def test_cpu_per_pod_is_the_processes_cpu_over_the_pods_it_bound(tmp_path: Path) -> None:
    """A column of its own in a result's table and in the README's, worked out from the CPU
    seconds and the pods bound (so results saved before it have it too)."""
    ours = run_result("ascheduler", 200) | {"cpu_seconds": 0.05, "bound": 100}
    theirs = run_result("kube-scheduler", 100) | {"cpu_seconds": 0.2, "bound": 80}
    none = run_result("ceiling-go", 0) | {"bound": 0}
    assert report.cpu_us_per_pod(summarise([ours])) == 500
    assert report.cpu_us_per_pod(summarise([theirs])) == 2500
    assert report.cpu_us_per_pod(summarise([none])) is None
    # Saved before the pods bound were counted: a finished run bound every pod.
    older = run_result("ascheduler", 200)
    assert "bound" not in older
    assert report.cpu_us_per_pod(summarise([older])) == 30000  # 3 s over 100 pods
    data = result(
        BASIC, "2026-01-01T00:00:00+00:00", {"ascheduler": [ours], "kube-scheduler": [theirs]}
    )
    table = report.markdown(data)
    header = next(line for line in table.splitlines() if line.startswith("| scheduler |"))
    column = header.split(" | ").index("CPU us/pod")
    row = next(line for line in table.splitlines() if line.startswith("| ascheduler |"))
    assert row.split(" | ")[column] == "500"
    readme = report.readme_table([data])
    assert "CPU us/pod (a / k)" in readme
    assert "| 500 / 2500 |" in readme


def test_the_tables_live_in_the_benchmarks_readme_and_are_current() -> None:
    """The generated tables are benchmarks/README.md's, and what is there is what the committed
    results make; the top-level README holds no copy that could go stale."""
    root = Path(report.__file__).resolve().parent.parent
    assert root / "benchmarks" / "README.md" == report.README
    text = report.README.read_text()
    assert text.count(report.BEGIN) == 1
    assert text.count(report.END) == 1
    generated = text.split(report.BEGIN, 1)[1].split(report.END, 1)[0]
    assert generated == f"\n{report.readme_tables(root / 'benchmarks' / 'results')}"
    assert report.BEGIN not in (root / "README.md").read_text()


def test_readme_without_markers_is_left_alone(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# nothing to replace\n")
    assert not report.update_readme(tmp_path, readme)
    assert readme.read_text() == "# nothing to replace\n"


def test_saved_algorithm_and_memory_results_make_their_sections(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"{report.BEGIN}\n{report.END}\n")
    assert report.update_readme(tmp_path, readme)
    assert "No algorithm results yet" in readme.read_text()
    assert "No memory results yet" in readme.read_text()

    where = {"machine": {"cpus": 2}, "versions": {}}
    older = {"date": "2026-01-01T00:00:00+00:00", "repeat": 1, "rows": [], **where}
    row = {
        "nodes": 5000,
        "initial_pods": 1000,
        "us_per_pod_median": 74.2,
        "us_per_pod_best": 68.0,
        "us_per_pod_runs": [75.8, 70.8, 74.2],
        "adapted_filter_us_per_pod": 6355.0,
        "adapted_score_us_per_pod": 309.0,
    }
    topology = {
        **row,
        "shape": "topology",
        "initial_pods": 10000,
        "us_per_pod_median": 250.0,
        "adapted_filter_us_per_pod": "-",
        "adapted_score_us_per_pod": "-",
    }
    newer = {"date": "2026-01-02T00:00:00+00:00", "repeat": 3, "rows": [row, topology], **where}
    save("algorithm", older, tmp_path)
    path = save("algorithm", newer, tmp_path)
    assert path.name == "2026-01-02-algorithm.json"
    memory = {"nodes": 5000, "pods": 11000, "ascheduler_rss_bytes": 129 * 2**20}
    save(
        "memory",
        {**memory, "kube_scheduler_rss_bytes": 200 * 2**20, "date": newer["date"], **where},
        tmp_path,
    )
    assert report.update_readme(tmp_path, readme)
    text = readme.read_text()
    assert (
        "| SchedulingBasic | 5,000 | 1,000 | 74.2 | 75.8, 70.8, 74.2 | 68.0 | 6355.0 | 309.0 |"
        in text
    )
    assert "| zone spread + per-host anti-affinity | 5,000 | 10,000 | 250.0 |" in text
    assert "--repeat 3 --save" in text
    assert "ascheduler 129 MiB, kube-scheduler 200 MiB (0.65x)" in text
    # A saved result is not mistaken for a workload's.
    assert report.latest(tmp_path) == []


def test_a_run_on_another_release_is_kept_apart_and_does_not_replace_the_default_releases(
    tmp_path: Path,
) -> None:
    runs = {
        "ascheduler": [run_result("ascheduler", 300)],
        "kube-scheduler": [run_result("kube-scheduler", 100)],
    }
    default = result(BASIC, "2026-01-02T03:04:05+00:00", runs)
    other = result(BASIC, "2026-01-02T09:00:00+00:00", runs)
    other["versions"] = {"kubernetes": "v1.0.1"}
    paths = [report.write(x, tmp_path)["json"].name for x in (default, other)]
    assert paths == [f"2026-01-02-{BASIC}-steady.json", f"2026-01-02-{BASIC}-steady-v1.0.json"]
    # The other release's run is newer; the default release's is still the one tabled.
    assert [x["date"] for x in report.latest(tmp_path)] == [default["date"]]
    (tmp_path / f"2026-01-02-{BASIC}-steady.json").unlink()
    assert [x["date"] for x in report.latest(tmp_path)] == [other["date"]]


def test_an_unfinished_run_is_reported_as_it_stood_and_left_out_of_the_ratios() -> None:
    unfinished = run_result("kube-scheduler", 0.0)
    for key in ("latency_p50", "latency_p90", "latency_p99"):
        del unfinished[key]
    unfinished |= {"bound": 0, "finished": False}
    runs = {
        "ascheduler": [run_result("ascheduler", 300) | {"bound": 100, "finished": True}],
        "kube-scheduler": [unfinished],
    }
    s = summarise(runs["kube-scheduler"])
    assert (s["unfinished"], s["bound"]) == (1, 0)
    assert "latency_p99" not in s
    assert summarise(runs["ascheduler"])["unfinished"] == 0
    # Its throughput is 0 and its CPU real, but no ratio is taken against a run that stopped.
    assert not [k for k in ratios(runs) if k.endswith("ascheduler/kube-scheduler")]
    data = result(BASIC, "2026-11-23T00:00:00", runs) | {"timeout_s": 600.0}
    text = report.markdown(data)
    assert (
        "kube-scheduler did not finish: 1 of 1 run(s) were stopped at the time limit (600 s) "
        "with 0 of 100 measured pods bound" in text
    )
    assert "ascheduler did not finish" not in text


def test_the_readme_says_a_scheduler_did_not_finish_instead_of_a_rate() -> None:
    unfinished = run_result("kube-scheduler", 0.0) | {"bound": 0, "finished": False}
    done = run_result("ascheduler", 300) | {"bound": 100, "finished": True}
    data = result(
        BASIC, "2026-11-23T00:00:00", {"ascheduler": [done], "kube-scheduler": [unfinished]}
    )
    data["timeout_s"] = 600.0
    row = report.readme_table([data]).splitlines()[2]
    assert row.startswith(f"| {BASIC} | 300 | unfinished: 0 of 100 in 600 s |"), row


def test_bindrequest_mode_is_compared_with_direct_mode_and_kube_scheduler() -> None:
    runs = {
        "ascheduler": [run_result("ascheduler", 400)],
        "ascheduler-bindrequest": [run_result("ascheduler-bindrequest", 300)],
        "kube-scheduler": [run_result("kube-scheduler", 100)],
    }
    r = ratios(runs)
    assert r["throughput_avg ascheduler-bindrequest/ascheduler"]["median"] == 0.75
    assert r["throughput_avg ascheduler-bindrequest/kube-scheduler"]["median"] == 3.0
    assert r["requests_per_pod ascheduler-bindrequest/ascheduler"]["median"] == 1.0
    assert r["throughput_avg ascheduler/kube-scheduler"]["median"] == 4.0


def test_lock_variants_are_compared_with_no_locks_and_kube_scheduler() -> None:
    runs = {
        "ascheduler": [run_result("ascheduler", 300)],
        "ascheduler-nolocks": [run_result("ascheduler-nolocks", 400)],
        "ascheduler-locked": [run_result("ascheduler-locked", 320)],
        "ascheduler-hami": [run_result("ascheduler-hami", 100)],
        "kube-scheduler": [run_result("kube-scheduler", 200)],
    }
    r = ratios(runs)
    assert r["throughput_avg ascheduler/ascheduler-nolocks"]["median"] == 0.75
    assert r["throughput_avg ascheduler-locked/ascheduler-nolocks"]["median"] == 0.8
    assert r["throughput_avg ascheduler-locked/kube-scheduler"]["median"] == 1.6
    assert r["throughput_avg ascheduler-hami/ascheduler-nolocks"]["median"] == 0.25
    assert r["throughput_avg ascheduler-hami/kube-scheduler"]["median"] == 0.5
    assert r["latency_p99 ascheduler/ascheduler-nolocks"]["median"] == 1.0
    assert "throughput_avg ascheduler-nolocks/kube-scheduler" not in r


def split_result(date: str, ascheduler: float, mode: str = "backlog") -> dict[str, Any]:
    runs = {
        "ascheduler": [run_result("ascheduler", ascheduler, mode=mode)],
        "ceiling-go": [run_result("ceiling-go", 1000, mode=mode)],
        "ceiling-python": [run_result("ceiling-python", 950, mode=mode)],
    }
    data = result(BASIC, date, runs, mode)
    data["cpus"] = {"plane": [0], "schedulers": [1]}
    data["plane"] = "local (benchmark mode; plane on CPU 0, schedulers and harness on CPU 1)"
    return data


def test_a_split_run_is_written_apart(tmp_path: Path) -> None:
    paths = report.write(split_result("2026-01-02T03:04:05+00:00", 900), tmp_path)
    assert paths["json"].name == "2026-01-02-SchedulingBasic_500Nodes_1000Pods-backlog-split.json"
    md = paths["md"].read_text()
    assert md.startswith(f"### {BASIC}, backlog, plane on CPU 0, schedulers and harness on CPU 1\n")


def test_split_runs_have_a_readme_table_of_their_own(tmp_path: Path) -> None:
    shared = {
        "ascheduler": [run_result("ascheduler", 600, mode="backlog")],
        "ceiling-python": [run_result("ceiling-python", 1000, mode="backlog")],
    }
    (tmp_path / "shared.json").write_text(
        json.dumps(result(BASIC, "2026-01-01T00:00:00+00:00", shared, "backlog"))
    )
    readme = tmp_path / "README.md"
    readme.write_text(f"{report.BEGIN}\n{report.END}\n")
    assert report.update_readme(tmp_path, readme)
    assert report.SPLIT_TITLE not in readme.read_text()  # no split run yet: no table

    # newer than the shared run, and the newest split run of two
    for name, date, rate in (("s1", "2026-01-02", 800), ("s2", "2026-01-03", 900)):
        data = split_result(f"{date}T00:00:00+00:00", rate)
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    assert report.update_readme(tmp_path, readme)
    text = readme.read_text()
    shared_part, split_part = text.split(report.SPLIT_TITLE)
    (row,) = [line for line in shared_part.splitlines() if line.startswith(f"| {BASIC}")]
    assert row.split(" | ")[1] == "600"  # the shared table keeps the shared run
    assert "Backlog" in split_part
    assert "Steady" not in split_part
    (row,) = [line for line in split_part.splitlines() if line.startswith(f"| {BASIC}")]
    assert row.split(" | ")[1] == "900"
    assert row.split(" | ")[5] == "0.90 (0.90-0.90)"
    assert "plane on CPU 0, schedulers and harness on CPU 1" in split_part
    assert "--plane-cpus LIST" in split_part


def test_the_tables_say_which_release_each_result_ran_on() -> None:
    one = result(BASIC, "2026-11-23T00:00:00", {"ascheduler": [run_result("ascheduler", 300)]})
    other = result(
        "Mixed_1000Nodes", "2026-11-24T00:00:00", {"ascheduler": [run_result("ascheduler", 400)]}
    )
    one["versions"] = {"kubernetes": "v1.35.4"}
    other["versions"] = {"kubernetes": "v1.37.2"}
    assert "one local plane per workload at Kubernetes v1.35.4 (" in report.readme_table([one])
    both = report.readme_table([one, other])
    assert f"at Kubernetes v1.35.4 ({BASIC}); v1.37.2 (Mixed_1000Nodes)" in both
    del one["versions"]
    assert "at Kubernetes" not in report.readme_table([one])


def test_a_dra_workloads_ceiling_says_whether_it_wrote_the_claims(tmp_path: Path) -> None:
    dra = "SchedulingWithResourceClaimTemplate_500Nodes_8Devices"
    runs = {
        "ascheduler": [run_result("ascheduler", 150, mode="backlog")],
        "ceiling-go": [run_result("ceiling-go", 300, mode="backlog")],
        "ceiling-python": [run_result("ceiling-python", 250, mode="backlog")],
    }
    before = result(dra, "2026-01-01T00:00:00+00:00", runs, "backlog")
    after = before | {"ceiling_kind": report.CEILING_DRA}
    basic = result(BASIC, "2026-01-01T00:00:00+00:00", runs, "backlog")

    def row(table: str, workload: str) -> list[str]:
        (line,) = [x for x in table.splitlines() if x.startswith(f"| {workload} ")]
        return line.split(" | ")

    table = report.readme_table([after, basic], "backlog")
    assert row(table, dra)[3] == "300 / 250 (DRA)"
    assert row(table, BASIC)[3] == "300 / 250"  # no claims: nothing to say
    assert report.CEILING_NOTE in table
    assert row(report.readme_table([before], "backlog"), dra)[3] == "300 / 250 (Bindings only)"
    assert report.CEILING_NOTE not in report.readme_table([basic], "backlog")
    assert "wrote each pod's claims" in report.markdown(after)
    assert "wrote each pod's claims" not in report.markdown(before)
