"""``--compat pollux`` on the Pollux artifact's workload-6: average JCT against the numbers the
simulator's README publishes, and CPU seconds per policy::

    python bench/pollux.py [--write] [--all] [--workload PATH]
    python bench/pollux.py --dump bench/out/pollux_instances.json [--every 40]

``--write`` puts the table into docs/fidelity.md (``bench:pollux``), with the comparison of the
allocation search against Pollux's NSGA-II when ``bench/out/pollux_nsga2.json`` exists (made by
``bench/pollux_vs_nsga2.py`` from the instances ``--dump`` saves).
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

from fastblox import compat_pollux as cp  # noqa: E402
from fastblox import elastic  # noqa: E402

WORKLOAD = ROOT.parent / "shared" / "traces" / "sched-paper-workloads" / "pollux-osdi21" / "simulator" / "workloads" / "workload-6.csv"
#: simulator/README.md of adaptdl osdi21-artifact (Average JCT, workload-6); Pollux's is one run of
#: its genetic algorithm (the README and results-jobload/pollux-1.0/summary.json: 2446.13125 s, 0.680 h)
PUBLISHED = {"tiresias": 3469.69375, "optimus": 5301.875, "pollux": 2446.13125}
NSGA2 = ROOT / "bench" / "out" / "pollux_nsga2.json"


def run(policy: str, w) -> tuple[float, float, dict]:
    apps, bs, gpus = cp.job_table(w)
    # (the compiled kernels loaded before the clock starts)
    elastic.fit_perf_params([1.0, 1.0], [1.0, 2.0], [8.0, 16.0], [0.1, 0.2], [0.2, 0.3], kernel=True)
    cp.simulate_pollux(apps[:2], w.submit_s[:2])  # (and the search's)
    t0 = time.process_time()
    if policy == "pollux":
        out = cp.simulate_pollux(apps, w.submit_s)
    else:
        out = cp.simulate(apps, bs, gpus, w.submit_s, policy)
    cpu = time.process_time() - t0
    return float((out["finish_s"] - w.submit_s).mean()), cpu, out


def per_job(pol: str, w, out) -> str:
    """How this replay's per-job JCTs compare with the artifact's own run of the same workload."""
    path = ROOT / "datasets" / "pollux" / "results" / f"{pol}-1.0.json"
    ref = json.loads(path.read_text())["jcts"].get(w.name)
    if ref is None:
        return ""
    jct = dict(zip(w.extra["source_id"].tolist(), (out["finish_s"] - w.submit_s).tolist()))
    a, b = np.array([jct[k] for k in ref]), np.array(list(ref.values()))
    same = int((a == b).sum())
    return f"{same} of {len(b)} equal" if same == len(b) else f"{same} of {len(b)} equal; correlation {np.corrcoef(a, b)[0, 1]:.4f}"


def table(w) -> str:
    pub = PUBLISHED
    rows = ["| policy | average JCT (s) | published (s) | difference | per job, against the artifact's run | restarts | CPU s |",
            "|---|---|---|---|---|---|---|"]
    mine = None
    for pol in ("tiresias", "optimus", "pollux"):
        jct, cpu, out = run(pol, w)
        if pol == "pollux":
            mine = (cpu, len(out["objectives"]))
        ref = pub[pol]
        diff = "" if ref is None else f"{100 * (jct / ref - 1):+.2f} %"
        rows.append(f"| {pol} | {jct:,.2f} | {'' if ref is None else f'{ref:,.2f}'} | {diff} | {per_job(pol, w, out)} | "
                    f"{int(out['restarts'].sum()):,} | {cpu:.1f} |")
    text = "\n".join(rows)
    if NSGA2.exists():
        text += "\n\n" + nsga2_table(json.loads(NSGA2.read_text()), *mine)
    return text


def all_workloads_table(folder: Path) -> str:
    """Pollux on each of the artifact's 8 workloads against the averages of its own run."""
    ref = json.loads((ROOT / "datasets" / "pollux" / "results" / "pollux-1.0.json").read_text())["avgs"]
    rows = ["| workload | pollux average JCT (s) | the artifact's run (s) | difference | CPU s |", "|---|---|---|---|---|"]
    for name in sorted(ref):
        w = cp.read_workload(folder / f"{name}.csv")
        jct, cpu, _ = run("pollux", w)
        rows.append(f"| {name} | {jct:,.1f} | {ref[name]:,.1f} | {100 * (jct / ref[name] - 1):+.2f} % | {cpu:.1f} |")
    return "\n".join(rows)


