"""Many runs of a scenario made one row: medians, the ratio to the bare app, the verdict
on each target."""

from __future__ import annotations

import statistics


def median_of(runs: list[dict], *path: str) -> float | None:
    """The median of the value at ``path`` (nested keys) over the runs that have it."""
    values = []
    for run in runs:
        value = run
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            values.append(value)
    return statistics.median(values) if values else None


def baseline_of(runs: list[dict], bare_runs: list[dict]) -> dict:
    """The bare app's medians beside the service's, and the service's throughput as a
    fraction of the bare app's: within each repeat (the two measured back to back, so that
    they share the machine's load) and their median, which is the figure the targets use;
    also the ratio of the two medians."""
    ratios = [
        round(run["throughput_rps"] / bare["throughput_rps"], 4)
        for run, bare in zip(runs, bare_runs, strict=True)
        if bare["throughput_rps"]
    ]
    bare_rps = median_of(bare_runs, "throughput_rps")
    rps = median_of(runs, "throughput_rps")
    bare_cpu = median_of(bare_runs, "server_cpu_us_per_request")
    cpu = median_of(runs, "server_cpu_us_per_request")
    return {
        "bare": {
            "throughput_rps": bare_rps,
            "p50_ms": median_of(bare_runs, "latency_ms", "p50"),
            "p99_ms": median_of(bare_runs, "latency_ms", "p99"),
            "server_cpu_us_per_request": median_of(bare_runs, "server_cpu_us_per_request"),
            "server_cpu_share": median_of(bare_runs, "server_cpu_share"),
            "errors": sum(run["errors"] for run in bare_runs),
        },
        "ratio_to_bare": statistics.median(ratios) if ratios else None,
        "ratios_per_repeat": ratios,
        "ratio_of_medians": round(rps / bare_rps, 4) if rps and bare_rps else None,
        # the throughput ratio at equal CPU: less sensitive to what else the machine runs
        "cpu_ratio_to_bare": round(bare_cpu / cpu, 4) if cpu and bare_cpu else None,
    }


def aggregate(
    name: str, runs: list[dict], targets: list[dict], bare_runs: list[dict] | None = None
) -> dict:
    """A scenario's row: the medians of its runs, its baseline (``bare_runs``) and the
    verdict on each of ``targets``."""
    bulk = runs[0]["mode"] == "bulk"
    per = "server_cpu_us_per_example" if bulk else "server_cpu_us_per_request"
    out = {
        "scenario": name,
        "runs": len(runs),
        "throughput_rps": median_of(runs, "throughput_rps"),
        "examples_per_s": median_of(runs, "examples_per_s"),
        "p50_ms": median_of(runs, "latency_ms", "p50"),
        "p90_ms": median_of(runs, "latency_ms", "p90"),
        "p99_ms": median_of(runs, "latency_ms", "p99"),
        "max_ms": median_of(runs, "latency_ms", "max"),
        "errors": sum(run["errors"] for run in runs),
        "requests": sum(run["requests"] for run in runs),
        per: median_of(runs, per),
        "server_cpu_share": median_of(runs, "server_cpu_share"),
        "client_cpu_share": median_of(runs, "client_cpu_share"),
        "other_cpu_share": median_of(runs, "other_cpu_share"),
        "loadavg_before": [run["loadavg_before"][0] for run in runs],
        "send_lag_p99_ms": median_of(runs, "send_lag_ms", "p99"),
    }
    if len(runs[0]["operations"]) > 1:
        out["operations"] = {
            op: {
                "throughput_rps": median_of(runs, "operations", op, "throughput_rps"),
                "p50_ms": median_of(runs, "operations", op, "latency_ms", "p50"),
                "p99_ms": median_of(runs, "operations", op, "latency_ms", "p99"),
            }
            for op in runs[0]["operations"]
        }
    if bare_runs:
        out.update(baseline_of(runs, bare_runs))
    out["targets"] = []
    for target in targets:
        measured = out.get(target["metric"])
        if measured is None:
            met = False
        elif target["op"] == "<":
            met = measured < target["value"]
        else:
            met = measured >= target["value"]
        if name == "predict_open":
            # the latency target only counts if the offered rate was actually served
            met = met and out["throughput_rps"] >= 0.98 * target["rate"] and out["errors"] == 0
        out["targets"].append(target | {"measured": measured, "met": bool(met)})
    return out
