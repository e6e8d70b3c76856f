"""gavel-ftf's fast allocation against the LP bisection it replaced, on the 100k-job Philly run
of bench/bench_policies.py: every ``--every``-th allocation's inputs are recorded during a run
with the fast planner, then solved again by ``ftf_allocation_lp`` (an LP per probe). Reports the
time and LPs of each, the ratio of their ``rho`` maxima (both must be within the bisection's
tolerance, 1e-3, of the optimum) and of their total throughputs::

    python bench/ftf_check.py [--every 10] [--write]     # --write: docs/performance.md's block
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _util import machine, save, update_readme  # noqa: E402

import fastblox  # noqa: E402
from fastblox.policies import gavel  # noqa: E402
from fastblox.traces import read_trace  # noqa: E402

import bench_policies  # noqa: E402


def _rho(case, x):
    thr, _, _, el, rem, den = case
    rate = (thr * x).sum(axis=1)
    wait = np.where(rem > 0, rem / np.where(rate > 0, rate, 1.0), 0.0)
    wait = np.where((rem > 0) & (rate <= 0), np.inf, wait)
    return float(np.max((el + wait) / den))


def record(every: int):
    """Run the 100k workload with gavel-ftf; returns (summary, recorded cases, fast seconds and LPs)."""
    cases, spent = [], {"s": 0.0, "lps": 0, "n": 0}
    fast = gavel.ftf_allocation

    def spy(thr, sf, cap, elapsed, remaining, denom, *a):
        t0 = time.perf_counter()
        x, lps = fast(thr, sf, cap, elapsed, remaining, denom, *a)
        if spent["n"] % every == 0:
            spent["s"] += time.perf_counter() - t0
            spent["lps"] += lps
            cases.append(((thr, sf, cap, np.asarray(elapsed), np.asarray(remaining), np.asarray(denom)), x))
        spent["n"] += 1
        return x, lps

    gavel.ftf_allocation = spy
    try:
        label, path, head, cluster = bench_policies.BIG
        w = read_trace(path, on_bad_rows="drop").head(head)
        res = fastblox.simulate(w, cluster=cluster, policy="gavel-ftf")
    finally:
        gavel.ftf_allocation = fast
    return res.summary, cases, spent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=10, help="compare every N-th allocation (default 10)")
    ap.add_argument("--write", action="store_true", help="write docs/performance.md's ftf-check block")
    a = ap.parse_args(argv)
    summary, cases, spent = record(a.every)
    t_ref, lps_ref, ratio, tput = 0.0, 0, [], []
    for case, x in cases:
        t0 = time.perf_counter()
        ref, n = gavel.ftf_allocation_lp(*case)
        t_ref += time.perf_counter() - t0
        lps_ref += n
        got, want = _rho(case, x), _rho(case, ref)
        ratio.append(1.0 if got == want else got / want)  # (both infinite: a job no type can run)
        thr = case[0]
        tput.append((thr * x).sum() / max((thr * ref).sum(), 1e-300))
    ratio, tput = np.array(ratio), np.array(tput)
    with np.errstate(invalid="ignore"):
        fin = np.isfinite(ratio) & (ratio > 0)
    assert not (ratio == np.inf).any() and not np.isnan(ratio).any(), "the fast allocation leaves a job without GPUs"
    d = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "allocations": spent["n"], "compared": len(cases),
         "fast_ms": 1e3 * spent["s"] / len(cases), "fast_lps": spent["lps"] / len(cases),
         "ref_ms": 1e3 * t_ref / len(cases), "ref_lps": lps_ref / len(cases),
         "rho_ratio_min": float(ratio[fin].min()), "rho_ratio_max": float(ratio[fin].max()),
         "rho_ref_infinite": int((~fin).sum()),
         "throughput_ratio_min": float(tput.min()), "throughput_ratio_max": float(tput.max()),
         "avg_jct_h": summary["avg_jct_s"] / 3600, "sim_s": summary["sim_wall_s"]}
    save("ftf_check", d)
    text = (f"Measured by `python bench/ftf_check.py --write` on {d['machine']} ({d['date']}): the 100k-job run "
            f"with `gavel-ftf` ({d['sim_s']:.1f} s, average JCT {d['avg_jct_h']:.2f} h, {d['allocations']:,} "
            f"allocations); every {a.every}th allocation ({d['compared']}) solved again by the LP bisection. "
            f"Per allocation: **{d['fast_ms']:.2f} ms and {d['fast_lps']:.2f} LPs** (fast) against "
            f"**{d['ref_ms']:.1f} ms and {d['ref_lps']:.2f} LPs** (LP per probe). Largest `rho` over the jobs, "
            f"fast / LP: {d['rho_ratio_min']:.6f} to {d['rho_ratio_max']:.6f}"
            + (f" ({d['rho_ref_infinite']} allocations where the LP bisection's leaves a job without GPUs: "
               "`rho` infinite)" if d["rho_ref_infinite"] else "")
            + f"; total throughput, fast / LP: {d['throughput_ratio_min']:.6f} to {d['throughput_ratio_max']:.6f}.")
    print(text)
    if a.write:
        update_readme("ftf-check", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
