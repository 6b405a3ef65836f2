"""What a run reports: its summary (the JSON of ``--json``) and the text of a summary and
of a sweep."""

from __future__ import annotations

import math

from deploy.loadtest.loadgen.config import LoadConfig
from deploy.loadtest.loadgen.stats import Stats, latency_summary


def summarize(config: LoadConfig, model: str, stats: Stats, client_cpu: float, wall: float) -> dict:
    """The summary of a run against ``model``: counts, throughput, latency percentiles per
    operation, the generator's lateness (open loop) and its own CPU time."""
    elapsed = (
        (stats.last_end - stats.first_start)
        if stats.first_start is not None and stats.last_end is not None
        else 0.0
    )
    elapsed = max(elapsed, 1e-9)
    all_latencies = [x for values in stats.latencies.values() for x in values]
    n_ok = sum(stats.ok.values())
    n_errors = sum(stats.errors.values())
    out = {
        "mode": config.mode,
        "loop": "closed" if config.rate is None else "open",
        "target_rate": config.rate,
        "concurrency": config.concurrency,
        "duration_s": config.duration,
        "url": config.url,
        "client": config.client,
        "model": {
            "name": model,
            "kind": config.kind,
            "rank": config.rank if config.kind == "dos" else None,
            "n_features": config.n_features,
            "nnz": config.nnz,
        },
        "batch": config.batch if config.mode == "bulk" else None,
        "requests": sum(stats.sent.values()) + stats.dropped,
        "ok": n_ok,
        "errors": n_errors,
        "error_kinds": dict(stats.errors),
        "elapsed_s": round(elapsed, 4),
        "throughput_rps": round(n_ok / elapsed, 2),
        "examples_learned": stats.examples,
        "examples_per_s": round(stats.examples / elapsed, 2),
        "latency_ms": latency_summary(all_latencies),
        "operations": {
            op: {
                "requests": stats.sent[op],
                "ok": stats.ok[op],
                "throughput_rps": round(stats.ok[op] / elapsed, 2),
                "latency_ms": latency_summary(stats.latencies[op]),
            }
            for op in sorted(stats.sent)
        },
        "feedback_by_prediction_id": stats.by_prediction_id,
        "send_lag_ms": (
            latency_summary([max(0.0, x) for x in stats.send_lags])
            if config.rate is not None
            else None
        ),
        "client_cpu_s": round(client_cpu, 4),
        "client_cpu_share": round(client_cpu / max(wall, 1e-9), 4),
    }
    return out


#: the line under the "send lag" row: what it measures
SEND_LAG = (
    "    (send lag: how late the generator started requests after their scheduled time; "
    "large values\n    mean the generator, not the server, was the bottleneck, and are "
    "counted in the latencies)"
)


def format_sweep(result: dict) -> str:
    lines = [
        f"sweep ({result['mode']}): highest rate with p99 <= {result['p99_max_ms']:g} ms and "
        f"no errors: {result['knee_rate'] if result['knee_rate'] is not None else 'none'} req/s",
        f"  {'rate':>10}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}",
    ]
    for step in result["steps"]:
        p99 = step["p99_ms"] if step["p99_ms"] is not None else math.nan
        lines.append(
            f"  {step['rate']:>10g}{step['throughput_rps']:>10.1f}{step['p50_ms'] or 0:>10.3f}"
            f"{p99:>10.3f}{step['errors']:>8}" + ("" if step["within"] else "  <- past the bound")
        )
    return "\n".join(lines)


def format_summary(summary: dict) -> str:
    loop = (
        f"open loop at {summary['target_rate']:g} req/s"
        if summary["loop"] == "open"
        else f"closed loop, {summary['concurrency']} clients"
    )
    model = summary["model"]
    lines = [
        f"{summary['mode']} ({loop}) for {summary['duration_s']:g} s against {summary['url']}, "
        f"model {model['name']} ({model['kind']}, rank {model['rank']}, "
        f"{model['n_features']} features, {model['nnz']} non-zeros"
        + (f", batch {summary['batch']}" if summary["batch"] else "")
        + ")",
        f"  requests {summary['requests']}, ok {summary['ok']}, errors {summary['errors']}, "
        f"elapsed {summary['elapsed_s']:.2f} s",
        f"  throughput {summary['throughput_rps']:.1f} req/s"
        + (
            f", {summary['examples_per_s']:.0f} examples/s learned"
            if summary["examples_learned"]
            else ""
        ),
    ]
    header = f"  {'latency ms':<14}{'count':>8}{'p50':>11}{'p90':>11}{'p99':>11}{'max':>11}"
    lines.append(header)

    def row(name: str, lat: dict) -> str:
        if not lat["count"]:
            return f"  {name:<14}{0:>8}"
        return (
            f"  {name:<14}{lat['count']:>8}{lat['p50']:>11.3f}{lat['p90']:>11.3f}"
            f"{lat['p99']:>11.3f}{lat['max']:>11.3f}"
        )

    lines.append(row("all", summary["latency_ms"]))
    if len(summary["operations"]) > 1:
        for op, values in summary["operations"].items():
            lines.append(row(op, values["latency_ms"]))
    if summary["send_lag_ms"]:
        lines.append(row("send lag", summary["send_lag_ms"]))
        lines.append(SEND_LAG)
    if summary["feedback_by_prediction_id"]:
        lines.append(f"  feedback by prediction id: {summary['feedback_by_prediction_id']}")
    for kind, count in sorted(summary["error_kinds"].items()):
        lines.append(f"  error {kind}: {count}")
    lines.append(
        f"  generator CPU {summary['client_cpu_s']:.2f} s "
        f"({100 * summary['client_cpu_share']:.0f}% of one core)"
    )
    return "\n".join(lines)
