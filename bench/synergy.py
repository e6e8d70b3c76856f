"""``--compat synergy`` against Synergy's own simulator (msr-fiddle/synergy, ``simulator/``), job by
job, with the CPU seconds of both measured side by side in one run::

    python bench/synergy.py --synergy-dir PATH/synergy/simulator --synergy-python PY [--record] [--write]
    python bench/synergy.py            # ours only, against the shipped runs of the simulator

For each case of ``datasets/synergy/results/cases.csv`` (a trace and a cluster) and each of the 12
schedulers, the simulator runs unmodified in a subprocess of ``PY`` (its dependencies: numpy,
pandas, matplotlib, grpcio, cvxpy, psutil; its ``deployment/`` stubs built by its Makefile), driven
the way its ``runner.benchmark()`` builds a Runner; its CPU seconds are the process time from
building the Runner to the end of the replay. Ours: the process time of ``compat_synergy.simulate``
(kernel loaded before). ``--record`` rewrites the shipped runs (``peer_runs.csv.gz``,
``peer_cpu.csv``); ``--write`` puts the tables into docs/fidelity.md (``bench:synergy``).
For profiles other than 3 CPUs per GPU the simulator reads a copy of its folder whose ``models``
is ``models-R`` (its ae-readme.md: "rename the model directory").
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "datasets" / "synergy"
MODES = {"fair": "+fair", "greedy": "", "tune": "+tune"}  # the simulator's flags -> its scheduler suffix


# ------------------------------------------------------------------ the simulator's side (runs under PY)
def peer_run(simdir, trace, servers, per, cpus, static, profile, sched, mode) -> str:
    """Replay ``trace`` in Synergy's simulator; CSV lines ``job_id,jct_s`` then ``cpu_s,X``."""
    with tempfile.TemporaryDirectory() as tmp:
        if int(profile) != 3:  # its models-R profiles, as its ae-readme.md says: rename the directory
            for e in os.listdir(simdir):
                os.symlink(os.path.join(simdir, e), os.path.join(tmp, "models" if e == f"models-{profile}" else
                                                                 ("models-3" if e == "models" else e)))
            simdir = tmp
        cfg = os.path.join(tempfile.mkdtemp(), "cluster.ini")
        with open(cfg, "w") as f:
            f.write(f"[CLUSTER]\nracks = 1\nservers_per_rack = {servers}\ngpus_per_server = {per}\n"
                    f"cpus_per_server = {cpus}\ndram_per_server = 500\nsspeed_per_server = 500\n"
                    "[SCHEDULER]\npolicy = FIFO\nlease_time = 5\n")
        os.chdir(simdir)
        sys.path.insert(0, simdir)
        import logging
        import random

        logging.basicConfig(level=logging.WARNING)
        import runner as R

        random.seed(42)
        t0 = time.process_time()
        r = R.Runner(cluster_job_log=None, scheduler=sched, jobs_per_hour=9.0, model_class_split=(20, 70, 10),
                     exponential=True, philly_arrival=False, multigpu=False, small_trace=False, static=bool(int(static)),
                     placement=False, prioritize=False, fair=(mode == "fair"), tune=(mode == "tune"), opt=False,
                     simulate=True, conn_list=None, config_file=cfg, num_jobs_default=0, record_trace=False,
                     rec_trace_file=None, trace=os.path.abspath(trace), series_id_filter=(0, 10**9))
        r.run_simulation()
        cpu = time.process_time() - t0
    done = {j.job_id: j.job_last_execution_time - j.job_arrival_time for j in r.finished_jobs}
    lines = [f"{j.job_id},{done[j.job_id]!r}" if j.job_id in done else f"{j.job_id}," for j in r.workload.jobs]
    return "\n".join(lines + [f"cpu_s,{cpu!r}"])


# ------------------------------------------------------------------ ours
def cases() -> list:
    with open(DATA / "results" / "cases.csv", newline="") as f:
        return list(csv.DictReader(f))


def shipped() -> tuple:
    runs, cpu = {}, {}
    with gzip.open(DATA / "results" / "peer_runs.csv.gz", "rt", newline="") as f:
        for r in csv.DictReader(f):
            runs.setdefault((r["case"], r["policy"]), {})[int(r["job_id"])] = float(r["jct_s"] or "nan")
    with open(DATA / "results" / "peer_cpu.csv", newline="") as f:
        for r in csv.DictReader(f):
            cpu[r["case"], r["policy"]] = float(r["cpu_s"])
    return runs, cpu


def ours(c, policy):
    import numpy as np

    from fastblox import compat_synergy as cs

    w = cs.read_trace(DATA / "traces" / c["trace"])
    opts = {"cpus": int(c["cpus"]), "static": int(c["static"]), "profile": int(c["profile"])}
    t0 = time.process_time()
    out = cs.simulate(w.extra["model"], w.submit_s, w.iterations, w.num_gpus, policy, int(c["servers"]),
                      int(c["gpus_per_server"]), opts)
    cpu = time.process_time() - t0
    return dict(zip(w.job_id.tolist(), (out["finish_s"] - w.submit_s).tolist())), cpu, np


def theirs_now(a, c, sched, mode) -> tuple:
    cmd = [a.synergy_python, __file__, "--peer-run", str(a.synergy_dir), str(DATA / "traces" / c["trace"]),
           c["servers"], c["gpus_per_server"], c["cpus"], c["static"], c["profile"], sched, mode]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [a.synergy_pythonpath, os.environ.get("PYTHONPATH")])))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
    jct, cpu = {}, None
    for line in p.stdout.strip().splitlines():
        k, _, v = line.partition(",")
        if k == "cpu_s":
            cpu = float(v)
        else:
            jct[int(k)] = float(v) if v else float("nan")
    return (jct, cpu), None


