"""``--compat gavel`` against Gavel's simulator: the tables of docs/fidelity.md's ``--compat gavel``
section, per peer run (datasets/peer/results): jobs within one round (360 s) of Gavel's finish
time, average JCT gap, drops, CPU; and the same with HiGHS' vertex instead of the central optimum
(how much the choice among the LP's optima matters).

    python bench/gavel_compat.py [--write]          # the main table
    python bench/gavel_compat.py --ecos [--write]   # the experiment: Gavel's own solver (cvxpy + ECOS,
                                                    # not a fastblox dependency) in place of HiGHS

``--ecos`` needs ``cvxpy`` and ``ecos`` importable (e.g. ``PYTHONPATH=<a venv's site-packages>``);
it solves the same problems as Gavel's ``policies/max_min_fairness.py`` and
``finish_time_fairness.py`` write them, with cvxpy/ECOS, inside the unchanged engine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import fastblox  # noqa: E402
from fastblox import compat_gavel, fidelity  # noqa: E402
from fastblox.traces import read_trace  # noqa: E402

LP_POLICIES = ("max_min_fairness", "max_min_fairness_perf", "finish_time_fairness", "finish_time_fairness_perf")


def gavel_runs():
    return [r for r, row in fidelity.peer_summary().items() if row["simulator"] == "gavel"]


def one(run: str, traces: dict, **opts) -> dict:
    wl, cl, pol = run.split("_", 2)
    if wl not in traces:
        traces[wl] = read_trace(fidelity.GAVEL_WORKLOADS[wl], steps_per_s="builtin")
    t0 = time.process_time()
    res = fastblox.simulate(traces[wl], compat="gavel", cluster=fidelity.GAVEL_SPECS[cl], policy=pol,
                            policy_opts=opts or None)
    cpu = time.process_time() - t0
    peer = fidelity.peer_summary()[run]
    return {**fidelity.compare(res, run, float(peer["avg_jct_s"])), "cpu_s": cpu, "peer_cpu_s": float(peer["cpu_s"])}


def _ecos_solvers(gavel_arithmetic: bool = True):
    """Gavel's two LP policies as its code writes them, solved by cvxpy/ECOS (the experiment only).
    ``gavel_arithmetic=False``: the max-min coefficients computed as ``thr sf / (sum_t thr C_t /
    sum_t C_t)`` — equal to Gavel's but rounded differently."""
    import cvxpy as cp

    def base(x, sfa, cap):
        return [x >= 0, cp.sum(cp.multiply(sfa, x), axis=0) <= cap, cp.sum(x, axis=1) <= 1]

    def max_min(thr, sf, cap, central=True):
        m, n = thr.shape
        sfa = np.repeat(sf[:, None], n, axis=1)
        if gavel_arithmetic:
            coef = compat_gavel._max_min_coef(thr, sf, cap)
        else:
            coef = thr * sfa / ((thr * cap[None, :]).sum(axis=1) / cap.sum())[:, None]
        x = cp.Variable(thr.shape)
        cp.Problem(cp.Maximize(cp.min(cp.sum(cp.multiply(coef, x), axis=1))), base(x, sfa, cap)).solve(solver="ECOS")
        return x.value.clip(min=0.0).clip(max=1.0)

    def ftf(thr, sf, cap, since, rem, iso_time, central=True):
        m, n = thr.shape
        sfa = np.repeat(sf[:, None], n, axis=1)
        x = cp.Variable(thr.shape)
        fr = [(since[i] + rem[i] * cp.inv_pos(cp.sum(cp.multiply(thr[i], x[i])))) / iso_time[i] for i in range(m)]
        cp.Problem(cp.Minimize(fr[0] if m == 1 else cp.maximum(*fr)), base(x, sfa, cap)).solve(solver="ECOS")
        return None if x.value is None else x.value.clip(min=0.0).clip(max=1.0)

    return max_min, ftf


