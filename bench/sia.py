"""``--compat sia`` against the Sia simulator (siasosp23/artifacts, ``sia-simulator/``) on one of its
workloads: average and per-job JCT, restarts and CPU seconds side by side::

    python bench/sia.py [--write] [--workload PATH ...] [--artifact DIR] [--repeats R]
    python bench/sia.py --run-simulator --sia-python PY [--artifact DIR] [--workload PATH]
    python bench/sia.py --import-log LOG --cpu-s SECONDS [--workload PATH]
    python bench/sia.py --side-by-side --sia-python PY [--nice N] [--repeats R] [--workload PATH] [--write]

``--artifact``: a local fetch of the artifact's ``sia-simulator/`` folder (its per-GPU-type profiles
``traces/<app>/placements-<type>.csv``: the artifact has no licence, so fastblox ships neither
them nor the simulator; default ``../scratch/sia/sia-simulator``). ``--run-simulator`` runs the
simulator unmodified (``multi_simulator.py`` with ``run_experiment.sh``'s Sia arguments, its
default heterogeneous cluster) in ``PY`` (a Python with its requirements, rich, psutil and cvxpy with CBC:
``datasets/sia/README.md``) and
records its per-job JCTs and CPU seconds in ``datasets/sia/results/<workload>.json`` (our
measurement); ``--import-log`` records a run made by hand the same way (its ``--output`` log and
its user+system CPU seconds). The table: ours ``--repeats`` times per workload (the median); ``--write``
puts it into docs/fidelity.md (``bench:sia``).

``--side-by-side`` runs both in this one invocation on one workload (default philly/workload-1):
ours ``--repeats`` times (the median; each from cold caches: the profiles read again, the
compiled kernels loaded before), then the unmodified simulator as ``--run-simulator`` does,
under ``nice -n N`` (CPU seconds are what count), recorded the same way; it reports both CPU
seconds, the speed-up and both average JCTs (``--write``: into docs/fidelity.md,
``bench:sia-side``).
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
#: the simulator's CBC threads (``simulator_config.sia_solver_num_threads``)
SIM_THREADS = 8


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


def run_simulator(py: str, artifact: Path, workload: Path, nice: int = 0, how: str = "bench/sia.py --run-simulator"):
    """Run the simulator unmodified (``nice -n nice`` when > 0) and record it; returns (record path, CPU s)."""
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "run.log"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([*(["nice", "-n", str(nice)] if nice > 0 else []), py, "multi_simulator.py",
                        str(workload.resolve()),  # (it runs in the artifact's folder)
                        *SIM_ARGS, f"--output={log}"], cwd=artifact, check=True, stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return record(workload, jcts_from_log(log), cpu, how), cpu


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


def warm(workload: Path, artifact: Path) -> None:
    """Load the compiled kernels the replay uses (numba's cache) and the modules it imports before
    the clock starts: a replay of the workload's first 8 jobs (what it read and remembered is
    forgotten after, :func:`cold`)."""
    w = read_workload(workload).take(np.arange(8))
    cs.simulate_sia(w.extra["source_id"].tolist(), list(w.extra["model"]), w.extra["batch_size"], w.submit_s,
                    Cluster.parse(cs.SIA_CLUSTER), str(artifact / "traces"))


def cold() -> None:
    """Forget what an earlier replay in this process read or remembered (profiles, batch grids,
    per-placement limits, scratch), so that each replay's CPU seconds include them."""
    from fastblox import elastic

    for f in (elastic.profile, elastic._validation, elastic._batch_grid, cs.max_local_for, cs.memory_cap):
        f.cache_clear()
    cs._DP_TABLE[0] = np.empty(0, dtype=np.int64)  # (the dynamic programme's scratch: allocated again)