def compare(a) -> tuple:
    from fastblox import compat_synergy as cs

    cs.warm()
    runs, pcpu = shipped()
    rows, record, failed = [], [], []
    for c in cases():
        for sched in ("FIFO", "SRTF", "LAS", "FTF"):
            for mode, suffix in MODES.items():
                policy = sched.lower() + suffix
                if a.synergy_dir:
                    got, err = theirs_now(a, c, sched, mode)
                    if got is None:
                        failed.append((c["case"], policy, err))
                        continue
                    tj, tcpu = got
                elif (c["case"], policy) in runs:
                    tj, tcpu = runs[c["case"], policy], pcpu[c["case"], policy]
                else:
                    continue
                oj, ocpu, np = ours(c, policy)
                ids = sorted(tj)
                x, y = np.array([tj[i] for i in ids]), np.array([oj[i] for i in ids])
                eq = int((np.isclose(x, y, rtol=0, atol=1e-6) | (np.isnan(x) & np.isnan(y))).sum())
                rows.append((c, policy, np.nanmean(x), np.nanmean(y), eq, len(ids), tcpu, ocpu))
                record += [(c["case"], policy, i, tj[i], tcpu) for i in ids]
    return rows, record, failed


def tables(rows, failed, live: bool) -> str:
    out = ["| case | trace | servers x GPUs, CPUs a server | schedulers | jobs equal to the simulator's | mean JCT difference "
           "(max over schedulers) | simulator CPU s | fastblox CPU s | x |", "|---|---|---|---|---|---|---|---|---|"]
    by = {}
    for r in rows:
        by.setdefault(r[0]["case"], []).append(r)
    for case, rs in by.items():
        c = rs[0][0]
        eq, n = sum(r[4] for r in rs), sum(r[5] for r in rs)
        dmax = max(abs(r[3] / r[2] - 1) * 100 for r in rs)
        tc, oc = sum(r[6] for r in rs), sum(r[7] for r in rs)
        out.append(f"| {case} | {c['trace']} | {c['servers']}x{c['gpus_per_server']}, {c['cpus']} | {len(rs)} | {eq} of {n} | "
                   f"{dmax:.3f} % | {tc:.1f} | {oc:.3f} | {tc / oc:,.0f} |")
    detail = [r for r in rows if r[0]["case"] == "synth200_c32"]
    if detail:
        out += ["", "The contended multi-GPU trace (synth200_c32: 200 jobs, 4 x 8 GPUs, 24 CPUs a server), each scheduler:", "",
                "| scheduler | simulator mean JCT (h) | fastblox (h) | difference | jobs equal | simulator CPU s | fastblox CPU s |",
                "|---|---|---|---|---|---|---|"]
        for c, pol, x, y, eq, n, tc, oc in detail:
            out.append(f"| {pol} | {x / 3600:.4f} | {y / 3600:.4f} | {100 * (y / x - 1):+.3f} % | {eq} of {n} | {tc:.2f} | {oc:.4f} |")
    if failed:
        out += ["", "Runs the simulator could not finish (its error; ours is not compared there):", ""]
        out += [f"- {case} {pol}: `{err[:160]}`" for case, pol, err in failed]
    src = ("both run here, one after the other" if live else
           "the simulator's CPU seconds are those of its recorded runs (`--record`), not of this run")
    return "\n".join(out) + f"\n\n(CPU seconds: {src}.)"


def record_runs(record) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["case", "policy", "job_id", "jct_s"])
    for case, pol, j, jct, _ in record:
        w.writerow([case, pol, j, "" if jct != jct else repr(jct)])
    with gzip.GzipFile(DATA / "results" / "peer_runs.csv.gz", "wb", mtime=0) as f:
        f.write(buf.getvalue().encode())
    seen = {}
    for case, pol, _, _, cpu in record:
        seen[case, pol] = cpu
    with open(DATA / "results" / "peer_cpu.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["case", "policy", "cpu_s"])
        w.writerows([(c, p, f"{v:.3f}") for (c, p), v in seen.items()])


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--peer-run":
        print(peer_run(*sys.argv[2:]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synergy-dir", type=Path, help="the simulator/ folder of a msr-fiddle/synergy checkout")
    ap.add_argument("--synergy-python", default=sys.executable, help="a Python with the simulator's dependencies")
    ap.add_argument("--synergy-pythonpath", default="", help="extra PYTHONPATH for it (e.g. a stand-in numa module)")
    ap.add_argument("--record", action="store_true", help="rewrite datasets/synergy/results from the simulator's runs")
    ap.add_argument("--write", action="store_true", help="write the tables into docs/fidelity.md")
    a = ap.parse_args(argv)
    if a.record and not a.synergy_dir:
        ap.error("--record needs --synergy-dir")
    rows, record, failed = compare(a)
    text = tables(rows, failed, live=bool(a.synergy_dir))
    print(text)
    if a.record:
        record_runs(record)
    if a.write:
        sys.path.insert(0, str(ROOT / "bench"))
        from _util import update_section

        stamp = (f"Measured by `python bench/synergy.py{' --synergy-dir ... --synergy-python ...' if a.synergy_dir else ''} "
                 f"--write` ({time.strftime('%Y-%m-%d')}): every case of datasets/synergy/results/cases.csv, the 12 "
                 "schedulers each (FIFO/SRTF/LAS/FTF x +fair/greedy/+tune), 300 s rounds.")
        update_section(ROOT / "docs" / "fidelity.md", "synergy", stamp + "\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
