"""Scale benchmark (issue 6): the Philly trace scaled to 1,000,000 jobs, its truncations to 10k and
100k jobs, FIFO / LAS / SRTF / Tiresias in events mode on clusters of 128 to 32,768 GPUs, and on
the scaled cluster split into three GPU types.

    python bench/bench_scale.py                # everything (~10 min on 2 cores), docs/performance.md + docs/img/scale.png
    python bench/bench_scale.py --budget-s 3   # skip more of the congested runs
    python bench/bench_scale.py --no-readme --no-process
    python bench/bench_scale.py --profile 1000000,2801x8,las   # cProfile of one run (bench/out/scale.prof)

Inputs are built once and cached under bench/out/scale/ (git-ignored): ``fastblox trace scale`` of
shared/traces/philly-rfold (seed 0, K = 9 streams) to 1M jobs, and its first 10k / 100k jobs. The
scaled cluster is the nominal 2,490-GPU source cluster grown by K, in 8-GPU nodes (2801x8).

Every configuration is first run once with the time series on and checked (every job finished
once, ids and counts, start >= submit, finish >= submit + duration, each job's attained service =
its duration and GPU-hours conserved); that run gives steps, preemptions and the active / queue
lengths. Then it is timed without the series: the median of ``--repeats`` runs (one run when a run
takes over 2 s), each compared with the checked run's job table.

Work is capped: small clusters with many jobs hold queues of ~N jobs and every step walks them,
so a run's cost grows as N². A configuration is skipped when its time predicted from the run with
10x fewer jobs on the same cluster and policy exceeds ``--budget-s`` (x10 when that run's mean
queue was under 1 % of its jobs, else x100), and each runs in a child process stopped after
max(3 x budget, 30 s) (short truncations rarely queue, so a prediction can be far too low); the
runs not done are listed with the reason.

Also: the per-step cost along the 1M run (the run paused at the finish time of every 10,000th
job and resumed, checked identical to an uninterrupted one), and the whole ``fastblox run``
process on the 1M Parquet in a fresh interpreter (empty / warm numba cache, peak RSS from wait4).

Times: ``sim_s`` is the summary's ``sim_wall_s`` (wall time of the simulation alone); ``cpu_s`` the
thread CPU time of the same call (``NativeState.drive``), which is what an idle machine would show
as wall time: on a shared machine wall times are inflated by other work.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _util import OUT, ROOT, cold_start, machine, save, update_readme  # noqa: E402

import fastblox  # noqa: E402
from fastblox import engine as fengine  # noqa: E402
from fastblox.cluster import Cluster  # noqa: E402
from fastblox.kernels import engine as kengine  # noqa: E402
from fastblox.kernels import enums  # noqa: E402

SRC = Path(os.environ.get("FASTBLOX_SHARED", ROOT.parent / "shared")) / "traces" / "philly-rfold" / "jobs.csv.gz"
DIR = OUT / "scale"
N_MAX = 1_000_000
SIZES = [10_000, 100_000, 1_000_000]
SOURCE_GPUS = 2490  # nominal Philly cluster (as bench_trace_scale.py); the scaled one is K times larger
POLICIES = ["fifo", "las", "srtf", "tiresias"]
CLUSTERS = ["16x8", "128x8", "512x8", "1400x8", "2048x8", "2801x8", "4096x8"]  # 128 ... 32,768 GPUs
HETERO = "v100:934x8,p100:934x8,k80:933x8"  # the scaled cluster's 22,408 GPUs in three types (Gavel's speeds)
IMG = ROOT / "docs" / "img" / "scale.png"


# ----------------------------------------------------------------------------------------- inputs
def workloads() -> tuple[dict, dict, Path]:
    """{jobs: Workload} for SIZES (cached Parquet), the scale report, and the 1M file's path."""
    from fastblox.traces import read_trace
    from fastblox.traces.scale import scale_trace
    from fastblox.traces.schema import write_parquet

    DIR.mkdir(parents=True, exist_ok=True)
    big = DIR / "philly_1m.parquet"
    rep_path = big.with_name(big.name + ".json")
    if not big.exists() or not rep_path.exists():
        if not SRC.exists():
            sys.exit(f"bench_scale: no trace at {SRC} (set FASTBLOX_SHARED to the shared/ folder)")
        t0 = time.perf_counter()
        syn, rep = scale_trace(read_trace(SRC, on_bad_rows="drop"), N_MAX, seed=0, total_gpus=SOURCE_GPUS, source_path=SRC)
        write_parquet(syn, big)
        rep_path.write_text(json.dumps(rep, indent=2, sort_keys=True, default=float) + "\n")
        print(f"  built {big} in {time.perf_counter() - t0:.1f} s")
    rep = json.loads(rep_path.read_text())
    w = read_trace(big)
    assert len(w) == N_MAX and (np.diff(w.submit_s) >= 0).all()
    ws = {}
    for n in SIZES:
        p = DIR / f"philly_{n // 1000}k.parquet"
        if n < N_MAX and not p.exists():
            write_parquet(w.head(n), p)
        ws[n] = w if n == N_MAX else read_trace(p)
        assert len(ws[n]) == n
    return ws, rep, big


