"""Synergy's simulator (Mohan et al., OSDI'22; msr-fiddle/synergy, ``simulator/``, MIT), for
``--compat synergy``: servers with GPUs, CPUs, memory and storage bandwidth; jobs whose speed
depends on the CPUs and memory they get; Synergy's allocations on top of its four orderings.

How the simulator runs, and so how this module runs:

* **Rounds with leases.** A round every ``round_s`` (300) seconds, the first at 1 s (``--static``
  traces) or at the first arrival rounded up to a round. At each round every job's lease ends
  (all its resources come back), a job whose iterations are done finishes then (JCT = that time
  minus its arrival), the runnable jobs are ordered by the policy and given GPUs, CPUs, memory
  and storage bandwidth afresh; a job given resources is credited at once with
  ``floor(round_s / iteration time)`` iterations. The replay stops at the first round after
  which no job is runnable (jobs arriving later never run: ``schedule_event.py``).
* **Jobs** (``jobs/workload.py: add_synergy_profile``): a model's profile (``datasets/synergy/
  profiles.csv``, from ``simulator/models*/<model>_1.py``: the one ``ModelZoo`` loads for any GPU
  count) gives its ideal CPUs and memory per GPU, its ``speedup`` when it gets them over the
  GPU-proportional share, and its iteration time on the proportional share. A demand larger
  than a server is cut to the server and the speedup cut along a line in CPUs.
* **Allocations.** ``fair`` (``FIFO+fair``...): the GPU-proportional share of CPUs, memory and
  storage. ``greedy`` (``FIFO``...: Synergy-Greedy): the job's ideal demand or nothing this round.
  ``tune`` (``FIFO+tune``...: Synergy-Tune): the ideal demand, else the proportional share, else
  jobs on the least-used server go back to their proportional share to make room. GPUs are
  taken in cluster order from servers that still hold the per-GPU demand.
* **Orderings** (``schedulers/*_synergy_new.py``): FIFO (arrival), SRTF (remaining time at the
  job's speed), LAS (attained service x GPUs; only the jobs picked by GPU count in that order
  run, largest first under tune), FTF (finish-time fairness). A job that has not run for 1000
  hours goes first.

See docs/fidelity.md ("Synergy") for the quirks, each with its source line.
"""

from __future__ import annotations

import csv
import functools
import math
from pathlib import Path

import numpy as np

from .errors import ConfigError, SimulationError, TraceError, WorkloadError

ORDERINGS = ("fifo", "srtf", "las", "ftf")
#: the simulator's allocation of each scheduler suffix: "+fair", none (Greedy) and "+tune"
MODES = {"+fair": 0, "": 1, "+tune": 2}
#: the policies ``--compat synergy`` runs, in the simulator's names (runner.py; lower case)
POLICIES = tuple(o + m for o in ORDERINGS for m in MODES)
ROUND_S = 300.0
#: its default cluster (configs/default_cluster.ini): 16 servers of 8 GPUs, 24 CPUs, 500 GB
CLUSTER = "16x8"
CPUS_PER_SERVER, MEM_GB_PER_SERVER, SSPEED_PER_SERVER, NET_PER_SERVER = 24, 500, 500, 40
#: every job asks this storage bandwidth per GPU (models.Model: ``sspeed_per_gpu`` is never
#: overwritten by the profile, whose ``speed`` goes to an unused ``speed_per_gpu``)
SSPEED_PER_GPU = 62.5
#: policy options (``--policy-opt NAME=VALUE``) and their defaults
#: (``gaps``: 0 ends the replay at the first round with no runnable job, as the simulator does, so
#: jobs after a gap in arrivals never run; 1 waits for the next arrival's round. None: 0 on a
#: Synergy trace, 1 on any other trace, whose models are drawn: :func:`with_models`)
OPTIONS = {"cpus": CPUS_PER_SERVER, "mem_gb": MEM_GB_PER_SERVER, "profile": 0, "static": 0, "gaps": None}
#: the options whose value is 0 or 1
FLAGS = ("static", "gaps")


def data_dir() -> Path:
    from . import datasets  # the installed package data (fastblox.datasets)

    return Path(datasets.__file__).resolve().parent / "synergy"


