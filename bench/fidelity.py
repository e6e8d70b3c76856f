"""Fidelity: fastblox's policies against the authors' own simulators on the same workload.

The peer results in ``bench/peer/`` were produced by running Tiresias' simulator
(SymbioticLab/Tiresias ``simulator/run_sim.py``, unmodified, Python 2.7) and Gavel's
(stanford-futuredata/gavel ``scheduler/scripts/drivers/simulate_scheduler_with_trace.py``,
unmodified, ECOS, seed 0, 360 s rounds) on ``../shared/peer-traces/gavel_n2000_lam400_s0``
(see ``bench/peer/README.md``). This script replays the same workload with the matching fastblox
configuration, compares average and per-job JCTs, and writes the table of ``docs/fidelity.md``::

    python bench/fidelity.py [--write] [--tiresias-yarn PATH]

``--tiresias-yarn`` (Tiresias' ``simulator/yarn-gput1000.csv``) adds a Gittins run with the
service distribution Tiresias' simulator uses.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import fastblox  # noqa: E402
from fastblox.traces import read_trace  # noqa: E402

PEER = ROOT / "bench" / "peer"
SHARED = ROOT.parent / "shared" / "peer-traces"
TIRESIAS_CLUSTERS = {"n12g4": (12, 4), "n9g4": (9, 4)}  # nodes, GPUs per node
GAVEL_CLUSTERS = {"het36": "v100:36x1,p100:36x1,k80:36x1", "v100x48": "v100:48x1", "v100x36": "v100:36x1"}

# peer run (without the cluster) -> (fastblox policy, options, placement, note). Tiresias' dlas and
# count runs hand out GPUs from one cluster-wide counter (placement None: one node of all the GPUs);
# its fifo schedule places on nodes (``yarn``)
TIRESIAS_RUNS = {
    "fjf_count": ("fifo", None, None, "FIFO with backfilling on a pool of GPUs"),
    "fifo_yarn": ("fifo", {"backfill": False}, "yarn", "strict FIFO, no backfilling, Tiresias' yarn placement"),
    "shortest_count": ("srtf", None, None, "SRTF (oracle) on a pool of GPUs"),
    "dlas-gpu_yarn": ("tiresias", None, None, "2D-LAS, K=3, 3250/7200 GPU-s"),
    "dlas-gpu_K2-3600_yarn": ("tiresias", {"thresholds": "3600"}, None, "2D-LAS, K=2, 3600 GPU-s"),
    "dlas-gpu-2_yarn": ("tiresias", {"promote": 2}, None, "2D-LAS, PROMOTE knob 2"),
    "dlas-gpu-8_yarn": ("tiresias", {"promote": 8}, None, "2D-LAS, PROMOTE knob 8"),
    "dlas-gpu-gittins_yarn": ("tiresias-gittins", None, None, "2D-Gittins, this workload's distribution"),
}


def tiresias_config(cl_name: str, placement: str | None) -> dict:
    """``simulate`` keywords of the fastblox cluster and placement matching a Tiresias run."""
    nodes, per_node = TIRESIAS_CLUSTERS[cl_name]
    if placement is None:
        return {"cluster": f"1x{nodes * per_node}"}
    return {"cluster": f"{nodes}x{per_node}", "placement": placement}
GAVEL_RUNS = {
    "het36_fifo_perf": ("gavel-fifo", "FIFO, fastest free type"),
    "het36_max_min_fairness_perf": ("gavel", "max-min fairness, heterogeneity-aware"),
    "het36_max_min_fairness": ("gavel-las-agnostic", "max-min fairness, agnostic"),
    "het36_finish_time_fairness_perf": ("gavel-ftf", "finish-time fairness, aware"),
    "het36_finish_time_fairness": ("gavel-ftf-agnostic", "finish-time fairness, agnostic"),
    "v100x48_max_min_fairness": ("gavel", "max-min fairness, 48 V100"),
    "v100x36_max_min_fairness": ("gavel", "max-min fairness, 36 V100"),
    "v100x48_fifo": ("gavel-fifo", "FIFO, 48 V100"),
}


def peer_summary() -> dict:
    with open(PEER / "summary.csv") as f:
        return {r["run"]: r for r in csv.DictReader(f)}


def peer_finish(run: str) -> dict:
    with gzip.open(PEER / f"{run}.csv.gz", "rt") as f:
        return {int(r["job_id"]): float(r["finish_s"]) for r in csv.DictReader(f) if r["finish_s"] != ""}


def compare(res, run: str, peer_avg: float) -> dict:
    theirs = peer_finish(run)
    j = res.jobs
    ids = j["job_id"].to_numpy()
    fin = j["finish_s"].to_numpy()
    sub = j["submit_s"].to_numpy()
    both = np.array([i in theirs for i in ids])
    ours_jct = fin[both] - sub[both]
    their_jct = np.array([theirs[i] for i in ids[both]]) - sub[both]
    d = np.abs(ours_jct - their_jct)
    return {
        "jobs_compared": int(both.sum()),
        "ours_avg": float(ours_jct.mean()), "theirs_avg": float(their_jct.mean()),
        "peer_reported_avg": float(peer_avg),
        "diff_pct": 100.0 * (ours_jct.mean() / their_jct.mean() - 1.0),
        "same_1s": float((d <= 1.0).mean()), "median_abs_s": float(np.median(d)),
    }


def run_all(yarn: str | None = None) -> list[dict]:
    summ = peer_summary()
    out = []
    tw = read_trace(SHARED / "gavel_n2000_lam400_s0.tiresias.csv")
    for cl_name in TIRESIAS_CLUSTERS:
        runs = dict(TIRESIAS_RUNS)
        if yarn:
            runs["dlas-gpu-gittins_yarn (YARN dist.)"] = ("tiresias-gittins", {"distribution": yarn}, None,
                                                         "2D-Gittins, Tiresias' YARN distribution")
        for short, (pol, opts, placement, note) in runs.items():
            run = f"n2000_{cl_name}_{short.split(' ')[0]}"
            t0 = time.perf_counter()
            res = fastblox.simulate(tw, policy=pol, policy_opts=opts, **tiresias_config(cl_name, placement))
            wall = time.perf_counter() - t0
            out.append({"simulator": "Tiresias", "run": f"{cl_name} {short}", "policy": pol, "note": note,
                        "ours_s": wall, "theirs_cpu_s": float(summ[run]["cpu_s"]),
                        **compare(res, run, float(summ[run]["avg_jct_s"]))})
    gw = read_trace(SHARED / "gavel_n2000_lam400_s0.trace", steps_per_s="builtin")
    for short, (pol, note) in GAVEL_RUNS.items():
        run = f"n2000_{short}"
        cl = GAVEL_CLUSTERS[short.split("_")[0]]
        t0 = time.perf_counter()
        res = fastblox.simulate(gw, cluster=cl, policy=pol, throughput="gavel", placement_effects=False)
        wall = time.perf_counter() - t0
        out.append({"simulator": "Gavel", "run": short, "policy": pol, "note": note, "ours_s": wall,
                    "theirs_cpu_s": float(summ[run]["cpu_s"]), **compare(res, run, float(summ[run]["avg_jct_s"]))})
    return out


def table(rows: list[dict]) -> str:
    lines = [
        "| peer run | fastblox policy | jobs | peer avg JCT (s) | fastblox avg JCT (s) | difference | jobs within 1 s | median per-job difference (s) | peer CPU (s) | fastblox (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['simulator']} {r['run']} | `{r['policy']}` ({r['note']}) | {r['jobs_compared']} | {r['theirs_avg']:,.1f} | "
            f"{r['ours_avg']:,.1f} | {r['diff_pct']:+.2f}% | {100 * r['same_1s']:.0f}% | {r['median_abs_s']:,.1f} | "
            f"{r['theirs_cpu_s']:.1f} | {r['ours_s']:.2f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the table into docs/fidelity.md")
    ap.add_argument("--tiresias-yarn", default=None, help="Tiresias' yarn-gput1000.csv (one header line, then GPU-seconds)")
    a = ap.parse_args(argv)
    if not SHARED.exists():
        print(f"fidelity: {SHARED} is missing (../shared must be beside the repository)", file=sys.stderr)
        return 2
    yarn = None
    if a.tiresias_yarn:
        yarn = str(ROOT / "bench" / "out" / "yarn-gput1000.txt")
        Path(yarn).parent.mkdir(parents=True, exist_ok=True)
        Path(yarn).write_text("".join(Path(a.tiresias_yarn).read_text().splitlines(keepends=True)[1:]))
    fastblox.simulate(fastblox.gavel_like_workload(20), cluster="4x4")  # compile outside the timings
    rows = run_all(yarn)
    text = table(rows)
    print(text)
    if a.write:
        from _util import update_section

        stamp = f"Measured by `python bench/fidelity.py --write{' --tiresias-yarn ...' if yarn else ''}` ({time.strftime('%Y-%m-%d')})."
        update_section(ROOT / "docs" / "fidelity.md", "fidelity", stamp + "\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