def scaled_cluster(rep: dict) -> str:
    return f"{round(rep['cluster_multiplier'] * SOURCE_GPUS / 8)}x8"


# ---------------------------------------------------------------------------------------- checks
def check(w, res) -> None:
    """Raise AssertionError unless the run is sound (restart cost 0; on one GPU type every job runs
    at rate 1, so its attained service equals its duration)."""
    j, s = res.jobs, res.summary
    n = len(w)
    assert s["num_jobs"] == n and s["num_finished"] == n and j.height == n, "every job finishes"
    assert (j["job_id"].to_numpy() == w.job_id).all() and len(np.unique(w.job_id)) == n, "one row per job"
    sub, dur, g = w.submit_s, w.duration_s, w.num_gpus
    fin, first = j["finish_s"].to_numpy(), j["first_start_s"].to_numpy()
    assert not np.isnan(fin).any() and not np.isnan(first).any(), "every job started and finished"
    assert (first >= sub).all(), "no job starts before its submit time"
    tol = 1e-9 * np.maximum(1.0, np.abs(fin))
    assert (fin - sub >= dur - tol).all(), "finish >= submit + duration"
    att = j["attained_s"].to_numpy()
    if len(Cluster.parse(res.config["cluster"]).gpu_types) == 1:
        assert np.allclose(att, dur, rtol=1e-9, atol=1e-6), "each job ran exactly its duration"
        gpu_s = float((dur * g).sum())
        assert abs(float(j["attained_gpu_s"].sum()) - gpu_s) <= 1e-9 * gpu_s, "GPU-hours conserved"
    else:
        assert (att > 0).all(), "every job ran"
    assert int(j["num_preemptions"].sum()) == s["num_preemptions"]


# ------------------------------------------------------------------------------------------- runs
@contextlib.contextmanager
def thread_time_of_drive():
    """Collect the thread CPU time of every ``NativeState.drive`` call made inside the block."""
    got: list = []
    orig = fengine.NativeState.drive

    def drive(self, *a, **k):
        t0 = time.thread_time()
        try:
            return orig(self, *a, **k)
        finally:
            got.append(time.thread_time() - t0)

    fengine.NativeState.drive = drive
    try:
        yield got
    finally:
        fengine.NativeState.drive = orig


def run_config(w, cluster: str, policy: str, repeats: int) -> dict:
    ref = fastblox.simulate(w, cluster=cluster, policy=policy, time_model="events", record_series=True)
    check(w, ref)
    q = ref.series["queued_jobs"].to_numpy()
    act = q + ref.series["running_jobs"].to_numpy()
    sims = []
    reps = repeats if ref.summary["sim_wall_s"] < 2.0 else 1
    with thread_time_of_drive() as cpus:
        for _ in range(reps):
            r = fastblox.simulate(w, cluster=cluster, policy=policy, time_model="events")
            assert r.jobs.equals(ref.jobs), "the timed run differs from the checked one"
            sims.append(r.summary["sim_wall_s"])
    sim = statistics.median(sims)
    cpu = statistics.median(cpus)
    steps = r.summary["num_steps"]
    return {
        "jobs": len(w), "cluster": cluster, "gpus": Cluster.parse(cluster).total_gpus, "policy": policy,
        "gpu_types": len(Cluster.parse(cluster).gpu_types),
        "sim_s": sim, "sim_all_s": sims, "cpu_s": cpu, "cpu_all_s": list(cpus), "steps": steps,
        "us_per_step": 1e6 * sim / steps, "cpu_us_per_step": 1e6 * cpu / steps,
        "preemptions": r.summary["num_preemptions"], "mean_active": float(act.mean()), "max_active": int(act.max()),
        "mean_queue": float(q.mean()), "max_queue": int(q.max()), "avg_jct_s": r.summary["avg_jct_s"],
        "utilisation": r.summary["utilisation"],
    }


