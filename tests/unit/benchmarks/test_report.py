from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.run import percentile, ratios, summarise


def run_result(scheduler: str, pods_per_s: float, rss: int = 100 * 2**20) -> dict[str, Any]:
    return {
        "scheduler": scheduler,
        "pods": 100,
        "throughput_avg": pods_per_s,
        "throughput_p50": pods_per_s,
        "throughput_p90": pods_per_s,
        "throughput_p99": pods_per_s,
        "latency_p50": 0.5,
        "latency_p90": 0.8,
        "latency_p99": 1.0,
        "cpu_seconds": 3.0,
        "peak_rss_bytes": rss,
        "requests_per_pod": 2.0,
        "created_per_s": 900.0,
        "samples": [10, int(pods_per_s), int(pods_per_s)],
    }


def result(workload: str, date: str, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "workload": workload,
        "description": "d",
        "date": date,
        "repeat": len(next(iter(runs.values()))),
        "plane": "local",
        "summary": {w: summarise(r) for w, r in runs.items()},
        "ratios": ratios(runs),
        "runs": runs,
        "versions": {"kubernetes": "v1.35.4"},
        "machine": {"cpus": 2},
    }


def test_percentile_and_summary_are_medians_of_runs() -> None:
    assert percentile([], 0.5) == 0.0
    assert percentile([5, 1, 3], 0.5) == 3
    assert percentile(range(101), 0.99) == 99
    s = summarise([run_result("a", 100), run_result("a", 300), run_result("a", 200)])
    assert s["throughput_avg"] == 200


def test_ratios_pair_runs_by_index() -> None:
    runs = {
        "ascheduler": [run_result("ascheduler", 300), run_result("ascheduler", 200)],
        "kube-scheduler": [run_result("kube-scheduler", 100), run_result("kube-scheduler", 200)],
        "ceiling": [run_result("ceiling", 600), run_result("ceiling", 400)],
    }
    r = ratios(runs)
    assert r["throughput_avg ascheduler/kube-scheduler"] == {"median": 2.0, "min": 1.0, "max": 3.0}
    assert r["throughput_avg ascheduler/ceiling"]["median"] == 0.5
    assert r["peak_rss_bytes ascheduler/kube-scheduler"]["median"] == 1.0
    assert "latency_p99 ascheduler/ceiling" not in r
    assert ratios({"kube-scheduler": runs["kube-scheduler"]}) == {}


def test_write_leaves_json_markdown_and_png(tmp_path: Path) -> None:
    runs = {"ascheduler": [run_result("ascheduler", 300)], "ceiling": [run_result("ceiling", 400)]}
    paths = report.write(result("W", "2026-01-02T03:04:05+00:00", runs), tmp_path)
    assert paths["json"].name == "2026-01-02-W.json"
    assert json.loads(paths["json"].read_text())["summary"]["ceiling"]["throughput_avg"] == 400
    md = paths["md"].read_text()
    assert "| ascheduler | 300 |" in md
    assert "| throughput_avg ascheduler/ceiling | 0.75 (0.75-0.75) |" in md
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_readme_table_takes_the_newest_result_of_each_workload(tmp_path: Path) -> None:
    basic = "SchedulingBasic_500Nodes_1000Pods"
    old = {"ascheduler": [run_result("ascheduler", 111)]}
    new = {
        "ascheduler": [run_result("ascheduler", 222)],
        "kube-scheduler": [run_result("kube-scheduler", 111, rss=200 * 2**20)],
    }
    for name, date, runs in (
        ("a", "2026-01-01T00:00:00+00:00", new),
        ("b", "2025-12-01T00:00:00+00:00", old),
        ("c", "2026-01-03T00:00:00+00:00", {"ascheduler": [run_result("ascheduler", 5)]}),
    ):
        workload = basic if name != "c" else "Smoke_10Nodes_40Pods"
        data = result(workload, date, runs)
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n{report.BEGIN}\nstale\n{report.END}\nafter\n")
    assert report.update_readme(tmp_path, readme)
    text = readme.read_text()
    assert "stale" not in text
    assert text.startswith("# x\n\nbefore\n")
    assert text.endswith("after\n")
    (row,) = [line for line in text.splitlines() if line.startswith(f"| {basic}")]
    assert row.split(" | ")[1:5] == ["222", "111", "-", "2.00 (2.00-2.00)"]
    assert "100 / 200" in row
    assert "Smoke" not in text  # smoke runs never reach the README
    assert report.update_readme(tmp_path, readme)  # idempotent: markers kept
    assert readme.read_text() == text


def test_readme_without_markers_is_left_alone(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# nothing to replace\n")
    assert not report.update_readme(tmp_path, readme)
    assert readme.read_text() == "# nothing to replace\n"
