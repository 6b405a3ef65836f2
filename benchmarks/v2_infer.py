"""The Open Inference Protocol route against our own: ``POST /v2/models/{name}/infer`` (a
JSON tensor, and the binary tensor data extension both ways) and ``POST
/v1/models/{name}/predict``, one instance each, against one real server in the same run.

The server is ``lorentztron serve`` (its defaults: one process, JSON access logs at
``info``) on a free loopback port; the model ``linear-pa`` over 30 features, learned on a few
examples. The load is ``wrk`` (Debian's package) with one thread and 8 connections, the
scenarios taken in turn within each repeat (the order rotating from repeat to repeat, so that
none is always first after a pause); the table gives each scenario's median req/s and the
median of the repeats' ratios to v1 predict of the same repeat.

    python -m benchmarks.v2_infer                      # writes docs/benchmarks.md (+ v2_infer.json)
    python -m benchmarks.v2_infer --repeats 5 --duration 5
    python -m benchmarks.v2_infer --quick              # a few seconds, prints only
    python -m benchmarks.v2_infer --render             # re-renders docs from the JSON
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from benchmarks.environment import environment
from benchmarks.markdown import replace_section
from benchmarks.servers import ServiceProcess

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
JSON_PATH = DOCS / "v2_infer.json"
BEGIN, END = "<!-- v2-infer:begin -->", "<!-- v2-infer:end -->"
N_FEATURES = 30
MODEL = "m"
COMMAND = "python -m benchmarks.v2_infer"


def scenarios(x: np.ndarray) -> dict[str, dict]:
    """Each scenario's request: path, headers and body (one instance ``x``)."""
    row = [float(v) for v in x]
    head = {
        "inputs": [
            {
                "name": "input",
                "shape": [1, N_FEATURES],
                "datatype": "FP32",
                "parameters": {"binary_data_size": 4 * N_FEATURES},
            }
        ],
        "outputs": [
            {"name": name, "parameters": {"binary_data": True}}
            for name in ("label", "score", "probability")
        ],
    }
    head_bytes = json.dumps(head, separators=(",", ":")).encode()
    tensor = {"name": "input", "shape": [1, N_FEATURES], "datatype": "FP64", "data": row}
    return {
        "v1 predict": {
            "path": f"/v1/models/{MODEL}/predict",
            "headers": {"Content-Type": "application/json"},
            "body": json.dumps({"instances": [{"x": row}]}).encode(),
        },
        "V2 infer, JSON": {
            "path": f"/v2/models/{MODEL}/infer",
            "headers": {"Content-Type": "application/json"},
            "body": json.dumps({"inputs": [tensor]}).encode(),
        },
        "V2 infer, binary": {
            "path": f"/v2/models/{MODEL}/infer",
            "headers": {
                "Content-Type": "application/octet-stream",
                "Inference-Header-Content-Length": str(len(head_bytes)),
            },
            "body": head_bytes + x.astype("<f4").tobytes(),
        },
    }


def lua(request: dict) -> str:
    """A wrk script sending ``request`` (its body as a Lua string of escaped bytes)."""
    body = "".join(f"\\{b}" for b in request["body"])
    lines = ['wrk.method = "POST"', f'wrk.body = "{body}"']
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in request["headers"].items()]
    return "\n".join(lines) + "\n"


def run_wrk(url: str, script: Path, duration: int, connections: int) -> dict:
    """req/s, latency percentiles and non-2xx count of one wrk run."""
    done = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{duration}s",
            "--latency",
            "--timeout",
            "30s",  # (a request held up by other work on a busy machine is slow, not lost)
            "-s",
            str(script),
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    out = done.stdout
    rate = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    latency = {
        q: _ms(m.group(1))
        for q, m in ((q, re.search(rf"^\s+{q}%\s+(\S+)", out, re.M)) for q in ("50", "99"))
        if m
    }
    return {
        "rps": rate,
        "p50_ms": latency.get("50"),
        "p99_ms": latency.get("99"),
        "non_2xx": int(bad.group(1)) if bad else 0,
        "socket_errors": sum(int(n) for n in errors.groups()) if errors else 0,
    }


def _ms(text: str) -> float:
    for unit, scale in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    return float(text)