def nsga2_table(res: dict, cpu_s: float, rounds: int) -> str:
    """The NSGA-II comparison; ``cpu_s``, ``rounds``: this replay's CPU seconds and allocation rounds."""
    r = res["rounds"]
    mine = np.array([x["mine"] for x in r])
    theirs = np.array([x["nsga2"] for x in r])
    return (f"Allocation search against Pollux's own NSGA-II (`pollux.py`, population 100, 100 generations, run "
            f"unmodified) on {len(r)} rounds of this replay (`bench/pollux_vs_nsga2.py`): Pollux's objective (power "
            f"mean, p = -1, of the scaled speedups) of this search's allocation is >= NSGA-II's in "
            f"{int((mine >= theirs * (1 - 1e-9)).sum())} of {len(r)} rounds; ratio mine / NSGA-II: min "
            f"{(mine / theirs).min():.4f}, median {np.median(mine / theirs):.4f}, max {(mine / theirs).max():.4f}; "
            f"CPU per round {res['cpu_mine_s']:.3f} s against {res['cpu_nsga2_s']:.1f} s. (Each NSGA-II run starts "
            f"from the round's current allocation only; in Pollux's own replay it also starts from its previous "
            f"round's population.) Pollux's search alone over the {rounds:,} rounds of this replay would take "
            f"{res['cpu_nsga2_s'] * rounds:,.0f} CPU-s (its CPU per round measured there, times the rounds: a lower "
            f"bound of the simulator's CPU, which also fits the jobs' models and steps them), "
            f"{res['cpu_nsga2_s'] * rounds / cpu_s:,.0f}x this whole replay's {cpu_s:.1f} CPU-s.")


def dump(w, path: Path, every: int) -> None:
    """Save every ``every``-th allocation problem of the Pollux replay (inputs and this search's answer)."""
    apps, _, _ = cp.job_table(w)
    saved, calls = [], [0]
    orig = cp.PolluxPolicy.optimize

    def spy(self, active, prev, now):
        t0 = time.process_time()
        out = orig(self, active, prev, now)
        cpu = time.process_time() - t0
        calls[0] += 1
        if calls[0] % every == 0:
            jobs = []
            for j in active:
                job = self.jobs[j]
                p = job.prof
                jobs.append(dict(key=int(j), app=job.app, init_bs=p.init_batch_size, max_bs=p.max_batch_size,
                                 min_local=p.min_local_bsz, max_local=p.max_local_bsz,
                                 pp=None if job.pp is None else [float(x) for x in job.pp],
                                 grad=None if job.grad is None else [float(x) for x in job.grad],
                                 max_replicas=int(job.max_replicas(self.nodes * self.per_node)),
                                 restarts=int(job.restarts or 0), age=float(now - job.submit),
                                 attained=float(job.attained_gpu), submit=float(job.submit),
                                 base=[int(x) for x in prev.get(j, [])], mine=[int(x) for x in out[j]]))
            saved.append(dict(now=now, cpu_s=cpu, nodes=self.nodes, per_node=self.per_node, jobs=jobs))
        return out

    cp.PolluxPolicy.optimize = spy
    try:
        cp.simulate_pollux(apps, w.submit_s)
    finally:
        cp.PolluxPolicy.optimize = orig
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(saved))
    print(f"wrote {len(saved)} rounds to {path}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", type=Path, default=WORKLOAD)
    ap.add_argument("--write", action="store_true", help="write the table into docs/fidelity.md")
    ap.add_argument("--dump", type=Path, help="save allocation problems of the Pollux replay to this JSON file")
    ap.add_argument("--every", type=int, default=40)
    ap.add_argument("--all", action="store_true", help="also Pollux on the workload's 7 siblings (about 20 CPU-s each)")
    a = ap.parse_args(argv)
    w = cp.read_workload(a.workload)
    if a.dump:
        dump(w, a.dump, a.every)
        return 0
    text = table(w)
    if a.all:
        text += "\n\nThe Pollux policy on all 8 workloads of the artifact (`--all`):\n\n" + all_workloads_table(a.workload.parent)
    print(text)
    if a.write:
        from _util import update_section

        stamp = (f"Measured by `python bench/pollux.py --write{' --all' if a.all else ''}` ({time.strftime('%Y-%m-%d')}) on {a.workload.name} "
                 f"(160 jobs, 16 x 4 GPUs, 60 s intervals, restarts {elastic.RESTART_S:g} s); CPU seconds of each "
                 "replay alone, one after the other in one process, after reading the workload (which loads the "
                 "profiles) and loading the compiled kernels.")
        update_section(ROOT / "docs" / "fidelity.md", "pollux", stamp + "\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
