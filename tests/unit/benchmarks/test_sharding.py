"""`benchmarks sharding`'s figures: what each member's metrics say, and the summary's ratios
to one member run by run."""

from __future__ import annotations

from benchmarks.sharding import member_figures, summarize

METRICS = """\
# HELP rest_client_requests_total Requests.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="201",host="h",method="POST"} 30.0
rest_client_requests_total{code="200",host="h",method="GET"} 12.0
# HELP process_cpu_seconds_total CPU.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 2.5
# HELP ascheduler_shard_members Members.
# TYPE ascheduler_shard_members gauge
ascheduler_shard_members 3.0
"""


def test_a_members_metrics_give_its_requests_cpu_and_members() -> None:
    assert member_figures(METRICS) == {"requests": 42.0, "cpu_seconds": 2.5, "members": 3.0}
    assert member_figures("") == {"requests": 0.0, "cpu_seconds": 0.0, "members": 0.0}


def test_the_summary_compares_each_count_with_one_member_run_by_run() -> None:
    def run(rate: float) -> dict[str, float]:
        return {"pods_per_second": rate, "requests_per_pod": 2.0, "members_cpu_us_per_pod": 1.0}

    out = summarize({1: [run(100), run(200)], 2: [run(50), run(300)], 3: []})
    assert out["1"]["pods_per_second"] == [100, 200]
    assert "throughput_over_one" not in out["1"]
    assert out["2"]["throughput_over_one"] == {"median": 1.0, "min": 0.5, "max": 1.5}
    assert "3" not in out
    # Without a one-member run there is nothing to compare with.
    assert "throughput_over_one" not in summarize({2: [run(50)]})["2"]