def predict(prev: dict | None, n: int) -> float | None:
    if prev is None:
        return None
    f = n / prev["jobs"]
    congested = prev["mean_queue"] >= 0.01 * prev["jobs"]
    return prev["cpu_s"] * (f * f if congested else f)


def run_child(n: int, cluster: str, policy: str, repeats: int, timeout_s: float) -> dict | None:
    """``run_config`` in a fresh interpreter, stopped after ``timeout_s`` (then None): a congested
    run's cost cannot be told from a smaller one (short truncations rarely queue)."""
    cmd = [sys.executable, __file__, "--child", json.dumps([n, cluster, policy]), "--repeats", str(repeats)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=True)
    except subprocess.TimeoutExpired:
        return None
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"bench_scale: {n} {cluster} {policy} failed:\n{e.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def grid(clusters: list, budget_s: float, repeats: int) -> tuple[list, list]:
    rows, skipped = [], []
    for cl in clusters:
        for p in POLICIES:
            prev = None
            for n in SIZES:
                pred = predict(prev, n)
                gpus = Cluster.parse(cl).total_gpus
                if pred is not None and pred > budget_s:
                    skipped.append({"jobs": n, "cluster": cl, "gpus": gpus, "policy": p, "why": f"predicted {pred:,.0f} s"})
                    print(f"  {n:>9,} {cl:>7} {p:5s} skipped: predicted {pred:,.0f} s > {budget_s:g} s")
                    break  # larger sizes only cost more
                row = run_child(n, cl, p, repeats, timeout_s=max(3 * budget_s, 30.0))
                if row is None:
                    why = f"stopped after {max(3 * budget_s, 30.0):.0f} s"
                    skipped.append({"jobs": n, "cluster": cl, "gpus": gpus, "policy": p, "why": why})
                    print(f"  {n:>9,} {cl:>7} {p:5s} {why}")
                    break
                rows.append(row)
                prev = row
                print(f"  {n:>9,} {cl:>7} {p:8s} {row['sim_s']:8.3f} s wall {row['cpu_s']:8.3f} s CPU {row['steps']:>9,} steps "
                      f"{row['cpu_us_per_step']:7.2f} us/step  queue mean {row['mean_queue']:9,.0f} max {row['max_queue']:>7,}  "
                      f"preemptions {row['preemptions']:,}", flush=True)
    return rows, skipped


