"""``--compat sia`` against the Sia simulator (siasosp23/artifacts, ``sia-simulator/``) on one of its
workloads: average and per-job JCT, restarts and CPU seconds side by side::

    python bench/sia.py [--write] [--workload PATH ...] [--artifact DIR]
    python bench/sia.py --run-simulator --sia-python PY [--artifact DIR] [--workload PATH]
    python bench/sia.py --import-log LOG --cpu-s SECONDS [--workload PATH]

``--artifact``: a local fetch of the artifact's ``sia-simulator/`` folder (its per-GPU-type profiles
``traces/<app>/placements-<type>.csv``: the artifact has no licence, so fastblox ships neither
them nor the simulator; default ``../scratch/sia/sia-simulator``). ``--run-simulator`` runs the
simulator unmodified (``multi_simulator.py`` with ``run_experiment.sh``'s Sia arguments, its
default heterogeneous cluster) in ``PY`` (a Python with its requirements and cvxpy with CBC) and
records its per-job JCTs and CPU seconds in ``datasets/sia/results/<workload>.json`` (our
measurement); ``--import-log`` records a run made by hand the same way (its ``--output`` log and
its user+system CPU seconds). ``--write`` puts the table into docs/fidelity.md (``bench:sia``).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from fastblox import compat_sia as cs  # noqa: E402
from fastblox.cluster import Cluster  # noqa: E402
from fastblox.compat_pollux import read_workload  # noqa: E402

WORKLOADS = ROOT.parent / "shared" / "traces" / "sched-paper-workloads" / "sia-sosp23" / "workloads"
WORKLOAD = WORKLOADS / "philly" / "workload-1.csv"
ARTIFACT = ROOT.parent / "scratch" / "sia" / "sia-simulator"
RESULTS = ROOT / "datasets" / "sia" / "results"
#: run_experiment.sh's Sia invocation (p = -0.5, lambda_n = 1.1, 60 s interval)
SIM_ARGS = ["--policy=sia", "--policy_p_val=-0.5", "--mip_lambda_a=0.01", "--mip_lambda_n=1.1", "--interval=60",
            "--project_throughputs", "--share_max_replicas"]


def result_path(workload: Path) -> Path:
    return RESULTS / f"{workload.parent.name}-{workload.stem}.json"


def jcts_from_log(log: Path) -> dict:
    """Job name -> JCT of the simulator's ``--output`` log (JSON lines; the last holds every job)."""
    last = json.loads(log.read_text().strip().splitlines()[-1])
    return {j["name"]: j["completion_time"] - j["submission_time"] for j in last["submitted_jobs"]}


def record(workload: Path, jcts: dict, cpu_s: float, how: str) -> Path:
    out = result_path(workload)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = {"workload": f"sia-sosp23/workloads/{workload.parent.name}/{workload.name}",
            "simulator": "siasosp23/artifacts sia-simulator (unmodified), multi_simulator.py " + " ".join(SIM_ARGS),
            "how": how, "cpu_s": round(cpu_s, 1), "avg_jct_s": float(np.mean(list(jcts.values()))), "jcts": jcts}
    out.write_text(json.dumps(data, indent=1) + "\n")
    return out


