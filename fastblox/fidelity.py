"""Fidelity: fastblox's policies against the authors' own simulators, from the data a clone has.

``datasets/peer/`` holds one 2,000-job workload (Gavel's generator, seed 0) in Tiresias' and
Gavel's input formats, and the per-job finish times that Tiresias' simulator
(SymbioticLab/Tiresias ``simulator/run_sim.py``, unmodified, Python 2.7) and Gavel's
(stanford-futuredata/gavel, unmodified, ECOS, seed 0, 360 s rounds) produced on it
(``datasets/peer/README.md`` says how). :func:`run_all` replays every configuration with the
matching fastblox configuration and compares average and per-job JCTs; ``fastblox fidelity``
prints the table (``docs/fidelity.md`` holds it with the explanations)."""

from __future__ import annotations

import csv
import functools
import gzip
import os
import time

import numpy as np

from ._argtypes import positive_int
from .datasets import HERE as _DATASETS
from .kernels import variants as kvariants

PEER = _DATASETS / "peer"
RESULTS = PEER / "results"
TIRESIAS_TRACE = PEER / "gavel_n2000_lam400_s0.tiresias.csv.gz"
GAVEL_TRACE = PEER / "gavel_n2000_lam400_s0.trace.gz"
TIRESIAS_CLUSTERS = {"n12g4": (12, 4), "n9g4": (9, 4)}  # nodes, GPUs per node
#: the workloads Tiresias' simulator was run on: name -> (file, its clusters). n2000: Gavel's
#: generator (load 0.70 / 0.94); light1500 and over1500: fastblox's Gavel-like generator, 1-8
#: GPUs, load 0.80 on 48 GPUs and 1.30 (overloaded) on 36 (datasets/peer/README.md)
TIRESIAS_WORKLOADS = {
    "n2000": (TIRESIAS_TRACE, ("n12g4", "n9g4")),
    "light1500": (PEER / "gavel_like_n1500_s7.tiresias.csv.gz", ("n12g4",)),
    "over1500": (PEER / "gavel_like_n1500_s11.tiresias.csv.gz", ("n9g4",)),
}
GAVEL_CLUSTERS = {"het36": "v100:36x1,p100:36x1,k80:36x1", "v100x48": "v100:48x1", "v100x36": "v100:36x1"}
#: the same clusters in Gavel's own syntax (``-c V100:P100:K80``), as ``--compat gavel`` takes them
GAVEL_SPECS = {"het36": "36:36:36", "v100x48": "48:0:0", "v100x36": "36:0:0"}
#: Gavel's round (``--time_per_iteration 360``): the tolerance of the per-job comparison of ``--compat gavel``
GAVEL_ROUND_S = 360.0

# peer run (without the cluster) -> (fastblox policy, options, placement, note). Tiresias' dlas and
# count runs hand out GPUs from one cluster-wide counter (placement None: one node of all the GPUs);
# its fifo schedule places on nodes (``yarn``). A name with " (...)" is a second fastblox
# configuration compared with the same peer run.
TIRESIAS_RUNS = {
    "fjf_count": ("fifo", None, None, "FIFO with backfilling on a pool of GPUs"),
    "fifo_yarn": ("fifo", {"backfill": False}, "yarn", "strict FIFO, no backfilling, Tiresias' yarn placement"),
    "shortest_count": ("srtf", None, None, "SRTF (oracle) on a pool of GPUs"),
    "dlas-gpu_yarn": ("tiresias", None, None, "2D-LAS, K=3, 3250/7200 GPU-s"),
    "dlas-gpu_K2-3600_yarn": ("tiresias", {"thresholds": "3600"}, None, "2D-LAS, K=2, 3600 GPU-s"),
    "dlas-gpu-2_yarn": ("tiresias", {"promote": 2}, None, "2D-LAS, PROMOTE knob 2"),
    "dlas-gpu-8_yarn": ("tiresias", {"promote": 8}, None, "2D-LAS, PROMOTE knob 8"),
    "dlas-gpu-gittins_yarn": ("tiresias-gittins", None, None, "2D-Gittins, this workload's distribution"),
    "dlas-gpu-gittins_yarn (YARN dist.)": ("tiresias-gittins", {"distribution": "tiresias-yarn"}, None,
                                           "2D-Gittins, Tiresias' YARN distribution"),
}
#: the runs ``--compat tiresias`` replays with Tiresias' own schedule (and options)
TIRESIAS_COMPAT = {
    "dlas-gpu_yarn": ("dlas-gpu", None),
    "dlas-gpu_K2-3600_yarn": ("dlas-gpu", {"thresholds": "3600"}),
    "dlas-gpu-2_yarn": ("dlas-gpu-2", None),
    "dlas-gpu-8_yarn": ("dlas-gpu-8", None),
    "dlas-gpu-gittins_yarn": ("dlas-gpu-gittins", None),
}
#: Gavel's policies -> (the fastblox policy compared with it, note)
GAVEL_POLICIES = {
    "fifo_perf": ("gavel-fifo", "FIFO, fastest free type"),
    "fifo": ("gavel-fifo", "Gavel's base fifo against fastblox's fifo_perf (no base fifo here)"),
    "max_min_fairness_perf": ("gavel", "max-min fairness, heterogeneity-aware"),
    "max_min_fairness": ("gavel-las-agnostic", "max-min fairness, agnostic"),
    "finish_time_fairness_perf": ("gavel-ftf", "finish-time fairness, aware"),
    "finish_time_fairness": ("gavel-ftf-agnostic", "finish-time fairness, agnostic"),
}
#: the workloads Gavel's simulator was run on (its generator, `-m`): name -> trace. n2000: seed 0,
#: one job per 400 s; light1000: seed 2, per 500 s; over1000: seed 1, per 280 s (load 1.40 on 36 V100s)
GAVEL_WORKLOADS = {
    "n2000": GAVEL_TRACE,
    "light1000": PEER / "gavel_n1000_lam500_s2.trace.gz",
    "over1000": PEER / "gavel_n1000_lam280_s1.trace.gz",
}


