"""``--compat gavel`` against Gavel's simulator: the tables of docs/fidelity.md's ``--compat gavel``
section, per peer run (datasets/peer/results): jobs within one round (360 s) and within 1 s of
Gavel's finish time, average JCT gap, drops, CPU, with each way of solving the LP policies
(``optimum=ecos``, Gavel's own solver and the default; ``central``; HiGHS' ``vertex``), and the
rounding experiment (ECOS with the max-min coefficients computed in another order).

    python bench/gavel_compat.py [--write]

Needs the optional extra ``fastblox[gavel]`` (the ``ecos`` package).
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


def _rounded_coef(thr, sf, cap):
    """The max-min coefficients as ``thr sf / (sum_t thr C_t / sum_t C_t)``: Gavel's numbers,
    computed in another order (so rounded differently)."""
    sfa = np.repeat(sf[:, None], thr.shape[1], axis=1)
    return thr * sfa / ((thr * cap[None, :]).sum(axis=1) / cap.sum())[:, None]


def _two_job_example() -> list:
    """The smallest LP with many optima: agnostic max-min, jobs of 4 and 2 GPUs on 36 GPUs of one
    type (the 4-GPU job's share may be anything in [0.5, 1]): the share each rule returns."""
    from fastblox import gavel_ecos

    thr, sf, cap = np.ones((2, 1)), np.array([4.0, 2.0]), np.array([36.0])
    got = {"ECOS (Gavel, optimum=ecos)": gavel_ecos.max_min(compat_gavel._max_min_coef(thr, sf, cap), sf, cap)[0, 0],
           "central": compat_gavel.max_min_lp(thr, sf, cap, True)[0, 0],
           "HiGHS vertex": compat_gavel.max_min_lp(thr, sf, cap, False)[0, 0]}
    return ["Two jobs of 4 and 2 GPUs, 36 GPUs of one type, agnostic max-min: the 4-GPU job's share "
            "(every value in [0.5, 1] is optimal): " + ", ".join(f"{k} {v:.4f}" for k, v in got.items()) + ".", ""]


def _pct(r) -> str:
    return f"{100 * r['within_round']:.1f}%, {r['diff_pct']:+.2f}%"


def main_table(traces) -> list:
    lines = ["| Gavel run | jobs | Gavel avg JCT (s) | fastblox avg JCT (s) | gap | within 360 s | within 1 s | "
             "dropped (Gavel / fastblox) | optimum=central: within 360 s, gap | optimum=vertex: within 360 s, gap | "
             "Gavel CPU (s) | fastblox CPU (s) | central CPU (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in gavel_runs():
        r = one(run, traces)  # the default: optimum=ecos for the LP policies
        if run.split("_", 2)[2] in LP_POLICIES:
            c = one(run, traces, optimum="central")
            v = one(run, traces, optimum="vertex")
            cw, vw, ccpu = _pct(c), _pct(v), f"{c['cpu_s']:.1f}"
        else:
            cw = vw = ccpu = "(no LP)"
        lines.append(f"| {run} | {r['jobs_compared']} | {r['theirs_avg']:,.1f} | {r['ours_avg']:,.1f} | "
                     f"{r['diff_pct']:+.2f}% | {100 * r['within_round']:.1f}% | {100 * r['same_1s']:.1f}% | "
                     f"{r['dropped_theirs']} / {r['dropped_ours']} | {cw} | {vw} | {r['peer_cpu_s']:.1f} | "
                     f"{r['cpu_s']:.1f} | {ccpu} |")
        print(lines[-1], flush=True)
    return lines


def rounding_table(traces) -> list:
    """ECOS with the max-min coefficients rounded differently: how sensitive the runs are."""
    lines = _two_job_example()
    lines += ["| Gavel max-min run | ECOS, Gavel's arithmetic: within 360 s, gap | "
              "ECOS, coefficients rounded differently: within 360 s, gap |", "|---|---|---|"]
    for run in gavel_runs():
        if "max_min" not in run:
            continue
        r = one(run, traces)
        keep = compat_gavel._max_min_coef
        compat_gavel._max_min_coef = _rounded_coef
        try:
            p = one(run, traces)
        finally:
            compat_gavel._max_min_coef = keep
        lines.append(f"| {run} | {_pct(r)} | {_pct(p)} |")
        print(lines[-1], flush=True)
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the tables into docs/fidelity.md")
    a = ap.parse_args(argv)
    from fastblox.gavel_ecos import require_ecos

    require_ecos("(this benchmark)")
    traces = {}
    sections = {"gavel-compat": main_table(traces), "gavel-ecos": rounding_table(traces)}
    if a.write:
        from _util import update_section

        stamp = f"Measured by `python bench/gavel_compat.py --write` ({time.strftime('%Y-%m-%d')})."
        for name, lines in sections.items():
            update_section(ROOT / "docs" / "fidelity.md", name, stamp + "\n\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