def run_ours(workload: Path, artifact: Path) -> tuple[dict, float, dict]:
    from fastblox import elastic

    warm(workload, artifact)
    cold()
    w = read_workload(workload)
    names = w.extra["source_id"].tolist()
    with _Clock(cs, "solve_allocation") as solve, _Clock(cs, "highs_allocation") as highs, \
            _Clock(elastic, "fit_perf_params") as fit, _Clock(cs, "load_profiles") as read, \
            _Clock(cs.SiaPolicy, "costs") as rows, _Clock(cs.SiaJob, "advance") as steps:
        t0 = time.process_time()
        out = cs.simulate_sia(names, list(w.extra["model"]), w.extra["batch_size"], w.submit_s,
                              Cluster.parse(cs.SIA_CLUSTER), str(artifact / "traces"))
        cpu = time.process_time() - t0
    # (the fits run inside the job steps: counted once, as fits)
    rest = cpu - solve.cpu - fit.cpu - read.cpu - rows.cpu - (steps.cpu - fit.cpu)
    out["split"] = (f"{workload.parent.name}/{workload.name}: {cpu:.2f} CPU-s = the allocations {solve.cpu:.2f} "
                    f"({solve.calls - highs.calls} solved exactly without HiGHS, {highs.calls} by HiGHS, "
                    f"{len(out['objectives']) - solve.calls} repeats of the last round's) + fits {fit.cpu:.2f} "
                    f"({fit.calls} computed) + the rest {cpu - solve.cpu - fit.cpu:.2f}: reading the profiles "
                    f"{read.cpu:.2f}, the goodput rows {rows.cpu:.2f}, the job steps and their batch choices "
                    f"{steps.cpu - fit.cpu:.2f}, the replay's loop, placements and restarts {rest:.2f}")
    return dict(zip(names, (out["finish_s"] - w.submit_s).tolist())), cpu, out


def recorded() -> list:
    """The workloads the simulator's results were recorded for (``datasets/sia/results``)."""
    out = []
    for f in sorted(RESULTS.glob("*.json")):
        out.append(ROOT.parent / "shared" / "traces" / "sched-paper-workloads" / json.loads(f.read_text())["workload"])
    return out


def run_median(workload: Path, artifact: Path, repeats: int) -> tuple[dict, float, dict, list]:
    """:func:`run_ours` ``repeats`` times: (JCTs, the median CPU seconds, the first run's outputs, every
    run's CPU seconds); the runs' JCTs must agree (the replay is deterministic)."""
    runs = [run_ours(workload, artifact) for _ in range(repeats)]
    assert all(r[0] == runs[0][0] for r in runs)
    cpus = [r[1] for r in runs]
    return runs[0][0], float(np.median(cpus)), runs[0][2], cpus


def row(workload: Path, artifact: Path, repeats: int) -> tuple[str, float, str]:
    ref = json.loads(result_path(workload).read_text())
    ours, cpu, out, _ = run_median(workload, artifact, repeats)
    a = np.array([ours[k] for k in ref["jcts"]])
    b = np.array(list(ref["jcts"].values()))
    diff = a.mean() / b.mean() - 1
    rel = np.abs(a / b - 1)
    return (f"| {workload.parent.name}/{workload.name} | {len(b)} | {b.mean():,.1f} | {a.mean():,.1f} | {diff:+.2%} | "
            f"{np.corrcoef(a, b)[0, 1]:.3f}, {np.median(rel):.1%} | {int(out['restarts'].sum())} | "
            f"{ref['cpu_s']:.0f} | {cpu:.2f} | {ref['cpu_s'] / cpu:.0f}x |"), diff, out["split"]


def table(workloads: list, artifact: Path, repeats: int) -> str:
    rows, diffs, splits = [], [], []
    for w in workloads:
        r, d, sp = row(w, artifact, repeats)
        rows.append(r)
        diffs.append(d)
        splits.append(sp)
    head = ["| workload | jobs | Sia simulator (CBC), average JCT (s) | fastblox --compat sia (s) | difference | "
            "per job: correlation, median abs. difference | restarts | CPU s, simulator | CPU s, fastblox | speed-up |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    spread = (f"Average JCT difference over the {len(diffs)} workloads: mean {np.mean(diffs):+.2%}, from "
              f"{min(diffs):+.2%} to {max(diffs):+.2%}. " if len(diffs) > 1 else "")
    return (f"Measured by `python bench/sia.py --write` ({time.strftime('%Y-%m-%d')}) on the simulator's default "
            f"cluster `{cs.SIA_CLUSTER}` with the artifact's per-type profiles (a local fetch). The simulator's "
            f"runs are recorded in `datasets/sia/results/` (its CPU seconds: user + system of the whole run, CBC's "
            f"threads included); ours: `time.process_time` of the replay from cold caches, reading the profiles "
            f"included (the compiled kernels loaded before), the median of {repeats} replays (the split: the first). "
            f"Ours is deterministic. The simulator draws no random numbers on this path and repeats its "
            f"results on one machine, but not always on another with the same packages (its CBC runs "
            f"{SIM_THREADS} threads to a relative gap of 1e-4; `datasets/sia/README.md`): the records are "
            f"runs on the machine of the CPU seconds. "
            + spread + "\n\n" + "\n".join(head + rows) + "\n\nOur CPU seconds by part: " + "; ".join(splits) + ".")