def peer_summary() -> dict:
    """``{run: row}`` of ``results/summary.csv``: the peer's average JCT and CPU seconds."""
    with open(RESULTS / "summary.csv") as f:
        return {r["run"]: r for r in csv.DictReader(f)}


def peer_finish(run: str) -> dict:
    """``{job_id: finish_s}`` of a peer run (jobs the peer dropped are left out)."""
    with gzip.open(RESULTS / f"{run}.csv.gz", "rt") as f:
        return {int(r["job_id"]): float(r["finish_s"]) for r in csv.DictReader(f) if r["finish_s"] != ""}


def tiresias_config(cl_name: str, placement: str | None) -> dict:
    """``simulate`` keywords of the fastblox cluster and placement matching a Tiresias run."""
    nodes, per_node = TIRESIAS_CLUSTERS[cl_name]
    if placement is None:
        return {"cluster": f"1x{nodes * per_node}"}
    return {"cluster": f"{nodes}x{per_node}", "placement": placement}


def gavel_config(cluster: str) -> dict:
    """``simulate`` keywords matching a Gavel run on ``cluster`` (a key of :data:`GAVEL_CLUSTERS`):
    one GPU per server, Gavel's throughput table, no placement effects."""
    return {"cluster": GAVEL_CLUSTERS[cluster], "throughput": "gavel", "placement_effects": False}


def compare(res, run: str, peer_avg: float) -> dict:
    """Average and per-job JCT of a fastblox result against peer run ``run`` (the jobs both finished)."""
    theirs = peer_finish(run)
    j = res.jobs
    ids = j["job_id"].to_numpy()
    fin = j["finish_s"].to_numpy()
    sub = j["submit_s"].to_numpy()
    both = np.array([i in theirs for i in ids]) & np.isfinite(fin)
    ours_jct = fin[both] - sub[both]
    their_jct = np.array([theirs[i] for i in ids[both]]) - sub[both]
    d = np.abs(ours_jct - their_jct)
    return {
        "jobs_compared": int(both.sum()),
        "ours_avg": float(ours_jct.mean()), "theirs_avg": float(their_jct.mean()),
        "peer_reported_avg": float(peer_avg),
        "diff_pct": 100.0 * (ours_jct.mean() / their_jct.mean() - 1.0),
        "same_1s": float((d <= 1.0).mean()), "median_abs_s": float(np.median(d)),
        "within_round": float((d <= GAVEL_ROUND_S).mean()),
        "dropped_theirs": int(len(ids) - len(theirs)), "dropped_ours": int((~np.isfinite(fin)).sum()),
    }


