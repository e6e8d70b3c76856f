"""Pollux on rigid jobs: the compiled rule (``fastblox.mixed.simulate_rigid``) against the elastic
engine's Python rounds (``simulate_mixed``: its programme over every job and GPU count, packing and
local search) on one GPU type, job by job. Writes docs/elastic.md's ``pollux-rigid`` block.

    python bench/pollux_rigid_fidelity.py            # print
    python bench/pollux_rigid_fidelity.py --write    # and write the block

Workloads (generated, deterministic): short Philly jobs (the first of ``../shared/traces/philly-rfold``
under 2 h) on 2x8 and 1x8; and random gangs of 1-12 GPUs (3, 6 and 12 included: they fragment
4-GPU nodes) on 4x4, six seeds. Per workload: the rounds whose first plan did not pack (there the
elastic engine's local search may move jobs; the compiled rule has none), the jobs whose finish
differs, the largest difference, and the two average JCTs.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _util import ROOT, machine, update_section  # noqa: E402

from fastblox import mixed  # noqa: E402

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared")


def philly(n: int, nodes: int):
    from fastblox.traces import read_trace

    w = read_trace(os.path.join(SHARED, "traces", "philly-rfold", "jobs.csv.gz"), on_bad_rows="drop").head(5000)
    w = w.take(np.flatnonzero(w.duration_s < 7200)[:n])
    return f"Philly, {n} jobs under 2 h", np.minimum(w.num_gpus, nodes * 8), w.duration_s, w.submit_s, nodes, 8


def fragmenting(seed: int):
    rng = np.random.default_rng(seed)
    n = 40
    g = rng.choice([1, 1, 1, 2, 4, 8, 3, 6, 12], n)
    d = np.round(rng.exponential(2000, n) + 1, 1)
    sub = np.sort(np.round(rng.uniform(0, 3000, n), 1))
    return f"random gangs 1-12, seed {seed}", g, d, sub, 4, 4


def compare(label, gangs, dur, submit, nodes, per_node) -> dict:
    n = len(gangs)
    gate = mixed.Gate(submit, gangs, 0.0, nodes * per_node)
    a = mixed.simulate_mixed([""] * n, gangs, dur, np.zeros(n, bool), submit, 60.0, nodes, per_node, gate=gate)
    b = mixed.simulate_rigid(gangs, dur, submit, 60.0, np.zeros(nodes, np.int64), per_node)
    diff = np.abs(a["finish_s"] - b["finish_s"])
    ja, jb = float(np.mean(a["finish_s"] - submit)), float(np.mean(b["finish_s"] - submit))
    return {"workload": label, "cluster": f"{nodes}x{per_node}", "jobs": n, "rounds": b["rounds"],
            "unproven": b["unproven_rounds"], "differ": int((diff > 0).sum()), "max_diff_s": float(diff.max()),
            "jct_elastic_s": ja, "jct_compiled_s": jb, "jct_change": jb / ja - 1.0}


def table(rows) -> str:
    out = ["| workload | cluster | rounds (not packed) | jobs finishing differently | largest difference | "
           "avg JCT, elastic engine | avg JCT, compiled | change |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['workload']} | {r['cluster']} | {r['rounds']:,} ({r['unproven']:,}) | {r['differ']} of "
                   f"{r['jobs']} | {r['max_diff_s']:,.0f} s | {r['jct_elastic_s']:,.1f} s | {r['jct_compiled_s']:,.1f} s | "
                   f"{100 * r['jct_change']:+.2f} % |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write docs/elastic.md's pollux-rigid block")
    a = ap.parse_args(argv)
    rows = [compare(*philly(150, 2)), compare(*philly(150, 1))] + [compare(*fragmenting(s)) for s in range(6)]
    text = table(rows) + f"\n\n`python bench/pollux_rigid_fidelity.py --write` ({machine()})."
    print(text)
    if a.write:
        update_section(ROOT / "docs" / "elastic.md", "pollux-rigid", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