def side_by_side(py: str, artifact: Path, workload: Path, nice: int, repeats: int) -> str:
    """Ours ``repeats`` times, then the simulator, in this invocation; the report's text."""
    jcts, ours_cpu, first, cpus = run_median(workload, artifact, repeats)
    _, sim_cpu = run_simulator(py, artifact, workload, nice, "bench/sia.py --side-by-side (with ours, one invocation)")
    ref = json.loads(result_path(workload).read_text())
    a = np.array([jcts[k] for k in ref["jcts"]])
    b = np.array(list(ref["jcts"].values()))
    return (f"Measured side by side in one invocation, `python bench/sia.py --side-by-side --nice {nice} --repeats "
            f"{repeats}` ({time.strftime('%Y-%m-%d')}), on {workload.parent.name}/{workload.name}: the Sia simulator, "
            f"unmodified (under `nice -n {nice}`), **{sim_cpu:.1f} CPU-s** (user + system of its whole run), average "
            f"JCT {b.mean():,.1f} s; fastblox `--compat sia` **{ours_cpu:.2f} CPU-s** (the median of {repeats} "
            f"replays: {', '.join(f'{c:.2f}' for c in cpus)}; each from cold caches, the compiled kernels loaded "
            f"before), average JCT {a.mean():,.1f} s ({a.mean() / b.mean() - 1:+.2%}; per job: correlation "
            f"{np.corrcoef(a, b)[0, 1]:.3f}). **Speed-up {sim_cpu / ours_cpu:.0f}x.** Ours by part (the first replay): "
            f"{first['split']}.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", type=Path, action="append",
                    help="a Sia workload CSV (repeatable; default: every workload recorded in datasets/sia/results)")
    ap.add_argument("--artifact", type=Path, default=ARTIFACT, help="the artifact's sia-simulator folder")
    ap.add_argument("--run-simulator", action="store_true")
    ap.add_argument("--sia-python", default=sys.executable)
    ap.add_argument("--import-log", type=Path)
    ap.add_argument("--cpu-s", type=float)
    ap.add_argument("--side-by-side", action="store_true", help="the simulator and ours in this invocation")
    ap.add_argument("--nice", type=int, default=10, help="--side-by-side: the simulator's niceness")
    ap.add_argument("--repeats", type=int, default=3, help="our replays of each workload (the median)")
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    one = (a.workload or [WORKLOAD])[0]
    for w in a.workload or []:
        if not w.is_file():
            raise SystemExit(f"--workload {w}: no such file (a Sia workload CSV, e.g. {WORKLOAD})")
    if a.import_log:
        if a.cpu_s is None:
            raise SystemExit("--import-log needs --cpu-s (the run's user+system CPU seconds)")
        print(record(one, jcts_from_log(a.import_log), a.cpu_s, "a run by hand, CPU from /usr/bin/time"))
        return 0
    if not (a.artifact / "traces").is_dir():
        raise SystemExit(f"{a.artifact}: not the Sia artifact's sia-simulator folder (fetch siasosp23/artifacts)")
    if a.run_simulator:
        print(run_simulator(a.sia_python, a.artifact, one)[0])
        return 0
    if a.side_by_side:
        text = side_by_side(a.sia_python, a.artifact, one, a.nice, a.repeats)
        print(text)
        if a.write:
            from _util import update_section

            update_section(ROOT / "docs" / "fidelity.md", "sia-side", text)
        return 0
    text = table(a.workload or recorded(), a.artifact, a.repeats)
    print(text)
    if a.write:
        from _util import update_section

        update_section(ROOT / "docs" / "fidelity.md", "sia", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
