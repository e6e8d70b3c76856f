"""Pollux on scaled elastic workloads (``fastblox.mixed``): N jobs drawn from the Pollux artifact's
workload-6 (bundled) at an offered load on a cluster of 4-GPU nodes, and CPU seconds::

    python bench/elastic_scale.py --jobs 2000 10000 [--nodes 64] [--load 1.0] [--seed 0]
    python bench/elastic_scale.py --write       # the table of every run measured so far

Each run's numbers go to ``bench/out/elastic_scale.json`` (keyed by jobs, nodes, load, seed and
rigid share); ``--write`` puts the table of all of them into docs/elastic.md (``bench:elastic-scale``).
``--rigid F`` turns a share F of the drawn jobs into rigid ones (their GPUs, for their run time alone).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _util import OUT, machine, update_section  # noqa: E402

from fastblox import elastic, mixed  # noqa: E402

WORKLOAD = ROOT / "datasets" / "pollux" / "workload-6.csv"
STORE = OUT / "elastic_scale.json"
DOC = ROOT / "docs" / "elastic.md"


def workload(jobs: int, nodes: int, load: float, seed: int, rigid: float):
    w = mixed.scaled(mixed.read_mixed(WORKLOAD), jobs, nodes * 4, load=load, seed=seed)
    if rigid > 0:
        e = mixed.elastic_rows(w) & (np.random.default_rng(seed + 1).random(len(w)) >= rigid)
        w.extra["elastic"] = e
    return w


def report_progress(every: int) -> None:
    """Print, every ``every`` Pollux rounds, the simulated time, active jobs and CPU so far (stderr)."""
    from fastblox import compat_pollux as cp

    orig, t0, n = cp.PolluxPolicy.optimize, time.process_time(), [0]

    def optimize(self, active, prev, now):
        n[0] += 1
        if n[0] % every == 0:
            print(f"round {n[0]:,}: {now / 3600:,.1f} h simulated, {len(active)} active, "
                  f"{time.process_time() - t0:,.0f} CPU s", file=sys.stderr, flush=True)
        return orig(self, active, prev, now)

    cp.PolluxPolicy.optimize = optimize


def run(jobs: int, nodes: int, load: float, seed: int, rigid: float) -> dict:
    w = workload(jobs, nodes, load, seed, rigid)
    apps, gangs, dur, e = mixed.job_arrays(w, nodes * 4)
    elastic.fit_perf_params([1.0, 1.0], [1.0, 2.0], [8.0, 16.0], [0.1, 0.2], [0.2, 0.3], kernel=True)  # (loaded)
    t0 = time.process_time()
    out = mixed.simulate_mixed(apps, gangs, dur, e, w.submit_s, 60.0, nodes, 4)
    cpu = time.process_time() - t0
    rounds = len(out["objectives"])
    jct = out["finish_s"] - w.submit_s
    assert (out["finish_s"] > 0).all()
    return {"jobs": jobs, "nodes": nodes, "load": load, "seed": seed, "rigid": rigid, "elastic_jobs": int(e.sum()),
            "cpu_s": round(cpu, 1), "rounds": rounds, "ms_per_round": round(1000 * cpu / max(rounds, 1), 2),
            "simulated_h": round(float(out["end_s"] - w.submit_s.min()) / 3600, 1),
            "avg_jct_h": round(float(jct.mean()) / 3600, 3), "restarts": int(out["restarts"].sum()),
            "machine": machine()}


def table(rows: list) -> str:
    head = ("| jobs (elastic) | cluster | load | simulated | Pollux rounds | CPU s | ms per round | avg JCT | "
            "restarts |\n|---|---|---|---|---|---|---|---|---|")
    body = [f"| {r['jobs']:,} ({r['elastic_jobs']:,}) | {r['nodes']}x4 | {r['load']:g} | {r['simulated_h']:,.0f} h | "
            f"{r['rounds']:,} | {r['cpu_s']:,.1f} | {r['ms_per_round']:.1f} | {r['avg_jct_h']:.2f} h | "
            f"{r['restarts']:,} |" for r in sorted(rows, key=lambda r: (r["rigid"], r["jobs"], r["nodes"]))]
    return "\n".join([head, *body, "", f"`python bench/elastic_scale.py --write` ({rows[-1]['machine']}; CPU seconds "
                      "of the replay, one process, workload building not counted)."])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, nargs="*", default=[])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--load", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rigid", type=float, default=0.0, help="share of rigid jobs (0: all elastic)")
    ap.add_argument("--progress", type=int, default=0, metavar="ROUNDS", help="print progress every ROUNDS rounds")
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    if a.progress:
        report_progress(a.progress)
    store = json.loads(STORE.read_text()) if STORE.exists() else {}
    for n in a.jobs:
        r = run(n, a.nodes, a.load, a.seed, a.rigid)
        print(json.dumps(r), flush=True)
        store[f"{n}/{a.nodes}/{a.load:g}/{a.seed}/{a.rigid:g}"] = r
        OUT.mkdir(parents=True, exist_ok=True)
        STORE.write_text(json.dumps(store, indent=2, sort_keys=True) + "\n")
    if a.write:
        if not store:
            raise SystemExit(f"no runs measured yet ({STORE}): run with --jobs N first")
        update_section(DOC, "elastic-scale", table(list(store.values())))
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
