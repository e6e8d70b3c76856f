"""``--compat pollux`` and the Pollux simulator side by side in one run: the simulator (petuum/adaptdl
``osdi21-artifact``, ``simulator/simulator.py --policy pollux``, run unmodified) for a bounded CPU
budget in a subprocess, then this replay, whole and up to the simulated time the simulator reached::

    python bench/pollux_side.py --simulator SIM --sim-python PY [--budget-cpu-s 1800] [--wall-s 3600] [--write]
    python bench/pollux_side.py --from-record bench/out/pollux_side_simulator.json [--write]

``PY``: a Python where the simulator imports (numpy, scipy, pandas, autograd, pymoo 0.4.2; NumPy >= 1.24
lacks the ``np.int``/``np.float`` aliases its code uses: a one-line shim sets them back to the builtins
and runs ``simulator.py`` as ``__main__``). Its BLAS and OpenMP are held to one thread, as this
replay's are. The simulator prints a line per 60 s round; at each, its CPU (user + system, all its
threads, from ``/proc/PID/stat``) is read; it is stopped when that passes ``--budget-cpu-s`` or the
wall clock passes ``--wall-s``. Reported (``--write``: into docs/fidelity.md, ``bench:pollux-side``):

* **the same span, measured**: the simulator's CPU to its last round before the cut against this
  replay's CPU over the same simulated time (``simulate_pollux(until_s=...)``), with the jobs each
  finished by then;
* **a lower bound**: the simulator's CPU spent before the cut against this whole replay's CPU
  (the simulator had not finished, so its whole run costs more);
* **an estimate** of the simulator's whole run: its CPU per round so far times the rounds of the
  whole replay, labelled as such (later rounds hold more jobs than the first ones on average, so
  this is likelier low than high).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from fastblox import compat_pollux as cp  # noqa: E402
from fastblox import elastic  # noqa: E402
from pollux import WORKLOAD  # noqa: E402

SHIM = ("import runpy, sys, numpy as np\n"
        "for k, v in (('int', int), ('float', float), ('bool', bool)):\n"
        "    hasattr(np, k) or setattr(np, k, v)\n"
        "sys.argv = sys.argv[1:]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n")
RECORD = ROOT / "bench" / "out" / "pollux_side_simulator.json"
ONE_THREAD = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_simulator(sim: Path, python: str, workload: Path, budget_cpu_s: float, wall_s: float) -> dict:
    """Run the simulator's Pollux policy on ``workload`` until its CPU passes ``budget_cpu_s`` (or the
    wall clock ``wall_s``, or it finishes). Returns its rounds: simulated time, its CPU then, jobs done."""
    cmd = [python, "-u", "-c", SHIM, str(sim / "simulator.py"), "--policy", "pollux", str(workload)]
    p = subprocess.Popen(cmd, cwd=sim, env={**os.environ, **ONE_THREAD}, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    rounds, now, t0, cut = [], None, time.monotonic(), False
    try:
        expect_done = False
        for line in p.stdout:
            if line.startswith("---------------- SIMULATOR TIME:"):
                now = float(line.split(":")[1].split()[0])
            elif line.startswith("Completed jobs:"):
                expect_done = True
            elif expect_done:
                expect_done = False
                cpu = proc_cpu_s(p.pid)
                rounds.append((now, cpu, len(ast.literal_eval(line.strip()))))
                if cpu >= budget_cpu_s or time.monotonic() - t0 >= wall_s:
                    cut = True
                    break
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        p.wait()
    finished = not cut and p.returncode == 0
    if not rounds:
        raise SystemExit("the simulator printed no round (is --sim-python a Python where it imports?)")
    return {"rounds": rounds, "finished": finished, "wall_s": time.monotonic() - t0, "wall_limit_s": wall_s,
            "budget_cpu_s": budget_cpu_s, "date": time.strftime("%Y-%m-%d")}


def ours(w, until_s=None) -> tuple[float, dict]:
    apps, _, _ = cp.job_table(w)
    elastic.fit_perf_params([1.0, 1.0], [1.0, 2.0], [8.0, 16.0], [0.1, 0.2], [0.2, 0.3], kernel=True)
    cp.simulate_pollux(apps[:2], w.submit_s[:2])  # (and the search's)
    t0 = time.process_time()
    out = cp.simulate_pollux(apps, w.submit_s, until_s=until_s)
    return time.process_time() - t0, out


def report(sim: dict, budget: float, w, recorded: str | None = None) -> str:
    """The table: ratios over the simulator's rounds after its first (its start, imports and reading of
    its traces, and this replay's loading are left out of both)."""
    rounds = sim["rounds"]
    if len(rounds) < 2:
        raise SystemExit("the simulator ran one round only: raise --budget-cpu-s")
    (t_first, cpu_first, _), (t_cut, cpu_cut, done_cut) = rounds[0], rounds[-1]
    sim_cpu = cpu_cut - cpu_first
    cpu_full, full = ours(w)
    cpu_first_ours, _ = ours(w, until_s=t_first)
    cpu_span, span = ours(w, until_s=t_cut)
    cpu_span -= cpu_first_ours
    n_rounds, k = len(full["objectives"]), len(rounds) - 1
    per_round = sim_cpu / k
    done_span, n = int((span["finish_s"] >= 0).sum()), len(w.submit_s)
    end = full["end_s"]
    rows = [
        "| | the simulator (NSGA-II, its `simulator.py`) | fastblox `--compat pollux` | ratio |",
        "|---|---|---|---|",
        f"| same span: its rounds {t_first + 60:,.0f} – {t_cut:,.0f} s of simulated time ({k} rounds; jobs finished "
        f"by then: simulator {done_cut}, fastblox {done_span} of {n}) | {sim_cpu:,.1f} CPU-s | {cpu_span:.2f} CPU-s | "
        f"**{sim_cpu / cpu_span:,.0f}x** (measured) |",
        f"| whole workload: simulated 0 – {end:,.0f} s ({n_rounds} rounds) | > {sim_cpu:,.1f} CPU-s (stopped at "
        f"{100 * t_cut / end:.1f} % of the simulated time, {100 * done_cut / n:.1f} % of the jobs done) | "
        f"{cpu_full:.2f} CPU-s | **> {sim_cpu / cpu_full:,.0f}x** (lower bound) |",
        f"| whole workload, estimated: its CPU per round so far ({per_round:.2f} s) x {n_rounds} rounds | "
        f"≈ {per_round * n_rounds:,.0f} CPU-s (estimate) | {cpu_full:.2f} CPU-s | "
        f"≈ {per_round * n_rounds / cpu_full:,.0f}x (estimate) |",
    ]
    end_why = ("it finished" if sim["finished"] else
               f"stopped when its CPU passed {budget:g} s or the wall clock {sim['wall_limit_s']:g} s")
    stamp = (f"Measured by `python bench/pollux_side.py --write --budget-cpu-s {budget:g} --wall-s "
             f"{sim['wall_limit_s']:g}` ({sim['date']}) on {WORKLOAD.name}: the simulator ran unmodified in a "
             f"subprocess (one BLAS thread; {end_why}; {sim['wall_s'] / 60:.0f} min of wall time on a shared machine)")
    stamp += (f"; its rounds were saved, and this replay re-measured against them by `--from-record {recorded}` "
              f"({time.strftime('%Y-%m-%d')})" if recorded else ", then this replay ran in the bench's process")
    stamp += ", whole and up to the simulator's first and last rounds."
    return stamp + "\n\n" + "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulator", type=Path, help="the Pollux simulator's folder (simulator/)")
    ap.add_argument("--sim-python", default=sys.executable, help="a Python where the simulator imports")
    ap.add_argument("--from-record", type=Path, help=f"re-measure this replay against a simulator run saved before "
                    f"(each run saves its simulator's rounds to {RECORD.relative_to(ROOT)})")
    ap.add_argument("--budget-cpu-s", type=float, default=1800.0, help="stop the simulator past this CPU (s)")
    ap.add_argument("--wall-s", type=float, default=3600.0, help="or past this wall time (s)")
    ap.add_argument("--write", action="store_true", help="write the table into docs/fidelity.md")
    a = ap.parse_args(argv)
    w = cp.read_workload(WORKLOAD)
    if a.from_record:
        sim = json.loads(a.from_record.read_text())
    else:
        if not (a.simulator / "simulator.py").exists():
            raise SystemExit(f"--simulator {a.simulator}: no simulator.py there")
        sim = run_simulator(a.simulator.resolve(), a.sim_python, WORKLOAD, a.budget_cpu_s, a.wall_s)
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text(json.dumps(sim))
    text = report(sim, sim["budget_cpu_s"], w, a.from_record and a.from_record.name)
    print(text)
    if a.write:
        from _util import update_section

        update_section(ROOT / "docs" / "fidelity.md", "pollux-side", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
