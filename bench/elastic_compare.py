"""Pollux vs the Pollux simulator's Optimus and Tiresias in the elastic engine (``fastblox.mixed``,
no --compat) on the Pollux artifact's workload-6 (bundled) as it is and with a share of its rows
turned rigid, on 16x4, with and without load-based admission: average JCT by kind and CPU seconds::

    python bench/elastic_compare.py [--rigid 0.25] [--seed 0] [--write]

A rigid row keeps its GPUs and runs for its time alone at them (``duration_s`` of the workload:
``fastblox.elastic.isolated_run_s``). ``--write`` puts the table into docs/elastic.md
(``bench:elastic-compare``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _util import machine, update_section  # noqa: E402

import fastblox  # noqa: E402
from fastblox import mixed  # noqa: E402
from fastblox.spec import ELASTIC_POLICIES  # noqa: E402

WORKLOAD = ROOT / "datasets" / "pollux" / "workload-6.csv"
DOC = ROOT / "docs" / "elastic.md"
ADMISSIONS = ("accept-all", "load:1")


def workloads(rigid: float, seed: int) -> dict:
    w = mixed.read_mixed(WORKLOAD)
    m = mixed.read_mixed(WORKLOAD, name="workload-6-mixed")
    m.extra["elastic"] = np.random.default_rng(seed).random(len(m)) >= rigid
    rigid_rows = int((~m.extra["elastic"]).sum())
    return {"workload-6 (160 elastic)": w, f"workload-6, {int(round(rigid * 100))} % rigid ({rigid_rows})": m}


def run(w, policy: str, admission: str) -> dict:
    t0 = time.process_time()
    s = fastblox.simulate(w, policy=policy, cluster="16x4", admission=admission).summary
    cpu = time.process_time() - t0
    assert s["num_finished"] == len(w)
    return {"policy": policy, "admission": admission, "avg_h": s["avg_jct_s"] / 3600,
            "el_h": s["avg_jct_elastic_s"] / 3600, "rg_h": s["avg_jct_rigid_s"] / 3600,
            "p99_h": s["p99_jct_s"] / 3600, "makespan_h": s["makespan_s"] / 3600, "restarts": s["restarts"],
            "held": s["held_jobs"], "cpu_s": cpu}


def table(rows: list) -> str:
    head = ("| workload | policy | admission | avg JCT | elastic | rigid | p99 JCT | makespan | restarts | held | CPU s |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|")
    h = lambda x: "–" if x != x else f"{x:.2f} h"  # noqa: E731  (NaN: no job of that kind)
    body = [f"| {name} | `{r['policy']}` | {r['admission']} | {h(r['avg_h'])} | {h(r['el_h'])} | {h(r['rg_h'])} | "
            f"{h(r['p99_h'])} | {h(r['makespan_h'])} | {r['restarts']:,} | {r['held']} | {r['cpu_s']:.1f} |"
            for name, r in rows]
    return "\n".join([head, *body, "", f"`python bench/elastic_compare.py --write` ({machine()}; CPU seconds of "
                      "each whole `fastblox.simulate` call, one process)."])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rigid", type=float, default=0.25, help="share of workload-6's rows made rigid")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    rows = []
    for name, w in workloads(a.rigid, a.seed).items():
        for adm in ADMISSIONS:
            for policy in ELASTIC_POLICIES:
                r = run(w, policy, adm)
                print(name, r, flush=True)
                rows.append((name, r))
    if a.write:
        update_section(DOC, "elastic-compare", table(rows))
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