@functools.lru_cache(maxsize=None)
def profiles() -> dict:
    """{(CPUs per GPU of the server the profile was measured for, model): (ideal CPUs per GPU,
    ideal memory GB per GPU, speedup, iteration time s, placement penalty)}."""
    out = {}
    with open(data_dir() / "profiles.csv", newline="") as f:
        for row in csv.DictReader(f):
            out[int(row["cpus_per_gpu_server"]), row["model"]] = (
                float(row["cpus_per_gpu"]), float(row["mem_gb_per_gpu"]), float(row["speedup"]),
                float(row["iter_time_s"]), float(row["placement_penalty"]))
    return out


def models() -> tuple:
    return tuple(sorted({m for _, m in profiles()}))


def profile_ratios() -> tuple:
    return tuple(sorted({r for r, _ in profiles()}))


def share_iter_s(names) -> np.ndarray:
    """Each model's iteration time (s) on the proportional share of 3 CPUs per GPU (a trace's
    ``iter_time_s``, whatever ``cpus=`` a run uses)."""
    return np.array([profiles()[3, m][3] for m in names])


def parse_options(opts: dict) -> dict:
    """``--policy-opt`` values of ``--compat synergy`` checked and completed with the defaults."""
    out = dict(OPTIONS)
    for k, v in opts.items():
        if k not in OPTIONS:
            raise ConfigError(f"--compat synergy: unknown option {k!r}; options: " + ", ".join(OPTIONS))
        try:
            x = float(v)
        except (TypeError, ValueError):
            x = float("nan")
        if not math.isfinite(x) or x != int(x) or x < 0 or (k in ("cpus", "mem_gb") and x < 1):
            raise ConfigError(f"--compat synergy: {k}={v!r} must be a whole number" + (" >= 1" if k in ("cpus", "mem_gb") else " >= 0"))
        out[k] = int(x)
    for k in FLAGS:
        if out[k] not in (0, 1, None):
            raise ConfigError(f"--compat synergy: {k}={out[k]} must be 0 or 1")
    return out


def options_text() -> str:
    """The options with their defaults, as ``fastblox parts`` lists them."""
    return ", ".join(f"{k}={'0 on a Synergy trace, else 1' if v is None else v}" for k, v in OPTIONS.items())


def check_cluster(cluster, opts: dict) -> tuple:
    """(servers, GPUs per server, profile ratio) of a cluster Synergy's simulator can run: servers
    all alike, one GPU type, no racks, and a shipped profile for its CPUs per GPU (or
    ``profile=R``). Raises ConfigError."""
    g = np.asarray(cluster.node_gpus)
    if len(cluster.gpu_types) > 1 or cluster.node_rack is not None or (g != g[0]).any():
        raise ConfigError(f"--compat synergy needs servers all alike, one GPU type and no racks (the simulator's "
                          f"configs: racks=1, servers_per_rack x gpus_per_server); not {cluster.spec!r}")
    ratio = opts["profile"] or opts["cpus"] / int(g[0])
    if ratio not in profile_ratios():
        raise ConfigError(f"--compat synergy: no profile measured for {opts['cpus']} CPUs on {int(g[0])} GPUs "
                          f"(CPUs per GPU {ratio:g}); Synergy ships profiles for "
                          + ", ".join(map(str, profile_ratios())) + " CPUs per GPU: set cpus= or profile=")
    return len(g), int(g[0]), int(ratio)


# ------------------------------------------------------------------------------------------ workload
def read_trace(path, name: str | None = None):
    """A Synergy replay trace (``job_id,model,arrival_s,iterations,gpus`` per line, no header:
    what ``runner.py --record_trace`` writes and ``--replay_trace`` reads) as a
    :class:`~fastblox.Workload` with a ``model`` column (``iter_time_s``: the model's on the
    proportional share of 3 CPUs per GPU). A bad line raises
    TraceError naming the file, line and column."""
    from .workload import Workload

    path = Path(path)
    try:
        with open(path, newline="") as f:
            rows = [r for r in csv.reader(f)]
    except OSError as e:
        raise TraceError(f"cannot read ({e.strerror})", path=path) from None
    ids, names, arr, iters, gpus = [], [], [], [], []
    known = models()
    cols = ("job_id", "model", "arrival_s", "iterations", "gpus")
    for i, row in enumerate(rows, start=1):
        if not any(x.strip() for x in row):
            continue
        if len(row) != 5:
            raise TraceError(f"{len(row)} fields; a Synergy trace line has 5 ({','.join(cols)})", path=path, row=i)
        m = row[1].strip()
        if m not in known:  # (the simulator silently runs an unknown model as alexnet: model_zoo.py)
            raise TraceError(f"unknown model {m!r} (Synergy's zoo: {', '.join(known)})", path=path, row=i,
                             column="model")
        ids.append(_num(row[0], path, i, "job_id", whole=True, low=0))
        names.append(m)
        arr.append(_num(row[2], path, i, "arrival_s", whole=False, low=0))
        iters.append(_num(row[3], path, i, "iterations", whole=True, low=1))
        gpus.append(_num(row[4], path, i, "gpus", whole=True, low=1))
    if not ids:
        raise TraceError("no jobs", path=path)
    it = share_iter_s(names)
    return Workload.from_arrays(arr, gpus, iterations=iters, iter_time_s=it, job_id=ids, name=name or path.stem,
                                model=np.array(names, dtype=object))