def prepare(url: str, rng: np.random.Generator) -> np.ndarray:
    """The model, learned on a few examples; the instance the scenarios send."""
    spec = {"name": MODEL, "kind": "linear-pa", "input": {"n_features": N_FEATURES}}
    answer = httpx.post(f"{url}/v1/models", json=spec, timeout=30)
    answer.raise_for_status()
    X = rng.standard_normal((64, N_FEATURES))
    y = np.where(X @ rng.standard_normal(N_FEATURES) > 0, 1, -1)
    examples = [{"x": x.tolist(), "label": int(label)} for x, label in zip(X, y, strict=True)]
    answer = httpx.post(
        f"{url}/v1/models/{MODEL}/feedback", json={"examples": examples}, timeout=30
    )
    answer.raise_for_status()
    return rng.standard_normal(N_FEATURES)


def check(url: str, requests: dict[str, dict]) -> None:
    """Each scenario's request answers 200 with the same label (and a score) as v1."""
    labels = {}
    for name, request in requests.items():
        answer = httpx.post(
            url + request["path"], content=request["body"], headers=request["headers"]
        )
        if answer.status_code != 200:
            raise RuntimeError(f"{name}: {answer.status_code} {answer.text[:300]}")
        if name == "v1 predict":
            labels[name] = answer.json()["predictions"][0]["label"]
        elif "inference-header-content-length" in answer.headers:
            size = int(answer.headers["inference-header-content-length"])
            head = json.loads(answer.content[:size])
            assert head["outputs"][0]["parameters"]["binary_data_size"] == 8
            labels[name] = int(np.frombuffer(answer.content[size : size + 8], "<i8")[0])
        else:
            labels[name] = answer.json()["outputs"][0]["data"][0]
    if len(set(labels.values())) != 1:
        raise RuntimeError(f"the scenarios disagree: {labels}")


def measure(args) -> dict:
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    rng = np.random.default_rng(0)
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "LORENTZTRON_SNAPSHOT_DIR": f"{tmp}/snapshots",
            "LORENTZTRON_SNAPSHOT_INTERVAL": "3600",
            **dict(item.split("=", 1) for item in args.env),
        }
        # (the kernels compile at the start: minutes on a busy machine with a cold cache)
        with ServiceProcess(env, Path(tmp) / "server.log").start(timeout=900) as server:
            requests = scenarios(prepare(server.url, rng))
            check(server.url, requests)
            scripts = {}
            for i, (name, request) in enumerate(requests.items()):
                scripts[name] = Path(tmp) / f"scenario{i}.lua"
                scripts[name].write_text(lua(request))
            names = list(requests)
            for name in names if args.warmup else ():  # warm-up (not kept)
                run_wrk(server.url + requests[name]["path"], scripts[name], args.warmup, 8)
            for repeat in range(args.repeats):
                order = names[repeat % len(names) :] + names[: repeat % len(names)]
                for name in order:
                    load = os.getloadavg()[0]
                    cpu = server.cpu_seconds()
                    result = run_wrk(
                        server.url + requests[name]["path"],
                        scripts[name],
                        args.duration,
                        args.connections,
                    )
                    used = server.cpu_seconds() - cpu
                    if result["non_2xx"] or result["socket_errors"]:  # (then no figure holds)
                        raise RuntimeError(f"{name}: {result}")
                    result["server_cpu_us"] = 1e6 * used / max(result["rps"] * args.duration, 1)
                    result["repeat"] = repeat
                    result["load_average"] = load
                    runs.setdefault(name, []).append(result)
                    print(
                        f"repeat {repeat} {name:18s} {result['rps']:9.1f} req/s "
                        f"p99 {result['p99_ms']} ms non-2xx {result['non_2xx']}",
                        flush=True,
                    )
    return {
        "environment": {**environment("fastapi", "uvicorn", "pydantic"), "date": _now()},
        "settings": {
            "repeats": args.repeats,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "connections": args.connections,
            "threads": 1,
            "model": f"linear-pa, {N_FEATURES} features",
            "env": args.env,
        },
        "runs": runs,
    }


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def summary(record: dict) -> list[dict]:
    """Per scenario: median req/s, p50/p99, server CPU per request, and the median of the
    repeats' ratios to v1 predict."""
    runs = record["runs"]
    base = {r["repeat"]: r for r in runs["v1 predict"]}
    rows = []
    for name, results in runs.items():
        ratios = [r["rps"] / base[r["repeat"]]["rps"] for r in results if r["repeat"] in base]
        cpu_ratios = [
            base[r["repeat"]]["server_cpu_us"] / r["server_cpu_us"]
            for r in results
            if r["repeat"] in base
        ]
        rows.append(
            {
                "scenario": name,
                "rps": statistics.median(r["rps"] for r in results),
                "p50_ms": statistics.median(r["p50_ms"] for r in results),
                "p99_ms": statistics.median(r["p99_ms"] for r in results),
                "server_cpu_us": statistics.median(r["server_cpu_us"] for r in results),
                "ratio": statistics.median(ratios),
                "ratios": ratios,
                "cpu_ratio": statistics.median(cpu_ratios),
                "non_2xx": sum(r["non_2xx"] for r in results),
            }
        )
    return rows