def step_profile(w, cluster: str, policy: str, chunk: int = 10_000, repeats: int = 3) -> dict:
    """Per-step cost along one run: the run is paused at the finish time of every ``chunk``-th job
    of an uninterrupted run (``NativeState.drive(stop_t)`` steps up to and including ``stop_t``,
    so pausing changes nothing; the final state is compared with the uninterrupted run's) and each
    chunk is timed in thread CPU time (chunks of ~10 ms are too short for wall time on a shared
    machine), the median of ``repeats`` runs."""
    class Prepared(Exception):
        pass

    def fresh():
        """The state simulate() builds, stopped before it runs."""
        orig = fengine.NativeState.drive

        def stop(self, *a, **k):
            raise Prepared(self)

        fengine.NativeState.drive = stop
        try:
            fastblox.simulate(w, cluster=cluster, policy=policy, time_model="events")
        except Prepared as e:
            return e.args[0]
        finally:
            fengine.NativeState.drive = orig
        raise AssertionError("simulate() did not run the native engine")

    fengine._warm("native")
    whole = fresh()
    t0 = time.perf_counter()
    assert whole.drive() == kengine.FINISHED
    whole_s = time.perf_counter() - t0
    fin_sorted = np.sort(whole.run.finish)
    marks = sorted(set(float(fin_sorted[r]) for r in range(chunk - 1, len(w), chunk)) | {float(fin_sorted[-1])})
    walls = []
    for _ in range(repeats):
        st = fresh()
        finished, wall, steps, active = [], [], [], []
        for m in marks:
            s0 = int(st.si[kengine.I_N_STEPS])
            t0 = time.thread_time()
            code = st.drive(m)
            wall.append(time.thread_time() - t0)
            assert code in (kengine.PAUSED, kengine.FINISHED), code
            finished.append(int(np.searchsorted(fin_sorted, m, side="right")))
            steps.append(int(st.si[kengine.I_N_STEPS]) - s0)
            active.append(int(st.si[kengine.I_N_RUNNING] + st.si[kengine.I_NW]))
        assert (st.run.status == enums.DONE).all()
        walls.append(wall)
    wall = list(np.median(np.array(walls), axis=0))
    exact = bool(np.array_equal(whole.run.finish, st.run.finish) and np.array_equal(whole.run.first_start, st.run.first_start))
    us = [1e6 * a / max(b, 1) for a, b in zip(wall, steps)]
    tenth = max(1, len(us) // 10)
    return {"jobs": len(w), "cluster": cluster, "policy": policy, "chunk": chunk, "finished": finished,
            "us_per_step": us, "steps": steps, "active_at_end": active, "exact": exact,
            "chunked_cpu_s": sum(wall), "uninterrupted_s": whole_s,
            "first_tenth_us": statistics.median(us[:tenth]), "last_tenth_us": statistics.median(us[-tenth:])}


def process_runs(big: Path, cluster: str) -> dict:
    """The whole `fastblox run` on the 1M Parquet, in fresh processes (median of 5 warm runs: a
    fresh process's time varies more than a kernel's on a shared machine)."""
    with tempfile.TemporaryDirectory() as out:
        d = {"out": cold_start(["run", "--trace", str(big), "--cluster", cluster, "--out", out], warm_repeats=5),
             "json": cold_start(["run", "--trace", str(big), "--cluster", cluster, "--json"], warm_repeats=5)}
    return d


def profile(n: str, cluster: str, policy: str) -> None:
    """cProfile of one warm ``simulate`` call: where the Python side spends its time next to the kernel."""
    import cProfile
    import pstats

    ws, _, _ = workloads()
    w = ws[int(n)] if int(n) in ws else ws[N_MAX].head(int(n))
    fastblox.simulate(w.head(100), cluster=cluster, policy=policy, time_model="events")  # warm
    out = OUT / "scale.prof"
    pr = cProfile.Profile()
    pr.enable()
    res = fastblox.simulate(w, cluster=cluster, policy=policy, time_model="events")
    _ = res.jobs  # the per-job table is built on first use: count it
    pr.disable()
    pr.dump_stats(out)
    print(f"{n} jobs, {cluster}, {policy}: sim_wall_s {res.summary['sim_wall_s']:.3f} s; profile in {out}")
    pstats.Stats(str(out)).sort_stats("cumulative").print_stats(20)


# ------------------------------------------------------------------------------------------- report
def label_of(p: str) -> str:
    """A policy's name as the README writes it (FIFO, LAS, SRTF, Tiresias)."""
    return p.upper() if p in ("fifo", "las", "srtf") else p.capitalize()


def plot(d: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = d["rows"]
    style = {"fifo": ("tab:blue", "o", "-"), "las": ("tab:red", "s", "--"), "srtf": ("tab:green", "^", ":"),
             "tiresias": ("tab:purple", "D", "-.")}
    fig, ax = plt.subplots(2, 2, figsize=(12, 9))
    # (a) time vs jobs on the scaled cluster and the largest one
    a = ax[0, 0]
    for cl, alpha in ((d["scaled_cluster"], 1.0), ("4096x8", 0.45), (HETERO, 0.3)):
        g = Cluster.parse(cl).total_gpus
        for p in POLICIES:
            r = sorted((x for x in rows if x["cluster"] == cl and x["policy"] == p), key=lambda x: x["jobs"])
            if r:
                c, m, ls = style[p]
                a.plot([x["jobs"] for x in r], [x["cpu_s"] for x in r], color=c, marker=m, ls=ls, alpha=alpha,
                       label=f"{label_of(p)}, {g:,} GPUs" + (", 3 types" if cl == HETERO else ""))
    a.set(xscale="log", yscale="log", xlabel="jobs", ylabel="simulation CPU time (s)",
          title="(a) time vs jobs (uncongested clusters)")
    a.legend(fontsize=7, ncol=2)
    a.grid(True, which="both", alpha=0.3)
    # (b) time vs GPUs at 10k and 100k jobs
    a = ax[0, 1]
    for n, alpha in ((10_000, 0.45), (100_000, 1.0)):
        for p in POLICIES:
            r = sorted((x for x in rows if x["jobs"] == n and x["policy"] == p and x.get("gpu_types", 1) == 1),
                       key=lambda x: x["gpus"])
            if r:
                c, m, ls = style[p]
                a.plot([x["gpus"] for x in r], [x["cpu_s"] for x in r], color=c, marker=m, ls=ls, alpha=alpha,
                       label=f"{label_of(p)}, {n // 1000}k jobs")
    a.set(xscale="log", yscale="log", xlabel="cluster GPUs", ylabel="simulation CPU time (s)",
          title="(b) time vs cluster size (small clusters: long queues)")
    a.legend(fontsize=8)
    a.grid(True, which="both", alpha=0.3)
    # (c) per-step cost vs mean queue length
    a = ax[1, 0]
    for p in POLICIES:
        r = [x for x in rows if x["policy"] == p]
        c, m, _ = style[p]
        a.scatter([max(x["mean_queue"], 0.5) for x in r], [1e6 * x["cpu_s"] / x["steps"] for x in r], color=c, marker=m,
                  label=label_of(p), alpha=0.8)
    a.set(xscale="log", yscale="log", xlabel="mean queue length (waiting jobs; 0 drawn at 0.5)",
          ylabel="CPU time per scheduling step (µs)", title="(c) per-step cost vs queue length, all runs")
    a.legend(fontsize=8)
    a.grid(True, which="both", alpha=0.3)
    # (d) per-step cost along the 1M run
    a = ax[1, 1]
    for prof in d["step_profiles"]:
        c, m, ls = style[prof["policy"]]
        a.plot(np.array(prof["finished"]) / 1e3, prof["us_per_step"], color=c, ls=ls,
               label=f"{label_of(prof['policy'])}: CPU µs per step (median of 3) per {prof['chunk'] // 1000}k completions")
    a.set(xlabel="finished jobs (thousands)", ylabel="CPU time per scheduling step (µs)", ylim=(0, None),
          title=f"(d) per-step cost along the 1M run ({d['scaled_cluster']})")
    a2 = a.twinx()
    prof = d["step_profiles"][0]
    a2.plot(np.array(prof["finished"]) / 1e3, prof["active_at_end"], color="0.6", lw=0.8, label="active jobs")
    a2.set_ylabel("active jobs (running + waiting)", color="0.4")
    a2.set_ylim(0, None)
    h1, l1 = a.get_legend_handles_labels()
    h2, l2 = a2.get_legend_handles_labels()
    a.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper left")
    a.grid(True, alpha=0.3)
    shared = max(d["loadavg_5min"]) > 2
    fig.suptitle(f"fastblox events mode, scaled Philly workload ({d['machine']}, warm numba cache; "
                 f"kernel thread CPU time{', the machine was shared' if shared else ''})", fontsize=11)
    fig.tight_layout()
    IMG.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(IMG, dpi=110)
    plt.close(fig)


def readme_text(d: dict) -> str:
    rows = d["rows"]
    sc = d["scaled_cluster"]
    big = {r["policy"]: r for r in rows if r["jobs"] == N_MAX and r["cluster"] == sc}
    het = {r["policy"]: r for r in rows if r["jobs"] == N_MAX and r["cluster"] == HETERO}
    L = [f"Measured by `python bench/bench_scale.py` on {d['machine']} ({d['date']}); warm numba cache, "
         f"compile and cache loading reported apart; medians of {d['repeats']} runs (1 run when a run takes over 2 s). "
         f"The machine's 5-minute load average was {d['loadavg_5min'][0]:.1f} at the start and {d['loadavg_5min'][1]:.1f} "
         "at the end (above 2, other work shared the 2 cores and wall times are inflated; the CPU column is the "
         "kernel's own thread time, what an idle machine would show as wall time, give or take shared caches).",
         "Workload: `fastblox trace scale` of philly-rfold to 1,000,000 jobs (seed 0, K = 9 streams) and its first "
         f"10k / 100k jobs; scaled cluster {sc} ({Cluster.parse(sc).total_gpus:,} GPUs = 9 × the nominal 2,490). "
         "Every run is checked before it is timed (every job finished once, finish ≥ submit + duration, "
         "GPU-hours conserved).", ""]
    L += ["| 1M jobs on " + sc + " | simulation, wall | simulation, CPU | steps | µs / step (CPU) | target |",
          "|---|---|---|---|---|---|"]
    for label, group in (("", big), (f", {HETERO} (3 GPU types, Gavel's speeds)", het)):
        for p in POLICIES:
            if p in group:
                r = group[p]
                tgt = 0.5 if p == "fifo" else 5.0
                ok = lambda x: "met" if x < tgt else "not met"  # noqa: E731
                L.append(f"| {label_of(p)}, events{label} | **{r['sim_s']:.3f} s** | {r['cpu_s']:.3f} s | {r['steps']:,} | "
                         f"{r['cpu_us_per_step']:.2f} | < {tgt:g} s: {ok(r['sim_s'])} (wall), {ok(r['cpu_s'])} (CPU) |")
    if "process" in d:
        po, pj = d["process"]["out"], d["process"]["json"]
        when = f", rerun {d['process_date']}" if d.get("process_date", d["date"]) != d["date"] else ""
        L.append(f"| whole `fastblox run --trace 1M.parquet --cluster {sc} --out DIR`, fresh process, warm cache "
                 f"(median of {len(po['warm_all_s'])}{when}) | "
                 f"**{po['warm_cache_s']:.2f} s** (`--json`, no files: {pj['warm_cache_s']:.2f} s; import alone "
                 f"{po['import_s']:.2f} s) | {po['warm_cpu_s']:.2f} s (`--json`: {pj['warm_cpu_s']:.2f} s) | | | "
                 f"< 3 s: {'met' if po['warm_cache_s'] < 3 else 'not met'} (wall), "
                 f"{'met' if po['warm_cpu_s'] < 3 else 'not met'} (CPU) |")
        L.append(f"| same, empty numba cache (everything compiles) | {po['empty_cache_s']:.1f} s | | | | |")
        L.append(f"| peak memory (RSS) of that process | **{po['warm_peak_rss_bytes'] / 2**20:,.0f} MiB** | | | | "
                 f"< 1 GB: {'met' if po['warm_peak_rss_bytes'] < 1e9 else 'not met'} |")
    L.append(f"| compile / cache load, first call in a process | {d['compile_s']:.2f} s | | | | |")
    L += ["", "Scaling (events mode, first-fit, no restart cost; queue = waiting jobs per step, active = waiting + running):", "",
          "| jobs | GPUs | policy | simulation, wall (s) | CPU (s) | steps | µs / step (CPU) | preemptions | active mean / max | queue mean / max |",
          "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: (r["jobs"], r.get("gpu_types", 1), r["gpus"], POLICIES.index(r["policy"]))):
        g = f"{r['gpus']:,}" + (f" ({r['gpu_types']} types)" if r.get("gpu_types", 1) > 1 else "")
        L.append(f"| {r['jobs']:,} | {g} | {label_of(r['policy'])} | {r['sim_s']:.3f} | {r['cpu_s']:.3f} | {r['steps']:,} | "
                 f"{r['cpu_us_per_step']:.2f} | {r['preemptions']:,} | {r['mean_active']:,.0f} / {r['max_active']:,} | "
                 f"{r['mean_queue']:,.0f} / {r['max_queue']:,} |")
    if d["skipped"]:
        sk = ", ".join(f"{label_of(s['policy'])} {s['jobs'] // 1000}k on {s['gpus']:,} GPUs ({s['why']})"
                       for s in sorted(d["skipped"], key=lambda s: (s["gpus"], s["jobs"], POLICIES.index(s["policy"]))))
        L += ["", f"Not run (their queues hold a large share of all jobs, so the cost grows as jobs²; a run is skipped when "
                  f"the run with 10× fewer jobs predicts over {d['budget_s']:g} s, or stopped after {max(3 * d['budget_s'], 30):.0f} s): {sk}."]
    for prof in d["step_profiles"]:
        L += ["", f"Per-step cost along the 1M {label_of(prof['policy'])} run on {prof['cluster']} (per "
                  f"{prof['chunk']:,} completions, kernel CPU time): median {prof['first_tenth_us']:.2f} µs/step over the first tenth "
                  f"of the jobs, {prof['last_tenth_us']:.2f} µs/step over the last tenth"
                  + ("" if prof["exact"] else " (chunked run not identical to the uninterrupted one)") + "."]
    L += ["", f"![scaling plot](img/{IMG.name})"]  # (the block is in docs/performance.md)
    return "\n".join(L)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget-s", type=float, default=10.0, help="skip runs predicted to take longer (default 10)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clusters", default=";".join(CLUSTERS + [HETERO]), help="';'-separated cluster specs")
    ap.add_argument("--no-process", action="store_true", help="skip the fresh-process runs (cold start, RSS)")
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--child", metavar='[JOBS, "CLUSTER", "POLICY"]', help=argparse.SUPPRESS)
    ap.add_argument("--replot", action="store_true", help="redraw the plot and README block from bench/out/scale.json")
    ap.add_argument("--process-only", action="store_true",
                    help="rerun only the fresh-process runs (whole `fastblox run`, cold start, RSS) into bench/out/scale.json, "
                         "keeping its grid, then redraw")
    ap.add_argument("--profile", metavar="JOBS,CLUSTER,POLICY",
                    help="profile one run instead (e.g. 1000000,2801x8,fifo): cProfile of the whole simulate() call "
                         "written to bench/out/scale.prof, the top entries printed (the kernel is one entry: advance)")
    a = ap.parse_args()
    if a.profile:
        profile(*a.profile.split(","))
        return
    if a.replot or a.process_only:
        if not (OUT / "scale.json").exists():
            sys.exit(f"bench_scale: no {OUT / 'scale.json'} to redraw: run bench/bench_scale.py without "
                     "--replot/--process-only first")
        d = json.loads((OUT / "scale.json").read_text())
        if a.process_only:
            _, _, big = workloads()
            d["process"] = process_runs(big, d["scaled_cluster"])
            d["process_date"] = time.strftime("%Y-%m-%d")
            save("scale", d)
        plot(d)
        if not a.no_readme:
            update_readme("scale", readme_text(d))
        return
    if a.child:
        n, cl, p = json.loads(a.child)
        ws, _, _ = workloads()
        print(json.dumps(run_config(ws[int(n)], cl, p, a.repeats)))
        return
    print(f"bench_scale ({machine()})")
    load0 = os.getloadavg()[1]
    ws, rep, big = workloads()
    sc = scaled_cluster(rep)
    t0 = time.perf_counter()
    fastblox.simulate(ws[SIZES[0]].head(100), cluster="16x8")
    compile_s = time.perf_counter() - t0
    rows, skipped = grid(a.clusters.split(";"), a.budget_s, a.repeats)
    profs = [step_profile(ws[N_MAX], sc, p) for p in ("fifo", "las", "tiresias")]
    for p in profs:
        print(f"  per-step {p['policy']}: first tenth {p['first_tenth_us']:.2f} us, last tenth {p['last_tenth_us']:.2f} us, "
              f"exact {p['exact']}")
    d = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "scaled_cluster": sc, "repeats": a.repeats,
         "budget_s": a.budget_s, "compile_s": compile_s, "rows": rows, "skipped": skipped, "step_profiles": profs,
         "scale_report": {k: rep[k] for k in ("streams", "cluster_multiplier", "seed")}}
    d["loadavg_5min"] = [load0, os.getloadavg()[1]]
    if not a.no_process:
        d["process"] = process_runs(big, sc)
        po = d["process"]["out"]
        print(f"  process: warm {po['warm_all_s']} s, empty cache {po['empty_cache_s']:.1f} s, "
              f"peak RSS {po['warm_peak_rss_bytes'] / 2**20:.0f} MiB; --json warm {d['process']['json']['warm_cache_s']:.2f} s")
    save("scale", d)
    plot(d)
    t = readme_text(d)
    print(t)
    if not a.no_readme:
        update_readme("scale", t)


if __name__ == "__main__":
    main()