def _configs():
    """``(simulator, run label, peer run, trace file, policy, options, simulate keywords, note)`` of
    every comparison whose peer run is in ``results/``."""
    have = peer_summary()
    for wl, (path, clusters) in TIRESIAS_WORKLOADS.items():
        for cl_name in clusters:
            for short, (pol, opts, placement, note) in TIRESIAS_RUNS.items():
                run = f"{wl}_{cl_name}_{short.split(' ')[0]}"
                if run not in have:
                    continue
                label = f"{wl} {cl_name} {short}"
                yield "Tiresias", label, run, path, pol, opts, tiresias_config(cl_name, placement), note
                if short in TIRESIAS_COMPAT:
                    sched, copts = TIRESIAS_COMPAT[short]
                    nodes, per_node = TIRESIAS_CLUSTERS[cl_name]
                    yield ("Tiresias", label + " (compat)", run, path, sched, copts,
                           {"compat": "tiresias", "cluster": f"{nodes}x{per_node}"}, f"--compat tiresias {sched}")
    optimum = gavel_optimum()
    for run, row in have.items():
        if row["simulator"] == "gavel":  # <workload>_<cluster>_<Gavel's policy>
            wl, cl, gpol = run.split("_", 2)
            pol, note = GAVEL_POLICIES[gpol]
            yield "Gavel", f"{wl} {cl} {gpol}", run, GAVEL_WORKLOADS[wl], pol, None, gavel_config(cl), note
            lp = "fifo" not in gpol
            yield ("Gavel", f"{wl} {cl} {gpol} (compat)", run, GAVEL_WORKLOADS[wl], gpol,
                   {"optimum": optimum} if lp else None, {"compat": "gavel", "cluster": GAVEL_SPECS[cl]},
                   f"--compat gavel {gpol}" + (f", optimum={optimum}" if lp else ""))


def gavel_optimum() -> str:
    """How the ``--compat gavel`` LP rows are solved: ``ecos`` (Gavel's solver, exact) when the
    optional extra ``fastblox[gavel]`` is installed, else ``central``; each row names it."""
    from .gavel_ecos import have_ecos

    return "ecos" if have_ecos() else "central"


def run_all(only: str | None = None, progress=None, workers: int = 1) -> list[dict]:
    """Every comparison (``only``: ``tiresias`` or ``gavel``), one dict per row of the table, in
    the table's order; ``progress(i, n, label)`` is called as each row starts (``workers`` 1) or
    ends. ``workers`` > 1 runs the rows in that many fresh processes (:func:`_tasks` says which
    rows go together); the rows are the same, and in the same order, as with one."""
    todo = [c for c in _configs() if only is None or c[0].lower() == only]
    if workers <= 1:
        out = []
        for i, c in enumerate(todo):
            if progress is not None:
                progress(i, len(todo), f"{c[0]} {c[1]}")
            out.append(_row(c))
        return out
    return _run_pool(todo, progress, workers)


@functools.cache
def _trace(path):
    """The workload of a peer trace file, read once per process (Gavel's: its own step rates)."""
    from fastblox.traces import read_trace

    return read_trace(path, steps_per_s="builtin") if path in GAVEL_WORKLOADS.values() else read_trace(path)


def _row(config) -> dict:
    """Replay one comparison of :func:`_configs` and compare it with its peer run: a table row."""
    import fastblox

    sim, label, run, path, pol, opts, kw, note = config
    summ = peer_summary()[run]
    t0 = time.perf_counter()
    res = fastblox.simulate(_trace(path), policy=pol, policy_opts=opts, **kw)
    wall = time.perf_counter() - t0
    return {"simulator": sim, "run": label, "policy": pol, "note": note, "ours_s": wall,
            "theirs_cpu_s": float(summ["cpu_s"]), **compare(res, run, float(summ["avg_jct_s"]))}


def _kernel(config) -> str | None:
    """The numba kernel a comparison compiles on first use (``engine.spec_kind``: a native path's
    kernel), None for the peer compat modes (plain Python)."""
    from .engine import spec_kind
    from .spec import RunSpec

    _, _, _, _, pol, opts, kw, _ = config
    return spec_kind(RunSpec(policy=pol, policy_opts=opts, **kw).resolved(source=False))


def _tasks(todo: list) -> list[list[int]]:
    """The rows of ``todo`` (indices) in the tasks the worker processes take in turn: first every
    row that runs on a native kernel, together, in one process, so that each kernel compiles
    once and the kernels share their helpers (compiled apart, in two processes, they cost about
    10 CPU-s more on an empty cache: ``bench/fidelity.py --time`` on a busy machine gained nothing
    from the parallel compile); then each peer compat row alone (plain Python, nothing to
    compile), taken by whichever worker is free."""
    native = [i for i, c in enumerate(todo) if _kernel(c) is not None]
    alone = [[i] for i, c in enumerate(todo) if _kernel(c) is None]
    return ([native] if native else []) + alone


def _run_rows(configs: list) -> list[dict]:
    """A worker process' task: the rows of ``configs``, in order."""
    return [_row(c) for c in configs]


