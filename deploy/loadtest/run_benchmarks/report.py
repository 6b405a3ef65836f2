"""The markdown section of the service benchmarks (``<!-- service:begin -->`` to
``<!-- service:end -->``), from the results of a run."""

from __future__ import annotations

from pathlib import Path

from benchmarks.markdown import replace_section
from service.config import Settings

DEFAULT_INTERVAL = Settings.model_fields["averaging_interval"].default

BEGIN = "<!-- service:begin -->"
END = "<!-- service:end -->"


def _fmt(value, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def model_text(settings: dict) -> str:
    """The paragraph saying what was served and how it was measured."""
    interval = settings["averaging_interval"]
    averaging = f"{interval:,}" if interval else f"{DEFAULT_INTERVAL:,} (the service default)"
    env = settings["server_env"]
    return (
        f"Model: `{settings['kind']}` rank {settings['rank']} over {settings['n_features']:,} "
        f"hashed features (`input: {{hashed: {settings['n_features']}}}`), synthetic sparse "
        f"rows with {settings['nnz']} non-zeros and binary labels (5% flipped), a new model "
        f"per run, averaging interval {averaging}. "
        + (
            f"Server: the service already running at {settings['url']} (`--url`: its own "
            "settings, its CPU not measured, no bare-app baseline)"
            if settings.get("url")
            else "Server: `python -m service.ops.cli serve`, "
            f"log level `{settings['log_level']}` (one JSON access-log line per request at "
            "`info`), local snapshots every hour (none during the runs)"
            + (f", environment {', '.join(env)}" if env else "")
        )
        + f". Each scenario ran {settings['repeats']} times for {settings['duration']:g} s "
        f"after {settings['warmup']:g} s of warm-up; the table gives the **medians**. Closed "
        f"loop: {settings['concurrency']} clients (bulk: {settings['bulk_concurrency']}); open "
        "loop: latency measured from each request's scheduled time (no coordinated omission)."
    )


def markdown(result: dict) -> str:
    """The section, from the results of a run (or of a saved JSON, ``--render``)."""
    env = result["environment"]
    settings = result["settings"]
    busy = result["busy_processes"]
    lines = [
        "## Service throughput and latency (HTTP, one uvicorn process)",
        "",
        "Written by `python -m deploy.loadtest.run_benchmarks` (load from "
        f"`deploy.loadtest.loadgen` on the same machine, client `{settings['client']}`"
        + (
            ": HTTP/1.1 keep-alive over asyncio streams). "
            if settings["client"] == "raw"
            else ": httpx.AsyncClient). "
        )
        + f"Commit {env['commit']}, {env['date']}, Python {env['python']}, "
        f"{env['cpus']} CPUs ({env['cpu_model']}); fastapi {env['packages']['fastapi']}, "
        f"uvicorn {env['packages']['uvicorn']} (uvloop {env['packages']['uvloop']}, "
        f"httptools {env['packages']['httptools']}), pydantic {env['packages']['pydantic']}.",
        "",
        model_text(settings),
        "",
        "| scenario | target | measured (median) | met | req/s | bare FastAPI req/s "
        "| ratio to bare | examples/s | p50 ms | p99 ms | max ms | errors "
        "| server CPU per req/example |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["scenarios"]:
        texts, measured, met = [], [], []
        for target in row.get("targets", []):
            metric = {
                "p99_ms": "p99",
                "throughput_rps": "req/s",
                "examples_per_s": "examples/s",
                "ratio_to_bare": "ratio to bare",
            }[target["metric"]]
            digits = 2 if target["metric"] == "ratio_to_bare" else 0
            text = f"{metric} {target['op']} {_fmt(target['value'], digits)}"
            if "rate" in target:
                text += f" at {target['rate']:g} req/s"
            texts.append(text)
            measured.append(_fmt(target["measured"], 2))
            met.append("yes" if target["met"] else "**no**")
        per = row.get("server_cpu_us_per_request") or row.get("server_cpu_us_per_example")
        unit = "example" if "server_cpu_us_per_example" in row else "req"
        bare = row.get("bare")
        lines.append(
            f"| {row['description']} | {'; '.join(texts) or '(none)'} | {'; '.join(measured)} "
            f"| {'; '.join(met)} | {_fmt(row['throughput_rps'])} "
            f"| {_fmt(bare['throughput_rps']) if bare else ''} "
            f"| {_fmt(row['ratio_to_bare'], 2) if bare else ''} "
            f"| {_fmt(row['examples_per_s'], 0)} "
            f"| {_fmt(row['p50_ms'], 2)} | {_fmt(row['p99_ms'], 2)} | {_fmt(row['max_ms'], 1)} "
            f"| {row['errors']} | {_fmt(per, 0)} us/{unit} |"
        )
    compared = [row for row in result["scenarios"] if row.get("bare")]
    if compared:
        lines += [
            "",
            "The bare FastAPI baseline (`deploy/loadtest/bare_app.py`): the same endpoints as "
            "`async def` routes whose body parameter is a pydantic model of the same JSON "
            "shape and whose `response_model` has the shape of the service's answer; no "
            "model, log, metrics or middleware; under the same uvicorn settings. It is "
            "measured back to back with the service in each repeat (the order alternating); "
            "the ratio is the median of the repeats' ratios. "
            + "; ".join(
                f"{row['description']}: bare {_fmt(row['bare']['throughput_rps'])} req/s "
                f"(p50 {_fmt(row['bare']['p50_ms'], 2)} ms, p99 {_fmt(row['bare']['p99_ms'], 2)}"
                f" ms, server CPU {_fmt(row['bare']['server_cpu_us_per_request'], 0)} us/req), "
                f"ratios per repeat {', '.join(f'{r:.2f}' for r in row['ratios_per_repeat'])}"
                + (
                    f", server CPU per request bare / service "
                    f"{_fmt(row['cpu_ratio_to_bare'], 2)} (the ratio at equal CPU)"
                    if row.get("cpu_ratio_to_bare") is not None
                    else ""
                )
                for row in compared
            )
            + ".",
        ]
    for row in result["scenarios"]:
        if "operations" in row:
            parts = [
                f"{op} {_fmt(v['throughput_rps'])} req/s (p50 {_fmt(v['p50_ms'], 2)} ms, "
                f"p99 {_fmt(v['p99_ms'], 2)} ms)"
                for op, v in row["operations"].items()
            ]
            lines += ["", f"{row['description']}: " + "; ".join(parts) + "."]
    lags = [
        f"{row['description']}: {_fmt(row['send_lag_p99_ms'], 1)} ms"
        for row in result["scenarios"]
        if row.get("send_lag_p99_ms") is not None
    ]
    if lags:
        lines += [
            "",
            "Open loop, the generator's own lateness (p99 of the delay between a request's "
            "scheduled time and its start, included in the latencies): " + "; ".join(lags) + ".",
        ]
    client = {row["scenario"]: row["client_cpu_share"] for row in result["scenarios"]}
    server = {row["scenario"]: row["server_cpu_share"] for row in result["scenarios"]}
    other = {row["scenario"]: row.get("other_cpu_share") for row in result["scenarios"]}
    loads = {row["scenario"]: row.get("loadavg_before") for row in result["scenarios"]}
    lines += [
        "",
        "CPU use during the measured phase (cores, medians): "
        + "; ".join(
            f"{name} server {_fmt(server[name], 2)}, generator {_fmt(client[name], 2)}"
            + (f", other processes {_fmt(other[name], 2)}" if other[name] is not None else "")
            for name in client
        )
        + ". The generator shares the machine's "
        f"{env['cpus']} CPUs with the server"
        + (
            " (pinned: server on CPU 1, generator on CPU 0)."
            if settings["pin"]
            else " (not pinned)."
        ),
        "",
        "1-minute load average before each run: "
        + "; ".join(
            f"{name} {', '.join(f'{x:.2f}' for x in loads[name])}" for name in loads if loads[name]
        )
        + (
            f" (each run waited for a load average <= {settings['max_load']:g}, at most "
            f"{settings['max_wait']:g} s)."
            if settings.get("max_load") is not None
            else "."
        ),
        "",
        "Also running on the machine during the measurements (from `ps`: %CPU of one core "
        "averaged over each process's lifetime, sampled before each run):",
        "",
    ]
    lines += [f"- {p['command']} ({p['pcpu']:.0f}%)" for p in busy] or ["- nothing else busy"]
    if result.get("costs"):
        lines += ["", *costs_markdown(result["costs"])]
    for note in result.get("notes") or []:
        lines += ["", note.strip("\n")]
    lines += ["", "Raw numbers of every run: `docs/service_benchmarks.json`.", ""]
    return "\n".join(lines)


def costs_markdown(costs: dict) -> list[str]:
    """The table of ``cost_breakdown.py``: CPU time of each step, in-process."""
    settings = costs["settings"]
    lines = [
        "### Where the server's CPU goes",
        "",
        "`deploy/loadtest/cost_breakdown.py`: each step timed in-process with the CPU clock "
        f"(fastest of {settings['repeats']} rounds of {settings['n']} calls; bulk: one "
        f"{settings['batch']:,}-example body), same model. Whole-app rows call the ASGI app "
        "directly, without sockets; add the HTTP/1.1 framing and the event loop's socket "
        "work for the server's cost.",
        "",
        "| step | CPU |",
        "|---|---:|",
    ]
    for group, steps in costs["results"].items():
        for name, value in steps.items():
            if "count" in value:
                lines.append(f"| {group}: {name} | {value['count']} |")
            else:
                lines.append(f"| {group}: {name} | {_fmt(value['us'], 1)} us/{value['per']} |")
    return lines


def write_section(path: Path, section: str) -> None:
    """Replace our section of ``path`` (created with a header if missing); keep the rest."""
    replace_section(path, BEGIN, END, section)
