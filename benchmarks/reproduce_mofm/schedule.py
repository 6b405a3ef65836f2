"""The jobs of a run and their schedule on a process pool: the letter pilots first, then the
letter runs they unlock (the critical path), the small jobs filling the other worker."""

from __future__ import annotations

import itertools
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import replace

from benchmarks.reproduce_mofm.data import load
from benchmarks.reproduce_mofm.figure2 import job_figure2
from benchmarks.reproduce_mofm.jobs import job_cg, job_linear, job_ovr, job_pilot, job_svc, run_job
from benchmarks.reproduce_mofm.online import job_online, job_speed
from benchmarks.reproduce_mofm.selection import best_point
from benchmarks.reproduce_mofm.specs import (
    CORRECTIVES,
    LINEAR_C,
    PENALTIES,
    PILOT_ITER,
    PILOT_K,
    SVC_C,
    Spec,
)


def cg_jobs(spec: Spec, quick: bool, grid) -> list:
    """Algorithm 1 for every row of Table 2 and every tau0 of ``grid``."""
    jobs = []
    for corrective, penalty, tau0 in itertools.product(CORRECTIVES, PENALTIES, grid):
        k = spec.k_max_full if corrective == "full" else spec.k_max
        iters = spec.refit_iter_full if corrective == "full" else spec.refit_iter
        jobs.append((job_cg, (spec, quick, penalty, corrective, tau0, k, iters)))
    return jobs


def plan(specs, quick: bool, pilot_choice: dict) -> list:
    """Jobs of the main phase; letter-like specs need their pilot's tau0 first."""
    jobs = []
    for spec in specs:
        grid = (pilot_choice[spec.name],) if spec.pilot else spec.tau0_grid
        jobs += cg_jobs(spec, quick, grid)
        for tau0 in grid:
            jobs.append((job_ovr, (spec, quick, tau0, spec.ovr_k_max, spec.refit_iter)))
    return jobs


def study_specs(specs, seeds: int) -> list[Spec]:
    """The repeated-split study: the data sets with a seeded split (not letter's files), each
    with the split seeds 1 .. seeds - 1 (seed 0 is the main run)."""
    return [
        replace(spec, split_seed=seed)
        for spec in specs
        if spec.split != "files"
        for seed in range(1, seeds)
    ]


def study_jobs(specs, quick: bool, seeds: int) -> list:
    """Algorithm 1 for every row and tau0 on the study's other splits (no baselines)."""
    specs = study_specs(specs, seeds)
    return [job for spec in specs for job in cg_jobs(spec, quick, spec.tau0_grid)]


def baseline_jobs(specs, quick: bool) -> list:
    jobs = []
    for spec in specs:
        jobs += [(job_svc, (spec, quick, C)) for C in SVC_C]
        jobs += [(job_linear, (spec, quick, C)) for C in LINEAR_C]
    return jobs


def pilot_jobs(specs, quick: bool) -> list:
    return [
        (job_pilot, (spec, quick, "l1/linf", "output", tau0, min(PILOT_K, spec.k_max), PILOT_ITER))
        for spec in specs
        if spec.pilot
        for tau0 in spec.tau0_grid
    ]


def figure2_jobs(specs, quick: bool) -> list:
    names = {"vowel", "satimage", "segment"}
    iterations = 3 if quick else 15
    return [
        (job_figure2, (spec, quick, iterations, spec.tau0_grid[-1]))
        for spec in specs
        if spec.name in names
    ]


def execute(specs, quick: bool, jobs_count: int, log, seeds: int = 1) -> tuple[list, dict]:
    """Run every job on a process pool, at most ``jobs_count`` in flight, the longest first:
    the letter pilots, then (once the pilots have picked tau0) the letter runs, which make
    the critical path, while the small jobs fill the other worker."""
    results: list[dict] = []
    pilot_choice: dict[str, float] = {}
    pending_pilots = {spec.name: len(spec.tau0_grid) for spec in specs if spec.pilot}
    urgent = pilot_jobs(specs, quick)  # run before anything else, in order
    queue = plan([s for s in specs if not s.pilot], quick, pilot_choice)
    queue += baseline_jobs(specs, quick) + figure2_jobs(specs, quick) + [(job_speed, (quick,))]
    queue += [(job_online, (s, quick)) for s in specs if not s.name.endswith("(pooled)")]
    queue += study_jobs(specs, quick, seeds)
    queue.sort(key=expected_cost, reverse=True)
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs_count) as pool:
        futures: dict = {}
        while urgent or queue or futures:
            while (urgent or queue) and len(futures) < jobs_count:
                job = urgent.pop(0) if urgent else queue.pop(0)
                futures[pool.submit(run_job, job)] = job
            done, _ = wait(futures, return_when=FIRST_COMPLETED)
            for future in done:
                job = futures.pop(future)
                result = future.result()
                result.setdefault("pilot", False)
                results.append(result)
                log(f"[{time.perf_counter() - started:7.1f} s] {describe(result)}")
                if job[0] is not job_pilot:
                    continue
                name = result["dataset"]
                pending_pilots[name] -= 1
                if pending_pilots[name]:
                    continue
                pilots = [r for r in results if r["pilot"] and r["dataset"] == name]
                chosen = max(
                    pilots, key=lambda r: (best_point(r["path"])["validation"], -r["tau0"])
                )
                pilot_choice[name] = chosen["tau0"]
                log(f"pilot for {name}: tau0 = {chosen['tau0']:g}")
                spec = next(s for s in specs if s.name == name)
                urgent += sorted(plan([spec], quick, pilot_choice), key=expected_cost, reverse=True)
    return results, pilot_choice


def expected_cost(job) -> float:
    """A rough CPU cost, to start the long jobs first: n_train * k^2 * m for Algorithm 1."""
    function, args = job
    if function in (job_cg, job_pilot):
        spec, quick, _, corrective, _, k, iters = args
        data = load(spec, quick)
        cost = len(data["train"][1]) * k * k * len(data["classes"]) * iters
        return cost * (3.0 if corrective == "full" else 1.0)
    if function is job_svc:
        return len(load(*args[:2])["train"][1]) ** 2 * 50.0
    return 1e6


def describe(result: dict) -> str:
    kind = result["kind"]
    if kind == "cg":
        best = best_point(result["path"])
        seed = result.get("split_seed", 0)
        return (
            f"{result['dataset']:18s}{f' [split {seed}]' if seed else ''} "
            f"{result['corrective']:6s} {result['penalty']:8s} "
            f"tau0={result['tau0']:<6g} val {100 * best['validation']:.2f} test "
            f"{100 * best['test']:.2f} ({best['basis']}) {result['fit_cpu_seconds']:.1f} s cpu"
        )
    if kind in ("linear", "kernel"):
        return (
            f"{result['dataset']:18s} {kind:6s} C={result['C']:<6g} val "
            f"{100 * result['validation']:.2f} test {100 * result['test']:.2f} "
            f"{result['fit_cpu_seconds']:.1f} s cpu"
        )
    if kind == "ovr":
        best = best_point(result["path"])
        return (
            f"{result['dataset']:18s} ovr    tau0={result['tau0']:<6g} val "
            f"{100 * best['validation']:.2f} test {100 * best['test']:.2f}"
        )
    if kind == "online":
        return (
            f"{result['dataset']:18s} online pass: progressive "
            f"{100 * result['progressive_last_quarter']:.2f} test {100 * result['test']:.2f}"
        )
    if kind == "figure2":
        return f"{result['dataset']:18s} figure 2 ({len(result['ratios']['l1 init'])} gradients)"
    return "speed"