def is_synergy_trace(path) -> bool:
    """Whether ``path``'s first line is a Synergy trace line (5 fields, a model of the zoo second)."""
    from .traces import _core

    if Path(path).name.lower().endswith((".parquet", ".pq")):
        return False
    cells = _core.first_line(_core.read_bytes(path)).split(",")
    return len(cells) == 5 and cells[1].strip() in models()


def read_any(path, format: str | None = None, on_bad_rows: str = "error", max_gpus: int | None = None):
    """A Synergy trace (:func:`read_trace`) or, with ``format`` or when the file is not one, any
    trace fastblox reads (:func:`fastblox.traces.read_trace`), whose jobs get their models when
    they run (:func:`with_models`)."""
    if format is None and is_synergy_trace(path):
        return read_trace(path)
    from .traces import read_trace as read_generic

    return read_generic(path, format=format, on_bad_rows=on_bad_rows, max_gpus=max_gpus)


def with_models(workload, seed: int):
    """``workload`` (any trace: run times, no models of Synergy's zoo) with a model of the zoo for every job,
    drawn uniformly (``numpy.random.default_rng(seed)``), and its iterations: its run time over
    the model's iteration time on the proportional share of 3 CPUs per GPU (rounded down, at least
    one). This is how Synergy's simulator turns a Philly job's run time into iterations
    (``jobs/workload.py``: ``add_synergy_profile``, ``iter_is_duration``), with a model drawn as its
    ``ModelAssignment.RANDOM`` does (its default, ``RUNNABLE``, balances image, language and speech
    models over the jobs running at each arrival; here the draw does not depend on the run). The
    3-CPU iteration time for every ``cpus=``, so the same trace is the same work at every ratio."""
    import dataclasses

    zoo = np.array(models(), dtype=object)
    names = zoo[np.random.default_rng(seed).integers(0, len(zoo), len(workload))]
    it = share_iter_s(names)
    iters = np.maximum(1.0, np.floor(workload.duration_s / it))
    return dataclasses.replace(workload, iterations=iters, iter_time_s=it, duration_s=iters * it,
                               extra={**workload.extra, "model": names})


def _num(v, path, i, col, whole, low):
    try:
        x = float(v)
    except ValueError:
        x = float("nan")
    if not math.isfinite(x) or x < low or (whole and x != int(x)):
        raise TraceError(f"{v.strip()!r} is not " + ("a whole number" if whole else "a number") + f" >= {low}",
                         path=path, row=i, column=col)
    return int(x) if whole else x


def job_setup(models_, gpus, servers: int, per_server: int, opts: dict, ratio: int) -> dict:
    """Each job's demand vector (GPUs, CPUs, memory GB, storage MB/s, 0), speedup, iteration time
    and placement penalty as ``Workload.add_synergy_profile`` sets them (demands cut to a server)."""
    size = [per_server, opts["cpus"], opts["mem_gb"], SSPEED_PER_SERVER]  # per_server_size
    n = len(gpus)
    demand = np.zeros((n, 5))
    speedup, iter_s, pen = np.empty(n), np.empty(n), np.empty(n)
    for j in range(n):
        cpu_pg, mem_pg, sp, it, pe = profiles()[ratio, models_[j]]
        g = int(gpus[j])
        d = [float(g), g * cpu_pg, g * mem_pg, g * SSPEED_PER_GPU]
        update = False
        for k in (1, 2, 3):
            if d[k] > size[k]:
                d[k] = size[k]
                update = True
                if g > size[0]:
                    d[k] = g * (size[k] / size[0])
                    sp, update = 1.0, False
        if update:
            sp = _cut_speedup(sp, g, cpu_pg, mem_pg, d, size)
        demand[j, :4] = d
        speedup[j], iter_s[j], pen[j] = sp, it, pe
    return dict(demand=demand, speedup=speedup, iter_s=iter_s, penalty=pen)