def _two_job_example(central_mm, ecos_mm) -> list:
    """The smallest LP with many optima: agnostic max-min, jobs of 4 and 2 GPUs on 36 GPUs of one
    type (the 4-GPU job's share may be anything in [0.5, 1]): the share each rule returns."""
    thr, sf, cap = np.ones((2, 1)), np.array([4.0, 2.0]), np.array([36.0])
    got = {"ECOS (Gavel)": ecos_mm(thr, sf, cap)[0, 0], "central (fastblox default)": central_mm(thr, sf, cap, True)[0, 0],
           "HiGHS vertex": central_mm(thr, sf, cap, False)[0, 0]}
    return ["Two jobs of 4 and 2 GPUs, 36 GPUs of one type, agnostic max-min: the 4-GPU job's share "
            "(every value in [0.5, 1] is optimal): " + ", ".join(f"{k} {v:.4f}" for k, v in got.items()) + ".", ""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the table into docs/fidelity.md")
    ap.add_argument("--ecos", action="store_true", help="the experiment: cvxpy/ECOS in place of HiGHS (LP runs only)")
    a = ap.parse_args(argv)
    traces = {}
    lines = []
    if a.ecos:
        central_mm, central_ftf = compat_gavel.max_min_lp, compat_gavel.ftf_lp
        ecos_mm, ecos_ftf = _ecos_solvers()
        ecos_mm_rounded, _ = _ecos_solvers(gavel_arithmetic=False)
        lines += _two_job_example(central_mm, ecos_mm)
        diffs = {"central": [], "vertex": []}

        def mm_recorded(thr, sf, cap, central=True):  # ECOS's allocation; how far the others are from it
            x = ecos_mm(thr, sf, cap)
            for k, c in (("central", True), ("vertex", False)):
                diffs[k].append(float(np.abs(central_mm(thr, sf, cap, c) - x).max()))
            return x

        compat_gavel.max_min_lp, compat_gavel.ftf_lp = mm_recorded, ecos_ftf
        lines += ["| Gavel run | jobs | within 360 s | within 1 s | average JCT gap | dropped (Gavel / fastblox) | "
                  "max-min allocations with several optima | largest entry difference to ECOS, median over them: "
                  "central / vertex | ECOS, coefficients rounded differently: within 360 s, gap |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for run in gavel_runs():
            if run.split("_", 2)[2] not in LP_POLICIES:
                continue
            diffs["central"].clear()
            diffs["vertex"].clear()
            r = one(run, traces)
            several = [(c, v) for c, v in zip(diffs["central"], diffs["vertex"]) if v > 1e-6]
            how = (f"{len(several)} of {len(diffs['vertex'])} | {np.median([c for c, _ in several]):.3f} / "
                   f"{np.median([v for _, v in several]):.3f}") if several else "(finish-time fairness) | "
            if "max_min" in run:  # the same, with the coefficients rounded differently
                compat_gavel.max_min_lp = lambda thr, sf, cap, central=True: ecos_mm_rounded(thr, sf, cap)
                p = one(run, traces)
                compat_gavel.max_min_lp = mm_recorded
                rounded = f"{100 * p['within_round']:.1f}%, {p['diff_pct']:+.2f}%"
            else:
                rounded = ""
            lines.append(f"| {run} | {r['jobs_compared']} | {100 * r['within_round']:.1f}% | {100 * r['same_1s']:.1f}% | "
                         f"{r['diff_pct']:+.2f}% | {r['dropped_theirs']} / {r['dropped_ours']} | {how} | {rounded} |")
            print(lines[-1], flush=True)
        section = "gavel-ecos"
    else:
        lines += ["| Gavel run | jobs | Gavel avg JCT (s) | fastblox avg JCT (s) | gap | within 360 s | within 1 s | "
                  "dropped (Gavel / fastblox) | HiGHS' vertex: within 360 s | vertex: gap | Gavel CPU (s) | fastblox CPU (s) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for run in gavel_runs():
            r = one(run, traces)
            if run.split("_", 2)[2] in LP_POLICIES:
                v = one(run, traces, optimum="vertex")
                vw, vg = f"{100 * v['within_round']:.1f}%", f"{v['diff_pct']:+.2f}%"
            else:
                vw = vg = "(no LP)"
            lines.append(f"| {run} | {r['jobs_compared']} | {r['theirs_avg']:,.1f} | {r['ours_avg']:,.1f} | "
                         f"{r['diff_pct']:+.2f}% | {100 * r['within_round']:.1f}% | {100 * r['same_1s']:.1f}% | "
                         f"{r['dropped_theirs']} / {r['dropped_ours']} | {vw} | {vg} | {r['peer_cpu_s']:.1f} | "
                         f"{r['cpu_s']:.1f} |")
            print(lines[-1], flush=True)
        section = "gavel-compat"
    text = "\n".join(lines)
    if a.write:
        from _util import update_section

        what = "--ecos " if a.ecos else ""
        stamp = f"Measured by `python bench/gavel_compat.py {what}--write` ({time.strftime('%Y-%m-%d')})."
        update_section(ROOT / "docs" / "fidelity.md", section, stamp + "\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