def render(record: dict, notes: str = "") -> str:
    env, settings = record["environment"], record["settings"]
    lines = [
        "## The Open Inference Protocol route against v1 predict (`python -m benchmarks.v2_infer`)",
        "",
        f"Written by `{COMMAND} --repeats {settings['repeats']} --duration "
        f"{settings['duration_s']:g} --warmup {settings['warmup_s']:g}` (the JSON beside it: "
        "`docs/v2_infer.json`; the notes under the table re-rendered with `--render "
        "--notes-file benchmarks/v2_infer_notes.md`). Commit "
        f"{env.get('commit')}, {env['date']}, Python {env['versions']['python']}, "
        f"{env['cpus']} CPUs ({env['cpu']}); fastapi {env['versions']['fastapi']}, uvicorn "
        f"{env['versions']['uvicorn']}.",
        "",
        f"One server (`lorentztron serve`, its defaults: one process, one JSON access-log "
        f"line per request), model {settings['model']}; one instance per request: v1 "
        '`POST /v1/models/m/predict` (`{"instances": [{"x": [...]}]}`), V2 '
        "`POST /v2/models/m/infer` with an FP64 JSON tensor (JSON outputs), and with an FP32 "
        "tensor in the binary tensor data extension (`Inference-Header-Content-Length`) "
        "asking every output in binary. Load: `wrk -t1 "
        f"-c{settings['connections']} -d{settings['duration_s']:g}s` on the same machine "
        f"(wrk and the server share its CPUs), {settings['repeats']} repeats after "
        f"{settings['warmup_s']:g} s of warm-up per scenario, the scenarios in turn within "
        "each repeat and the order rotating between repeats. The ratio is the median of the "
        "repeats' ratios to v1 predict in the same repeat (target: >= 0.9); the other "
        "columns are medians. Server CPU per request: the server process's CPU time over a "
        "run (every thread) divided by the requests answered; its ratio (v1's over the "
        "scenario's, median of the repeats) is the throughput ratio at equal CPU, steadier "
        "than req/s when other work shares the machine.",
        "",
        "| scenario | req/s | ratio to v1 predict | ratios per repeat | p50 ms | p99 ms | "
        "server CPU per request | CPU ratio | non-2xx |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in summary(record):
        lines.append(
            f"| {row['scenario']} | {row['rps']:,.0f} | **{row['ratio']:.2f}** | "
            f"{', '.join(f'{r:.2f}' for r in row['ratios'])} | {row['p50_ms']:.2f} | "
            f"{row['p99_ms']:.2f} | {row['server_cpu_us']:.0f} us | {row['cpu_ratio']:.2f} | "
            f"{row['non_2xx']} |"
        )
    loads = [r["load_average"] for runs in record["runs"].values() for r in runs]
    if loads:
        lines += [
            "",
            f"1-minute load average before the runs: {min(loads):.1f} to {max(loads):.1f} "
            f"({env['cpus']} CPUs; other work on the machine shares them).",
        ]
    if notes:
        lines += ["", notes.strip()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--warmup", type=int, default=2, help="seconds (wrk takes whole ones)")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument(
        "--env", action="append", default=[], help="NAME=value for the server (repeatable)"
    )
    parser.add_argument("--quick", action="store_true", help="1 s per scenario, prints only")
    parser.add_argument("--render", action="store_true", help="re-render docs from the JSON")
    parser.add_argument("--notes-file", type=Path, help="markdown put under the table")
    parser.add_argument("--json", type=Path, default=JSON_PATH)
    parser.add_argument("--md", type=Path, default=DOCS / "benchmarks.md")
    args = parser.parse_args(argv)
    notes = args.notes_file.read_text() if args.notes_file else ""
    if args.render:
        record = json.loads(args.json.read_text())
    else:
        if args.quick:
            args.repeats, args.duration, args.warmup = 1, 1, 0
        record = measure(args)
    for row in summary(record):
        print(
            f"{row['scenario']:18s} {row['rps']:9.1f} req/s  ratio {row['ratio']:.2f}  "
            f"cpu {row['server_cpu_us']:.0f} us/req  cpu ratio {row['cpu_ratio']:.2f}"
        )
    if args.quick:
        return 0
    if not args.render:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    replace_section(args.md, BEGIN, END, render(record, notes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
