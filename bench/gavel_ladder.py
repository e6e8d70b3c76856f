"""Why native Gavel policies differ from Gavel's simulator: the ladder of ``fastblox/gavel_ladder.py``
(Gavel's quirks switched off one at a time in the exact replay, each rung keeping the ones before
it), run on the peer runs with the largest native gaps; writes docs/fidelity.md's table::

    python bench/gavel_ladder.py [--write]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from fastblox import fidelity  # noqa: E402
from fastblox import gavel_ladder as gl  # noqa: E402

RUNS = ("over1000_v100x36_fifo_perf", "over1000_v100x36_max_min_fairness_perf",
        "over1000_v100x36_finish_time_fairness_perf", "over1000_v100x36_fifo",
        "n2000_v100x36_max_min_fairness", "n2000_v100x36_fifo", "n2000_het36_max_min_fairness",
        "light1000_het36_max_min_fairness", "light1000_het36_finish_time_fairness_perf", "light1000_het36_fifo")


def table() -> str:
    traces = {}
    summ = fidelity.peer_summary()
    head = ["Gavel run", "Gavel (compat, exact)"] + [f"{i + 1}. {r}" for i, r in enumerate(gl.RUNGS)] + ["native"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for run in RUNS:
        theirs = float(summ[run]["avg_jct_s"])
        vals = [gl.rung_avg(run, k, traces) for k in range(len(gl.RUNGS) + 1)] + [gl.native_avg(run, traces)]
        lines.append(f"| {run} | " + " | ".join(f"{v:,.0f} ({100 * (v / theirs - 1):+.1f} %)" for v in vals) + " |")
        print(lines[-1], flush=True)
    return "\n".join(lines)


def seed_spread(seeds=range(6)) -> str:
    """How much the native agnostic max-min moves with only its type-order seed (heterogeneous runs)."""
    import fastblox

    traces, parts = {}, []
    for run in ("n2000_het36_max_min_fairness", "light1000_het36_max_min_fairness"):
        wl, cl, _ = run.split("_", 2)
        w = gl._trace(wl, traces)
        sel = gl._gavel_jobs(run, w)
        avgs = []
        for seed in seeds:
            res = fastblox.simulate(w, policy="gavel-las-agnostic", policy_opts={"seed": seed}, **fidelity.gavel_config(cl))
            fin = res.jobs["finish_s"].to_numpy()
            avgs.append(float((fin[sel] - w.submit_s[sel]).mean()))
        parts.append(f"{run}: {', '.join(f'{v:,.0f}' for v in avgs)} (spread {100 * (max(avgs) / min(avgs) - 1):.1f} %)")
    return (f"Native `gavel-las-agnostic` with only its type-order seed changed ({seeds.start}–{seeds.stop - 1}), "
            "average JCT over Gavel's finished jobs: " + "; ".join(parts) + ".")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the table into docs/fidelity.md")
    a = ap.parse_args(argv)
    text = table() + "\n\n" + seed_spread()
    print(text.splitlines()[-1])
    if a.write:
        from _util import update_section

        stamp = (f"Measured by `python bench/gavel_ladder.py --write` ({time.strftime('%Y-%m-%d')}); average JCT "
                 "in seconds over the jobs Gavel finishes, and the gap to Gavel's.")
        update_section(ROOT / "docs" / "fidelity.md", "gavel-ladder", stamp + "\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