def _run_pool(todo: list, progress, workers: int) -> list[dict]:
    """:func:`run_all`'s rows computed by ``workers`` ``spawn``-ed processes (polars and numba keep
    threads, which fork must not copy); each worker inherits the environment (numba's cache, the
    kernel choice)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    tasks = _tasks(todo)
    rows: list = [None] * len(todo)
    done = 0
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=mp.get_context("spawn")) as ex:
        futures = {ex.submit(_run_rows, [todo[i] for i in t]): t for t in tasks}
        try:
            for f in as_completed(futures):
                for i, row in zip(futures[f], f.result()):
                    rows[i] = row
                    if progress is not None:
                        progress(done, len(todo), f"{row['simulator']} {row['run']}")
                    done += 1
        except BaseException:
            ex.shutdown(wait=False, cancel_futures=True)
            raise
    return rows


def markdown(rows: list[dict]) -> str:
    """The table of ``docs/fidelity.md``."""
    lines = [
        "| peer run | fastblox policy | jobs | peer avg JCT (s) | fastblox avg JCT (s) | difference | jobs within 1 s | jobs within 360 s | median per-job difference (s) | dropped (peer / fastblox) | peer CPU (s) | fastblox (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['simulator']} {r['run']} | `{r['policy']}` ({r['note']}) | {r['jobs_compared']} | {r['theirs_avg']:,.1f} | "
            f"{r['ours_avg']:,.1f} | {r['diff_pct']:+.2f}% | {100 * r['same_1s']:.0f}% | {100 * r['within_round']:.1f}% | "
            f"{r['median_abs_s']:,.1f} | {r['dropped_theirs']} / {r['dropped_ours']} | "
            f"{r['theirs_cpu_s']:.1f} | {r['ours_s']:.2f} |"
        )
    return "\n".join(lines)


def text(rows: list[dict]) -> str:
    """The table for a terminal: one line per comparison."""
    head = (f"{'peer run':<62} {'fastblox policy':<26} {'peer JCT':>9} {'fastblox':>9} {'diff':>8} {'<=1 s':>6} "
            f"{'<=360 s':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['simulator'] + ' ' + r['run']:<62} {r['policy']:<26} {r['theirs_avg']:>9,.0f} "
                     f"{r['ours_avg']:>9,.0f} {r['diff_pct']:>+7.2f}% {100 * r['same_1s']:>5.0f}% "
                     f"{100 * r['within_round']:>7.1f}%")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- the command
#: ``fastblox fidelity``'s default processes at most: its native rows are one task (:func:`_tasks`)
#: that bounds the time; more workers would only add their own start-up
MAX_WORKERS = 4


def add_fidelity_command(sub) -> None:
    p = sub.add_parser("fidelity", help="compare fastblox with Tiresias' and Gavel's simulators on the bundled peer "
                       "workload (datasets/peer), one line per configuration",
                       description="Replay the bundled 2,000-job peer workload with every configuration that "
                       "Tiresias' and Gavel's own simulators were run with (their per-job results ship in "
                       "datasets/peer/results) and compare average and per-job JCTs. docs/fidelity.md explains "
                       "each difference.")
    p.add_argument("--only", choices=("tiresias", "gavel"), help="only one peer simulator's runs")
    p.add_argument("--out", metavar="DIR", help="also write fidelity.csv and fidelity.md (the table) into DIR")
    p.add_argument("--workers", type=positive_int, default=None,
                   help=f"processes (default: the CPU count, at most {MAX_WORKERS}; 1: in this process)")
    p.set_defaults(func=cmd_fidelity)


def cmd_fidelity(a) -> int:
    import sys

    from .outputs import prepare_dir

    out = prepare_dir(a.out) if a.out else None
    tty = sys.stderr.isatty()
    # (a dozen policies and placements in one process: one generic kernel per scheduling path
    # compiles less than a kernel per combination, kernels/variants.py; the results are the same)
    os.environ.setdefault(kvariants.KERNELS_ENV, "generic")

    def progress(i, n, label):
        if tty:
            print(f"\r\033[K[{i + 1}/{n}] {label}", end="", file=sys.stderr, flush=True)

    rows = run_all(a.only, progress, a.workers or min(os.cpu_count() or 1, MAX_WORKERS))
    if tty:
        print("\r\033[K", end="", file=sys.stderr, flush=True)
    print(text(rows))
    if out is not None:
        _write(out, rows)
        print(f"wrote {out / 'fidelity.csv'} and fidelity.md")
    return 0


def _write(out, rows: list[dict]) -> None:
    cols = ["simulator", "run", "policy", "note", "jobs_compared", "theirs_avg", "ours_avg", "diff_pct", "same_1s",
            "median_abs_s", "within_round", "dropped_theirs", "dropped_ours", "peer_reported_avg", "theirs_cpu_s", "ours_s"]
    with open(out / "fidelity.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    (out / "fidelity.md").write_text(markdown(rows) + "\n")
