"""Sweep benchmark (issue 5): 1,000 configurations on the 2,000-job peer workload
(shared/peer-traces/gavel_n2000_lam400_s0.neutral.csv), run by ``fastblox sweep``'s executors, against
the naive way: one ``fastblox run`` process per configuration (timed on a sample and extrapolated).

The 1,000 points: 5 policies x 2 placements x 5 cluster sizes x 5 restart costs x 2 time models x
2 admissions. (No seeds: a trace replay is deterministic, so repeating a point with another seed
would only measure the same run twice.) Every point writes its per-job Parquet + JSON files, as a
real sweep does; wall times include the process pool's start-up and summary.parquet.

    python bench/bench_sweep.py              # local (process pool) + threads + 20-config subprocess sample
    python bench/bench_sweep.py --sample 5   # a smaller subprocess sample
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _util import ROOT, machine, save  # noqa: E402

from fastblox.sweep import load_config, run_sweep  # noqa: E402

TRACE = Path(os.environ.get("FASTBLOX_PEER_TRACE", ROOT.parent / "shared" / "peer-traces" / "gavel_n2000_lam400_s0.neutral.csv"))

GRID = {
    "policy": ["fifo", "las", "las-gpu", "srtf", "sjf"],
    "placement": ["first-fit", "consolidated"],
    "cluster": ["9x4", "12x4", "16x4", "24x4", "32x4"],
    "restart_s": [0, 10, 30, 60, 120],
    "time_model": ["events", "rounds"],
    "admission": ["accept-all", "load:1.5"],
}


def config() -> dict:
    return {"name": "bench-1000", "base": {"trace": str(TRACE)}, "grid": GRID}


def run_one_cli(p: dict, out: str) -> float:
    cmd = [sys.executable, "-m", "fastblox.cli", "run", "--trace", p["trace"], "--policy", p["scheduler"],
           "--placement", p["placement"], "--cluster", p["cluster"], "--restart-s", str(p["restart_s"]),
           "--time-model", p["time_model"], "--admission", p["admission"], "--out", out]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sample", type=int, default=20, help="configurations run as separate processes (default 20)")
    ap.add_argument("--workers", type=int, default=None)
    a = ap.parse_args()
    if not TRACE.exists():
        sys.exit(f"bench_sweep: the peer trace is not at {TRACE} (set FASTBLOX_PEER_TRACE)")
    cfg = load_config(config())
    n = len(cfg.points)
    assert n == 1000, n
    print(f"bench_sweep: {n} configurations on {TRACE.name} ({machine()})")
    tmp = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    results = {"machine": machine(), "num_points": n}
    try:
        # warm numba's on-disk cache so no executor pays for compiling
        run_sweep({"base": {"trace": str(TRACE)}}, tmp / "warm", executor="serial", progress=False)
        for ex in ("local", "threads"):
            t0 = time.perf_counter()
            res = run_sweep(cfg, tmp / ex, executor=ex, workers=a.workers, progress=False)
            wall = time.perf_counter() - t0
            assert len(res.ran) == n and not res.errors, res
            sim = float(res.summary["sim_wall_s"].sum())
            print(f"  {ex:8s} {wall:6.2f} s  {n / wall:7.1f} configs/s   (simulation itself: {sim:.2f} s of CPU)")
            results[ex] = {"wall_s": wall, "configs_per_s": n / wall, "sim_s": sim}
            t0 = time.perf_counter()
            res2 = run_sweep(cfg, tmp / ex, executor=ex, workers=a.workers, progress=False)
            print(f"  {ex:8s} rerun (all {len(res2.skipped)} points already done): {time.perf_counter() - t0:.2f} s")
        # the naive way: one process per configuration
        step = max(1, n // a.sample)
        sample = cfg.points[::step][: a.sample]
        times = [run_one_cli(p.params, str(tmp / "cli" / p.id)) for p in sample]
        per = sum(times) / len(times)
        workers = a.workers or os.cpu_count() or 1
        est_serial = per * n
        est_par = est_serial / workers
        print(f"  one `fastblox run` process per config: {per:.2f} s each (mean of {len(times)}), so ~{est_serial:,.0f} s "
              f"for {n} one after another, ~{est_par:,.0f} s with {workers} at a time "
              f"(extrapolated, not measured): {n / est_par:.1f} configs/s")
        print(f"  local sweep vs {workers} parallel processes per config: {est_par / results['local']['wall_s']:.0f}x faster")
        results["subprocess"] = {"sample": len(times), "mean_s": per, "extrapolated_serial_s": est_serial,
                                 "extrapolated_parallel_s": est_par, "configs_per_s_parallel": n / est_par}
        print(f"  wrote {save('sweep', results)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