def run_simulator(py: str, artifact: Path, workload: Path) -> Path:
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "run.log"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([py, "multi_simulator.py", str(workload), *SIM_ARGS, f"--output={log}"], cwd=artifact,
                       check=True, stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return record(workload, jcts_from_log(log), cpu, "bench/sia.py --run-simulator")


class _Clock:
    """CPU seconds and calls of a module function (wrapped while a replay runs)."""

    def __init__(self, module, name: str):
        self.module, self.name, self.fn = module, name, getattr(module, name)
        self.cpu, self.calls = 0.0, 0

    def __enter__(self):
        def timed(*a, **k):
            t = time.process_time()
            try:
                return self.fn(*a, **k)
            finally:
                self.cpu += time.process_time() - t
                self.calls += 1

        setattr(self.module, self.name, timed)
        return self

    def __exit__(self, *exc):
        setattr(self.module, self.name, self.fn)


def warm() -> None:
    """Load the compiled kernels the replay uses (numba's cache) before the clock starts."""
    from fastblox import elastic

    elastic.fit_perf_params([1.0, 1.0], [1.0, 2.0], [8.0, 16.0], [0.1, 0.2], [0.2, 0.3], kernel=True)
    cs.exact_allocation(np.array([[0.5]], dtype=np.float32), np.array([0]), np.array([1]), np.array([1]),
                          np.array([-1]))


def run_ours(workload: Path, artifact: Path) -> tuple[dict, float, dict]:
    from fastblox import elastic

    warm()
    w = read_workload(workload)
    names = w.extra["source_id"].tolist()
    import scipy.optimize

    with _Clock(cs, "solve_allocation") as solve, _Clock(scipy.optimize, "milp") as milp, \
            _Clock(elastic, "fit_perf_params") as fit:
        t0 = time.process_time()
        out = cs.simulate_sia(names, list(w.extra["model"]), w.extra["batch_size"], w.submit_s,
                              Cluster.parse(cs.SIA_CLUSTER), str(artifact / "traces"))
        cpu = time.process_time() - t0
    out["split"] = (f"{workload.parent.name}/{workload.name}: {cpu:.1f} CPU-s = HiGHS {milp.cpu:.1f} "
                    f"({milp.calls} MILPs) + the exact search and the rest of the allocations "
                    f"{solve.cpu - milp.cpu:.1f} "
                    f"({solve.calls - milp.calls} more answered without HiGHS, {len(out['objectives']) - solve.calls} "
                    f"repeats of the last round's) + fits {fit.cpu:.1f} "
                    f"({fit.calls} computed) + the rest {cpu - solve.cpu - fit.cpu:.1f}")
    return dict(zip(names, (out["finish_s"] - w.submit_s).tolist())), cpu, out


def recorded() -> list:
    """The workloads the simulator's results were recorded for (``datasets/sia/results``)."""
    out = []
    for f in sorted(RESULTS.glob("*.json")):
        out.append(ROOT.parent / "shared" / "traces" / "sched-paper-workloads" / json.loads(f.read_text())["workload"])
    return out


def row(workload: Path, artifact: Path) -> tuple[str, float, str]:
    ref = json.loads(result_path(workload).read_text())
    ours, cpu, out = run_ours(workload, artifact)
    a = np.array([ours[k] for k in ref["jcts"]])
    b = np.array(list(ref["jcts"].values()))
    diff = a.mean() / b.mean() - 1
    rel = np.abs(a / b - 1)
    return (f"| {workload.parent.name}/{workload.name} | {len(b)} | {b.mean():,.1f} | {a.mean():,.1f} | {diff:+.2%} | "
            f"{np.corrcoef(a, b)[0, 1]:.3f}, {np.median(rel):.1%} | {int(out['restarts'].sum())} | "
            f"{ref['cpu_s']:.0f} | {cpu:.1f} | {ref['cpu_s'] / cpu:.0f}x |"), diff, out["split"]


def table(workloads: list, artifact: Path) -> str:
    rows, diffs, splits = [], [], []
    for w in workloads:
        r, d, sp = row(w, artifact)
        rows.append(r)
        diffs.append(d)
        splits.append(sp)
    head = ["| workload | jobs | Sia simulator (CBC), average JCT (s) | fastblox --compat sia (HiGHS) (s) | difference | "
            "per job: correlation, median abs. difference | restarts | CPU s, simulator | CPU s, fastblox | speed-up |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    spread = (f"Average JCT difference over the {len(diffs)} workloads: mean {np.mean(diffs):+.2%}, from "
              f"{min(diffs):+.2%} to {max(diffs):+.2%}. " if len(diffs) > 1 else "")
    return (f"Measured by `python bench/sia.py --write` ({time.strftime('%Y-%m-%d')}) on the simulator's default "
            f"cluster `{cs.SIA_CLUSTER}` with the artifact's per-type profiles (a local fetch). The simulator's "
            f"runs are recorded in `datasets/sia/results/` (its CPU seconds: user + system of the whole run, CBC's "
            f"threads included); ours: `time.process_time` of the replay, reading the profiles included "
            f"(the compiled kernels loaded before). Both are "
            f"deterministic in their code (neither draws random numbers on this path), so runs differ by workload, not seed. "
            + spread + "\n\n" + "\n".join(head + rows) + "\n\nOur CPU seconds by part: " + "; ".join(splits) + ".")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", type=Path, action="append",
                    help="a Sia workload CSV (repeatable; default: every workload recorded in datasets/sia/results)")
    ap.add_argument("--artifact", type=Path, default=ARTIFACT, help="the artifact's sia-simulator folder")
    ap.add_argument("--run-simulator", action="store_true")
    ap.add_argument("--sia-python", default=sys.executable)
    ap.add_argument("--import-log", type=Path)
    ap.add_argument("--cpu-s", type=float)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    one = (a.workload or [WORKLOAD])[0]
    if a.import_log:
        if a.cpu_s is None:
            raise SystemExit("--import-log needs --cpu-s (the run's user+system CPU seconds)")
        print(record(one, jcts_from_log(a.import_log), a.cpu_s, "a run by hand, CPU from /usr/bin/time"))
        return 0
    if not (a.artifact / "traces").is_dir():
        raise SystemExit(f"{a.artifact}: not the Sia artifact's sia-simulator folder (fetch siasosp23/artifacts)")
    if a.run_simulator:
        print(run_simulator(a.sia_python, a.artifact, one))
        return 0
    text = table(a.workload or recorded(), a.artifact)
    print(text)
    if a.write:
        from _util import update_section

        update_section(ROOT / "docs" / "fidelity.md", "sia", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