def _cut_speedup(sp, g, cpu_pg, mem_pg, d, size) -> float:
    """The speedup of a demand cut to a server: on the line from the proportional share (1) to the
    ideal demand (``sp``) in CPUs (workload.py). Where the CPU demand equals the proportional
    share the simulator divides by zero (ValueError); here the line runs in memory instead."""
    fair_cpu = g * (size[1] / size[0])
    cpu_diff = g * cpu_pg - fair_cpu
    if cpu_diff != 0:
        return 1 + (sp - 1) / cpu_diff * (d[1] - fair_cpu)
    fair_mem = g * (size[2] / size[0])
    mem_diff = g * mem_pg - fair_mem
    return 1 + (sp - 1) / mem_diff * (d[2] - fair_mem) if mem_diff > 0 else sp


def check_placeable(demand, gpus, models_, servers: int, per_server: int, cap) -> None:
    """Synergy-Greedy waits for a job's ideal demand: refuse a job whose per-GPU demand does not fit
    even on the empty cluster (the simulator would wait for it forever). That happens when a
    demand cut to a server does not divide evenly: 3 GPUs of 20/3 CPUs each sum past 20 in floating
    point. Raises WorkloadError naming the job."""
    from .reference.synergy import Cluster as Twin

    seen = set()
    for j in range(len(gpus)):
        key = (tuple(demand[j]), int(gpus[j]))
        if key in seen:
            continue
        seen.add(key)
        n = int(gpus[j])
        d = [x / demand[j][0] for x in demand[j]]
        if Twin(servers, per_server, list(cap), ROUND_S).place(list(range(servers * per_server)), n, d)[0] is None:
            raise WorkloadError(f"job {j} ({models_[j]}, {n} GPUs) never fits under Synergy-Greedy: its demand per GPU "
                                f"({d[1]:.6g} CPUs, {d[2]:.6g} GB) does not fit {n} times on an empty cluster of "
                                f"{servers} x {per_server} GPUs (the simulator would wait for it forever); use +tune or "
                                "+fair")


def split_policy(policy: str) -> tuple:
    """(ordering code 0-3, allocation code 0 fair / 1 greedy / 2 tune) of a policy name."""
    if policy not in POLICIES:
        raise ConfigError(f"--compat synergy policies: {', '.join(POLICIES)}; not {policy!r}")
    base, plus, mode = policy.partition("+")
    return ORDERINGS.index(base), MODES[plus + mode]


# ------------------------------------------------------------------------------------------ run
def first_round_s(submit_s, static: bool, round_s: float) -> float:
    """The first ScheduleEvent: 1 s for a static trace, else the first arrival rounded up to a round."""
    return 1.0 if static else math.ceil(float(np.min(submit_s)) / round_s) * round_s


