"""The durability section of ``docs/benchmarks.md`` and its raw numbers."""

from __future__ import annotations

import json

from benchmarks.environment import ROOT
from benchmarks.markdown import replace_section
from benchmarks.service_durability.processes import MODEL

DOCS = ROOT / "docs"
BEGIN, END = "<!-- durability:begin -->", "<!-- durability:end -->"


def render(result: dict) -> str:
    env = result["environment"]
    lines = [
        "## Durability and scale-out (feedback log, recovery, api replicas)",
        "",
        f"Written by `python -m benchmarks.service_durability` on {env['date']} (commit "
        f"{env['commit']}, {env['cpus']} CPUs, load average before the runs "
        f"{env['load_before']}, after {env['load_after']}). Model: DoS rank {MODEL['rank']} "
        f"over {MODEL['n_features']:,} hashed features, {MODEL['nnz']} non-zeros per example. "
        f"Load from `python -m deploy.loadtest.loadgen --client raw` on the same machine, "
        f"{result['settings']['duration']:g} s per run after 1 s of warm-up, medians of "
        f"{result['settings']['repeats']} runs.",
        "",
        "### Feedback throughput with the log on and off",
        "",
        "| log | traffic | requests/s | examples/s | p50 ms | p99 ms | errors |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in result["throughput"]:
        traffic = (
            "1 example per JSON request, 8 clients"
            if row["mode"] == "feedback"
            else f"svmlight bodies of {result['settings']['batch']:,} examples, 2 clients"
        )
        lines.append(
            f"| {row['log']} | {traffic} | {row['req_per_s']:,.1f} | "
            f"{row['examples_per_s']:,.0f} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | "
            f"{row['errors']} |"
        )
    lines += [
        "",
        "### Recovery time against log length",
        "",
        "A model's snapshot, then N single-example log records after it; the service replays "
        "them at start-up before `/readyz` turns ready.",
        "",
        "| records after the snapshot | replay s | start to ready s | records/s replayed |",
        "|---:|---:|---:|---:|",
    ]
    for row in result["recovery"]:
        rate = f"{row['records_per_s']:,.0f}" if row["records_per_s"] else ""
        lines.append(
            f"| {row['records']:,} | {row['replay_s']:.3f} | {row['start_to_ready_s']:.2f} | "
            f"{rate} |"
        )
    lines += [
        "",
        "### Predict throughput with one and two api replicas",
        "",
        "One learner and the api replicas as separate processes against one Redis; one load "
        "generator (8 clients) per replica; throughput summed, latency of the slowest.",
        "",
        "| api replicas | predict requests/s | p50 ms | p99 ms |",
        "|---:|---:|---:|---:|",
    ]
    for row in result["replicas"]:
        lines.append(
            f"| {row['api_replicas']} | {row['req_per_s']:,.1f} | {row['p50_ms']:.2f} | "
            f"{row['p99_ms']:.2f} |"
        )
    if result.get("freshness"):
        lines += [
            "",
            "### Freshness: acknowledged feedback to a replica serving it",
            "",
            f"One learner and one api replica (Redis), feedback posted to the replica at "
            f"{result['settings'].get('feedback_rate', 1000):,.0f} single-example requests/s "
            f"(open loop) for {result['settings'].get('freshness_duration', 10):g} s, the "
            "default publication interval (0.25 s); the replica's "
            "`lorentztron_freshness_seconds` histogram (per loaded version, the delay of its "
            "oldest new record; quantiles as the upper bound of their bucket).",
            "",
            "| model | feedback/s reached | versions loaded | mean s | p50 <= s | p99 <= s |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for row in result["freshness"]:
            lines.append(
                f"| {row['model']} | {row['feedback_per_s']:,.0f} | {row['versions_loaded']:.0f} "
                f"| {row['mean_s']:.3f} | {row['p50_le_s']:g} | {row['p99_le_s']:g} |"
            )
    for note in result.get("notes", []):
        lines += ["", note]
    lines.append("")
    return "\n".join(lines) + "\n"


def publish(result: dict) -> None:
    """``docs/durability_benchmarks.json`` and the durability section of ``docs/benchmarks.md``."""
    (DOCS / "durability_benchmarks.json").write_text(json.dumps(result, indent=1) + "\n")
    replace_section(DOCS / "benchmarks.md", BEGIN, END, render(result))
