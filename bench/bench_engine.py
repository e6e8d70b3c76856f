"""Engine benchmarks (issue 2): Blox's Figure 6 grid in compat mode, 100k jobs in events mode,
cold start. Checks outputs before timing, takes medians, writes bench/out/engine.json and the
README's performance block.

    python bench/bench_engine.py            # everything (the plain-Python baseline takes ~1 min)
    python bench/bench_engine.py --quick    # baseline on 3 of the 27 configs only
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor


sys.path.insert(0, os.path.dirname(__file__))
from _util import cold_start, machine, save, timed, update_readme  # noqa: E402

import fastblox  # noqa: E402
from fastblox.reference.blox import simulate_blox_reference  # noqa: E402

POLICIES = ["fifo", "las", "srtf"]
LOADS = list(range(1, 10))
TRACK = (3000, 4000)
GRID_JOBS = 20_000  # enough arrivals for every config (checked below)


def grid_workloads():
    return {load: fastblox.blox_paper_workload(load, GRID_JOBS) for load in LOADS}


def run_grid(ws, threads: int = 1):
    cfgs = [(p, load) for p in POLICIES for load in LOADS]

    def one(cfg):
        p, load = cfg
        return fastblox.simulate(ws[load], policy=p, blox_compat=True, track=TRACK)

    if threads == 1:
        return [one(c) for c in cfgs]
    with ThreadPoolExecutor(threads) as ex:
        return list(ex.map(one, cfgs))


def bench_grid(quick: bool) -> dict:
    ws = grid_workloads()
    t0 = time.perf_counter()
    fastblox.simulate(ws[1].head(50), policy="las", blox_compat=True)
    first_call_s = time.perf_counter() - t0
    results = run_grid(ws)
    for (p, load), r in zip([(p, load) for p in POLICIES for load in LOADS], results):
        assert r.summary["num_tracked"] == 1001 and r.summary["num_finished"] >= 1001, (p, load)
        assert ws[load].submit_s[-1] > r.summary["end_s"], "generate more jobs"
    wall_1, _, res = timed(lambda: run_grid(ws, 1), 5)
    sim_1 = sum(r.summary["sim_wall_s"] for r in res)
    wall_2, _, _ = timed(lambda: run_grid(ws, 2), 5)
    # the plain-Python model of the same semantics, in this run
    cfgs = [(p, load) for p in POLICIES for load in LOADS]
    if quick:
        cfgs = [("fifo", 5), ("las", 5), ("srtf", 5)]
    ref_s, kern_s = 0.0, 0.0
    for p, load in cfgs:
        w = ws[load]
        t0 = time.perf_counter()
        ref = simulate_blox_reference(w.submit_s, w.num_gpus, w.blox_iter_time, w.total_iters, [4] * 32, policy=p, track=TRACK)
        ref_s += time.perf_counter() - t0
        r = fastblox.simulate(w, policy=p, blox_compat=True, track=TRACK)
        kern_s += r.summary["sim_wall_s"]
        assert r.summary["end_s"] == ref.end_time, (p, load)
    per_cfg = {f"{p}@{load}": round(r.summary["avg_jct_s"], 3) for (p, load), r in zip([(p, l) for p in POLICIES for l in LOADS], res)}
    return {
        "configs": 27,
        "rounds_total": int(sum(r.summary["num_rounds"] for r in res)),
        "first_call_s": first_call_s,
        "sim_s_1thread": sim_1,
        "wall_s_1thread": wall_1,
        "wall_s_2threads": wall_2,
        "baseline_configs": len(cfgs),
        "baseline_python_s": ref_s,
        "baseline_kernel_s": kern_s,
        "speedup_vs_python": ref_s / kern_s,
        "avg_jct_s": per_cfg,
    }


def bench_events(n_jobs: int = 100_000) -> dict:
    # mean GPU-seconds per job ~115k: 140 s between arrivals is ~0.8 load on 1,024 GPUs
    w = fastblox.gavel_like_workload(n_jobs, mean_interarrival_s=140.0, seed=1)
    out = {"jobs": n_jobs, "cluster": "256x4", "offered_load": w.offered_load(1024)}
    for p in ("fifo", "las"):
        r = fastblox.simulate(w, cluster="256x4", policy=p, time_model="events")
        assert r.summary["num_finished"] == n_jobs
        med, _, r = timed(lambda: fastblox.simulate(w, cluster="256x4", policy=p, time_model="events"), 5)
        sims = r.summary["sim_wall_s"]
        out[p] = {"sim_s": sims, "wall_s": med, "jobs_per_s": n_jobs / sims, "steps": r.summary["num_steps"],
                  "avg_jct_s": r.summary["avg_jct_s"], "preemptions": r.summary["num_preemptions"]}
    return out


def bench_cold_start() -> dict:
    d = cold_start(["run", "--json"], warm_repeats=2)
    # the README's form: the first and the second warm run
    d["warm_cache_s"], d["warm_cache_again_s"] = d["warm_all_s"]
    return d


def table(d: dict) -> str:
    g, e, c = d["grid"], d["events"], d["cold"]
    return "\n".join([
        f"Measured by `python bench/bench_engine.py` on {d['machine']} ({d['date']}).",
        "",
        "| benchmark | result |",
        "|---|---|",
        f"| Blox Figure 6 grid, compat mode: FIFO/LAS/SRTF × loads 1–9, tracked 3000–4000 (27 configs, {g['rounds_total']:,} rounds) | "
        f"**{g['sim_s_1thread']:.3f} s** of simulation on 1 thread; {g['wall_s_1thread']:.3f} s wall with result tables; {g['wall_s_2threads']:.3f} s wall on 2 threads |",
        f"| same, plain-Python model of the same semantics ({g['baseline_configs']} configs, same run) | {g['baseline_python_s']:.1f} s vs {g['baseline_kernel_s']:.3f} s: **{g['speedup_vs_python']:,.0f}× faster** |",
        f"| {e['jobs']:,} jobs, {e['cluster']} (1,024 GPUs), events mode, FIFO | {e['fifo']['sim_s']:.3f} s: **{e['fifo']['jobs_per_s']:,.0f} jobs/s** |",
        f"| same, LAS (preemptive) | {e['las']['sim_s']:.3f} s: **{e['las']['jobs_per_s']:,.0f} jobs/s** ({e['las']['preemptions']:,} preemptions) |",
        f"| compile, first call in a process (cache loads included) | {g['first_call_s']:.2f} s |",
        f"| cold start `fastblox run`, empty numba cache / warm cache | {c['empty_cache_s']:.1f} s / {c['warm_cache_s']:.1f} s (import alone {c['import_s']:.2f} s) |",
    ])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="plain-Python baseline on 3 configs only")
    ap.add_argument("--no-readme", action="store_true")
    a = ap.parse_args()
    d = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "grid": bench_grid(a.quick), "events": bench_events(),
         "cold": bench_cold_start()}
    save("engine", d)
    t = table(d)
    print(t)
    if not a.no_readme:
        update_readme("engine", t)


if __name__ == "__main__":
    main()