def simulate(models_, submit_s, iterations, gpus, policy: str, servers: int = 16, per_server: int = 8,
             opts: dict | None = None, round_s: float = ROUND_S, engine: str = "kernel",
             max_rounds: int = 50_000_000, theta: float = 0.0) -> dict:
    """Replay jobs (sorted by ``submit_s``) as Synergy's simulator does with ``policy`` (e.g.
    ``"fifo+tune"``) on ``servers`` servers of ``per_server`` GPUs, admitting arrived jobs with the
    load threshold ``theta`` (0: all, as the simulator; ``--admission load:THETA``). ``engine="reference"`` runs
    the plain-Python twin (``finish_s`` and ``speedup`` only). Returns ``finish_s`` and ``start_s`` (NaN: never),
    ``attained_s`` (seconds given GPUs), ``rounds``, ``end_s`` and the jobs' ``speedup``."""
    opts = parse_options(opts or {})
    order, mode = split_policy(policy)
    from .cluster import Cluster

    _, _, ratio = check_cluster(Cluster.parse(f"{servers}x{per_server}"), opts)
    submit = np.asarray(submit_s, dtype=np.float64)
    if (np.diff(submit) < 0).any():
        raise WorkloadError("submit_s must be sorted (a Workload is)")
    gpus = np.asarray(gpus, dtype=np.int64)
    if (gpus > servers * per_server).any():
        j = int(np.argmax(gpus))
        raise WorkloadError(f"job {j} asks for {gpus[j]} GPUs; the cluster has {servers * per_server} (the "
                            f"simulator would wait for it forever)")
    js = job_setup(list(models_), gpus, servers, per_server, opts, ratio)
    cap = np.array([per_server, opts["cpus"], opts["mem_gb"], SSPEED_PER_SERVER, NET_PER_SERVER], dtype=np.float64)
    if mode == MODES[""]:
        check_placeable(js["demand"], gpus, models_, servers, per_server, cap)
    iters = np.asarray(iterations, dtype=np.int64)
    t0 = first_round_s(submit, bool(opts["static"]), round_s)
    if engine == "reference":
        from .reference import synergy as ref

        fin = np.array(ref.simulate(submit, iters, gpus, js["demand"], js["speedup"], js["iter_s"], js["penalty"],
                                    servers, per_server, list(cap), order, mode, round_s, bool(opts["static"]),
                                    max_rounds, wait_gaps=bool(opts["gaps"]), theta=float(theta)))
        return dict(finish_s=fin, start_s=np.full(len(fin), np.nan), rounds=-1, speedup=js["speedup"])
    from .kernels import synergy as k

    n = len(submit)
    fin, first, att, out = np.empty(n), np.empty(n), np.empty(n), np.zeros(3, np.int64)
    k.run_synergy(submit, iters, gpus, js["demand"], js["speedup"], js["iter_s"], js["penalty"], int(servers),
                  int(per_server), cap, float(round_s), float(t0), int(order), int(mode), int(max_rounds),
                  bool(opts["gaps"]), float(theta), fin, first, att, out)
    if out[0] == k.TUNE_FAILED:
        raise SimulationError(f"Synergy-Tune cannot place job {int(out[2])} even after bringing its peers back to "
                              "their share (the simulator exits here: cluster.py _tune)")
    if out[0] == k.ROUND_LIMIT:
        raise SimulationError(f"the replay did not end in {max_rounds} rounds")
    return dict(finish_s=fin, start_s=first, attained_s=att, rounds=int(out[1]),
                end_s=float(np.nanmax(fin)) if np.isfinite(fin).any() else float(t0), speedup=js["speedup"])


def warm() -> float:
    """Load (or compile) the kernel by a one-job replay; returns the seconds it took."""
    import time

    t0 = time.perf_counter()
    simulate(["gnmt"], [0.0], [1], [1], "fifo+tune", 1, 8)
    return time.perf_counter() - t0


def run(workload, r, cluster, tracked, sim_timer):
    """``--compat synergy``: replay ``workload`` (a Synergy trace: :func:`read_trace`) with
    resolved spec ``r`` and build the run's :class:`~fastblox.results.Result`."""
    from .parts import Admission
    from .results import Result, _jobs_table, _summary
    from .slices import mark

    opts = parse_options(dict(r.policy_opts))
    servers, per_server, ratio = check_cluster(cluster, opts)
    drawn = not set(workload.extra.get("model", [None])) <= set(models())  # (a Gavel model is not Synergy's)
    if drawn:
        workload = with_models(workload, r.seed)
    if opts["gaps"] is None:
        opts["gaps"] = int(drawn)
    compile_s = warm()
    with sim_timer() as t:
        out = simulate(workload.extra["model"], workload.submit_s, workload.iterations, workload.num_gpus, r.policy,
                       servers, per_server, opts, r.round_s, theta=Admission.parse(r.admission).theta)
    finish = np.where(np.isnan(out["finish_s"]), -1.0, out["finish_s"])
    first = np.where(np.isnan(out["start_s"]), -1.0, out["start_s"])
    att = out["attained_s"]
    att_gpu = att * workload.num_gpus
    none = np.zeros(len(workload), dtype=np.int64)
    model = {"model": [str(m) for m in workload.extra["model"]]}
    jobs = lambda: _jobs_table(workload, first, finish, none, att, att_gpu, tracked, extra=model)  # noqa: E731
    summ = _summary(workload, cluster, tracked, finish, first, none, att_gpu, float(workload.submit_s.min()),
                    out["end_s"], t.seconds, compile_s)
    summ["engine"] = (f"Synergy's simulator, {r.policy} (--compat synergy: {opts['cpus']} CPUs, {opts['mem_gb']} GB "
                      f"a server; profiles for {ratio} CPUs per GPU)")
    if drawn:
        summ["engine"] += f"; each job's model drawn uniformly from Synergy's zoo (seed {r.seed})"
    summ["num_rounds"] = out["rounds"]
    left = int((finish < 0).sum())
    if left:
        summ["num_dropped"] = left
        summ["dropped_job_ids"] = [int(x) for x in workload.job_id[finish < 0]]
    mark(summ, None)
    return Result(jobs, summ, r.as_dict())
