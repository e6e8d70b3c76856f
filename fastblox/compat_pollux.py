"""The Pollux simulator's cluster and baseline policies, for ``--compat pollux``
(petuum/adaptdl, branch ``osdi21-artifact``, ``simulator/simulator.py``, ``tiresias.py``,
``optimus.py``), on the elastic job model of :mod:`fastblox.elastic`.

How the simulator runs, and so how this module runs:

* **Fixed intervals.** Every ``interval`` seconds (60) each job first advances by the interval
  on the allocation it holds (crossing epochs at whole seconds: the time to an epoch's end is
  rounded to a second), then every job submitted by then and not finished is handed to the
  policy, which returns GPUs by node for each; a job whose GPUs changed restarts (30 s).
* **Jobs.** ``tiresias``: the workload's ``num_replicas`` GPUs (a gang) and ``batch_size``;
  ``optimus``: the workload's ``batch_size`` on as many GPUs as the policy gives (at most
  ``batch_size // smallest per-GPU batch``; ncf 1); ``pollux``: only the application (ncf's batch
  fixed at 32,768 on one GPU): the job picks its batch size from the goodput model it fits to
  what it has run, and may get up to twice the GPUs it has run on.
* **tiresias** (Tiresias+TunedJobs): two queues in arrival order, a job moves down after 16
  GPU-hours of service (counted in whole seconds between decisions, times its GPUs); every
  interval the queues are walked and each job that fits in the GPUs left runs (running jobs that
  no longer fit are preempted); new gangs go on the nodes with the most free GPUs.
* **pollux**: see :class:`PolluxPolicy` and :class:`ElasticJob` (the batch size adapts; the
  search differs from Pollux's genetic algorithm).
* **optimus** (Optimus+Oracle): every job gets one GPU in arrival order while GPUs last; the rest
  go one at a time to the job whose (true) step time drops most times its remaining iterations; a
  job keeps its GPUs if their number is unchanged; the others are placed smallest first on the
  nodes with the most free GPUs.
"""

from __future__ import annotations

import collections
import csv
import functools
from pathlib import Path

import numpy as np

from . import elastic
from .errors import ConfigError, TraceError, WorkloadError

#: the policies ``--compat pollux`` runs (the simulator's names); the first two: :func:`simulate`
POLICIES = ("tiresias", "optimus", "pollux")
BASELINES = POLICIES[:2]
INTERVAL_S = 60
NODES, GPUS_PER_NODE = 16, 4
TIRESIAS_THRESHOLD_GPU_S = 3600 * 16  # tiresias.py: _queue_threshold
WORKLOAD_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")


# ------------------------------------------------------------------------------------------ workload
def read_workload(path, name: str | None = None):
    """A Pollux workload CSV (``name,time,application,num_replicas,batch_size``) as a
    :class:`~fastblox.Workload` with ``model`` (the application), ``batch_size`` and ``elastic``
    (all true: :mod:`fastblox.mixed`) columns;
    ``duration_s`` is each job's time alone on its ``num_replicas`` GPUs at its batch size.
    A bad row raises TraceError naming the file, row (the header is row 1) and column."""
    from .workload import Workload

    path = Path(path)
    rows, head = read_csv_rows(path)
    for c in WORKLOAD_COLUMNS:
        if c not in head:
            raise TraceError(f"missing column (a Pollux workload has {', '.join(WORKLOAD_COLUMNS)})", path=path,
                             column=c)
    col = {c: head.index(c) for c in WORKLOAD_COLUMNS}
    names, submit, apps, reps, bsz = [], [], [], [], []
    for i, row in enumerate(rows[1:], start=2):
        if not any(x.strip() for x in row):
            continue
        if len(row) != len(head):
            raise TraceError(f"{len(row)} fields, the header has {len(head)}", path=path, row=i)
        app = row[col["application"]].strip()
        if app not in elastic.APPLICATIONS:
            raise TraceError(f"unknown application {app!r} (the Pollux simulator's: "
                             f"{', '.join(sorted(elastic.APPLICATIONS))})", path=path, row=i, column="application")
        names.append(row[col["name"]].strip())
        apps.append(app)
        submit.append(parse_number(row[col["time"]].strip(), path, i, "time", whole=False))
        reps.append(parse_number(row[col["num_replicas"]].strip(), path, i, "num_replicas"))
        bsz.append(parse_number(row[col["batch_size"]].strip(), path, i, "batch_size"))
        _check_job(app, reps[-1], bsz[-1], path, i)
    if not names:
        raise TraceError("no jobs", path=path)
    dur = [elastic.isolated_run_s(a, b, r) for a, b, r in zip(apps, bsz, reps)]
    return Workload.from_arrays(submit, reps, duration_s=dur, name=name or path.stem, elastic=np.ones(len(apps), bool),
                                model=np.array(apps, dtype=object),
                                batch_size=np.array(bsz, dtype=np.int64), source_id=np.array(names, dtype=object))


def read_csv_rows(path: Path) -> tuple[list, list]:
    """The rows of a workload CSV and its stripped header (a Pollux or a mixed workload); a file
    that cannot be read, is not UTF-8 text or not CSV, or is empty raises TraceError naming it."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        raise TraceError(f"cannot read ({e.strerror})", path=path) from None
    except UnicodeDecodeError as e:
        raise TraceError(f"not UTF-8 text (byte {e.start}: {e.object[e.start:e.start + 1]!r})", path=path) from None
    except csv.Error as e:
        raise TraceError(f"not a CSV file ({e})", path=path) from None
    if not rows:
        raise TraceError("empty file", path=path)
    return rows, [h.strip() for h in rows[0]]


def parse_number(v: str, path, i, c, whole=True) -> float:
    """Cell ``v`` of row ``i``, column ``c``: a whole number >= 1 (``whole``) or a number of
    seconds >= 0, else TraceError naming the file, row and column."""
    try:
        x = float(v)
    except ValueError:
        x = float("nan")
    if not np.isfinite(x) or x < 0 or (whole and (x != int(x) or x < 1)):
        what = "a whole number >= 1" if whole else "a number of seconds >= 0"
        raise TraceError(f"{v!r} is not {what}", path=path, row=i, column=c)
    return int(x) if whole else x


def check_batch_size(app, bsz, path, i) -> None:
    """An application's batch size within its profile's validated range, else TraceError."""
    pr = elastic.profile(app)
    if not pr.init_batch_size <= bsz <= pr.max_batch_size:
        raise TraceError(f"{app} batch size {bsz} is outside its validated {pr.init_batch_size}..{pr.max_batch_size}",
                         path=path, row=i, column="batch_size")


def _check_job(app, reps, bsz, path, i) -> None:
    check_batch_size(app, bsz, path, i)
    if reps > NODES * GPUS_PER_NODE:
        raise TraceError(f"{reps} GPUs: the simulator's cluster has {NODES * GPUS_PER_NODE}", path=path, row=i,
                         column="num_replicas")


def job_table(workload) -> tuple:
    """(application names, batch sizes, GPUs) of a workload built by :func:`read_workload`
    (or any with ``model`` and ``batch_size`` columns of Pollux applications)."""
    ex = workload.extra
    for c in ("model", "batch_size"):
        if c not in ex:
            raise WorkloadError(f"--compat pollux needs a Pollux workload (its CSV: {','.join(WORKLOAD_COLUMNS)}); "
                                f"workload {workload.name!r} has no {c!r} column")
    apps = [str(a) for a in np.asarray(ex["model"]).tolist()]
    bad = sorted({a for a in apps if a not in elastic.APPLICATIONS})
    if bad:
        raise WorkloadError(f"unknown application(s) {', '.join(bad)} in workload {workload.name!r}; the Pollux "
                            f"simulator's: {', '.join(sorted(elastic.APPLICATIONS))}")
    return apps, np.asarray(ex["batch_size"], dtype=np.int64), np.asarray(workload.num_gpus, dtype=np.int64)


# ------------------------------------------------------------------------------------------ jobs
class Jobs:
    """Every job's state as arrays (index = workload row); :meth:`advance` moves them all on."""

    def __init__(self, apps, batch_size, submit_s, work_s=None, restart_s: float = elastic.RESTART_S):
        self.n = n = len(apps)
        self.restart_s = float(restart_s)  # (stopped this long at every (re-)allocation)
        self.apps = apps
        # (a rigid row, application "": ``work_s`` seconds on its gang, one "epoch" of that many
        # seconds at one unit of progress a second; fastblox.mixed runs them beside elastic rows)
        self.rigid = np.array([not a for a in apps], dtype=bool)
        self.prof = [elastic.profile(a) if a else None for a in apps]
        self.target_bs = np.asarray(batch_size, dtype=np.int64)
        self.submit = np.asarray(submit_s, dtype=np.float64)
        emax = max((p.max_epochs for p in self.prof if p is not None), default=1)
        self.last_epoch = np.array([0 if p is None else p.max_epochs - 1 for p in self.prof])  # done when passed
        self.prog = np.full((n, emax + 1), np.inf)
        for j, p in enumerate(self.prof):
            if p is None:
                self.prog[j, :2] = 0.0, float(work_s[j])
            else:
                self.prog[j, :p.max_epochs + 1] = p.epoch_progress
        self.gains = np.ones((n, emax))
        self.placement = [()] * n
        self.nrep = np.zeros(n, dtype=np.int64)
        self.step_s = np.ones(n)
        self.epoch = np.zeros(n, dtype=np.int64)
        self.progress = np.zeros(n)
        self.rescale = np.zeros(n)
        self.finish = np.full(n, -1.0)
        self.first = np.full(n, -1.0)
        self.attained_gpu = np.zeros(n)
        self.restarts = np.zeros(n, dtype=np.int64)
        self.preempted = np.zeros(n, dtype=np.int64)

    def reallocate(self, j: int, placement: tuple, now: float) -> None:
        """Job ``j`` now runs on ``placement`` (GPUs per node; empty: suspended)."""
        if not placement:
            self.placement[j], self.nrep[j] = (), 0
            self.preempted[j] += 1
            return
        p = self.prof[j]
        r = sum(placement)
        self.placement[j], self.nrep[j] = tuple(placement), r
        if p is not None:  # (a rigid row keeps a step of 1 s and a gain of 1: a second of work a second)
            atomic, accum = elastic.fixed_batch_config(self.target_bs[j], r, p.init_batch_size, p.max_batch_size,
                                                       p.max_local_bsz)
            self.step_s[j] = p.step_times([placement], [atomic], np.array([accum]))[0]
            self.gains[j, :p.max_epochs] = p.gains(r * atomic * (accum + 1))[0]
        self.rescale[j] = self.restart_s
        if self.first[j] < 0:
            self.first[j] = now
        else:
            self.restarts[j] += 1

    def advance(self, t0: float, secs: float) -> None:
        """Every job's progress over ``[t0, t0 + secs)`` on the placements they hold."""
        on = (self.nrep > 0) & (self.finish < 0)
        rem = np.where(on, float(secs), 0.0)
        d = np.minimum(self.rescale, rem)
        self.attained_gpu += d * self.nrep
        self.rescale -= d
        rem -= d
        used = d
        while True:
            idx = np.flatnonzero((rem > 0) & (self.finish < 0) & on)
            if not len(idx):
                return
            ep = self.epoch[idx]
            good = self.gains[idx, ep] / self.step_s[idx]
            nxt = self.prog[idx, ep + 1]
            fits = self.progress[idx] + good * rem[idx] < nxt
            a = idx[fits]
            self.progress[a] += good[fits] * rem[a]
            self.attained_gpu[a] += rem[a] * self.nrep[a]
            used[a] += rem[a]
            rem[a] = 0.0
            b, gb, nb = idx[~fits], good[~fits], nxt[~fits]
            self.epoch[b] += 1
            delta = (nb - self.progress[b]) / gb
            # (an epoch ends at a whole second, half to even as Python's round; a rigid job at its exact time)
            delta = np.where(self.rigid[b], delta, np.round(delta))
            done = self.epoch[b] > self.last_epoch[b]
            self.finish[b[done]] = t0 + used[b[done]] + delta[done]
            self.progress[b] = nb
            self.attained_gpu[b] += delta * self.nrep[b]
            used[b] += delta
            rem[b] -= delta


# ------------------------------------------------------------------------------------------ placement
def place(need: dict, order, free: collections.Counter) -> dict:
    """Gangs for the jobs of ``order`` (``need[j]`` GPUs each), each filled from the node with the
    most free GPUs (the lowest index among equals), as the simulator's policies place them."""
    out = {}
    for j in order:
        alloc = []
        while len(alloc) < need[j]:
            node, count = max(free.items(), key=lambda kv: kv[1])
            num = min(count, need[j] - len(alloc))
            if num <= 0:
                raise RuntimeError("the policy placed more GPUs than the cluster has")
            alloc.extend([node] * num)
            free[node] -= num
        out[j] = alloc
    return out


def free_gpus(allocations: dict, nodes: int, per_node: int) -> collections.Counter:
    used = collections.Counter(n for a in allocations.values() for n in a)
    return collections.Counter({k: per_node - used[k] for k in range(nodes) if per_node - used[k] > 0})


def to_placement(alloc) -> tuple:
    """GPUs per node of an allocation (a node index per GPU, a node's GPUs adjacent)."""
    out = []
    for i, node in enumerate(alloc):
        if i == 0 or node != alloc[i - 1]:
            out.append(1)
        else:
            out[-1] += 1
    return tuple(out)


# ------------------------------------------------------------------------------------------ policies
class Tiresias:
    """``tiresias.py``'s ``TiresiasPolicy`` (two queues, no starvation promotion)."""

    def __init__(self, jobs: Jobs, num_gpus: np.ndarray, nodes: int, per_node: int, placer=None):
        self.jobs, self.gpus, self.nodes, self.per_node = jobs, num_gpus, nodes, per_node
        self.place = placer or place  # (fastblox.mixed: a native placement, which may leave a gang waiting)
        self.q0, self.q1 = [], []
        self.running = {}
        self.last_check = collections.Counter()
        self.executed = collections.Counter()

    def optimize(self, active: list, prev: dict, now: float) -> dict:
        t = int(now)
        act = set(active)
        self.q0 = [j for j in self.q0 if j in act]
        self.q1 = [j for j in self.q1 if j in act]
        self.running = {j: v for j, v in self.running.items() if j in act}
        alloc = {j: v for j, v in prev.items() if j in act}
        for j in active:
            if j not in self.running:
                self.running[j] = False
                self.q0.append(j)
        for j in active:
            dt = int(t - self.last_check[j])
            self.last_check[j] = t
            if self.running[j]:
                self.executed[j] = int(self.executed[j] + dt)
                if j in self.q0 and int(self.executed[j] * self.gpus[j]) >= TIRESIAS_THRESHOLD_GPU_S:
                    self.q0.remove(j)
                    self.q1.append(j)
        left = self.nodes * self.per_node
        for j in self.q0 + self.q1:
            if self.gpus[j] <= left:
                self.running[j] = True
                left -= self.gpus[j]
            else:
                self.running[j] = False
                alloc.pop(j, None)
        start = [j for j in self.q0 + self.q1 if self.running[j] and not alloc.get(j)]
        alloc.update(self.place({j: int(self.gpus[j]) for j in start}, start,
                                free_gpus(alloc, self.nodes, self.per_node)))
        for j in start:
            if j not in alloc:  # (not placed: it waits, and gets no service)
                self.running[j] = False
        return alloc


class Optimus:
    """``optimus.py``'s ``OptimusPolicy`` with the simulator's oracle step times."""

    def __init__(self, jobs: Jobs, num_gpus: np.ndarray, nodes: int, per_node: int, placer=None):
        self.jobs, self.nodes, self.per_node = jobs, nodes, per_node
        self.place = placer or place  # (fastblox.mixed: a native placement, which may leave a job waiting)
        # (a rigid row of fastblox.mixed: its gang, given whole in the first pass or not at all)
        self.max_reps = np.array([g if p is None else 1 if a == "ncf" else int(b // p.min_local_bsz)
                                  for a, b, p, g in zip(jobs.apps, jobs.target_bs, jobs.prof, num_gpus)], dtype=np.int64)
        self._step = {}

    def step_time(self, j: int, r: int) -> float:
        """Optimus' predicted seconds per step of job ``j`` on ``r`` packed GPUs (the true profile)."""
        key = (self.jobs.apps[j], int(self.jobs.target_bs[j]), r)
        if key not in self._step:
            p = self.jobs.prof[j]
            atomic, accum = elastic.fixed_batch_config(key[1], r, p.init_batch_size, p.max_batch_size,
                                                       p.max_local_bsz, single_accum="always")
            self._step[key] = float(p.step_times([elastic.packed(r, self.per_node)], [atomic], np.array([accum]))[0])
        return self._step[key]

    def _remaining(self, j: int) -> float:
        jobs, p = self.jobs, self.jobs.prof[j]
        if p is None:
            return 0.0  # (a rigid job: no more GPUs than its gang, so no gain)
        last, ep = p.max_epochs - 1, int(jobs.epoch[j])
        if last <= ep:
            return 1.0
        b = jobs.target_bs[j]
        return float(p.iterations(b, last) - p.iterations(b, ep))

    def _gain(self, j: int, r: int, left: int, remaining: float) -> float:
        if r + 1 > self.max_reps[j] or left < 1 or self.jobs.rigid[j]:
            return 0.0
        return (self.step_time(j, r) - self.step_time(j, r + 1)) * remaining

    def optimize(self, active: list, prev: dict, now: float) -> dict:
        remaining = {j: self._remaining(j) for j in active}
        left = self.nodes * self.per_node
        reps, gain = {}, {}
        for j in active:
            first = int(self.max_reps[j]) if self.jobs.rigid[j] else 1  # (a rigid job: its gang or nothing)
            if left < first:
                reps[j], gain[j] = 0, 0.0
                continue
            reps[j] = first
            left -= first
            gain[j] = self._gain(j, first, left, remaining[j])
        while left > 0 and max(gain.values()) > 0:
            j = max(gain, key=lambda k: gain[k])
            reps[j] += 1
            gain[j] = self._gain(j, reps[j], left, remaining[j])
            left -= 1
        alloc = {j: v for j, v in prev.items() if j in reps and len(v) == reps[j]}
        order = [j for j in sorted(active, key=lambda k: reps[k]) if reps[j] > 0 and not alloc.get(j)]
        alloc.update(self.place(reps, order, free_gpus(alloc, self.nodes, self.per_node)))
        return alloc


# ------------------------------------------------------------------------------------------ run
def simulate(apps, batch_size, num_gpus, submit_s, policy: str, interval_s: float = INTERVAL_S, nodes: int = NODES,
             per_node: int = GPUS_PER_NODE, max_intervals: int = 1_000_000, gate=None) -> dict:
    """Replay the jobs (workload order) as the Pollux simulator does with ``policy``. Returns
    per-job ``start_s`` (first allocation), ``finish_s``, ``preemptions``, ``restarts``,
    ``attained_gpu_s`` (GPU-seconds held, restarts included) and ``end_s``. ``gate``
    (``fastblox.mixed.Gate``; None: every submitted job, as the simulator): the jobs let in."""
    if policy not in BASELINES:
        raise ConfigError(f"the Pollux simulator's fixed-batch policies are {', '.join(BASELINES)} (pollux: "
                          f"simulate_pollux); not {policy!r}")
    jobs = Jobs(apps, batch_size, submit_s)
    gpus = np.asarray(num_gpus, dtype=np.int64)
    pol = (Tiresias if policy == "tiresias" else Optimus)(jobs, gpus, nodes, per_node)
    return run_fixed(jobs, pol, interval_s, max_intervals, gate)


def run_fixed(jobs: Jobs, pol, interval_s: float, max_intervals: int, gate=None) -> dict:
    """The simulator's loop under a fixed-batch policy (Tiresias, Optimus): every interval every
    job advances, then the policy allocates the jobs submitted and unfinished (workload order).
    ``gate`` (``fastblox.mixed.Gate``; None: every submitted job): the jobs let in so far."""
    now, alloc = 0.0, {}
    admitted = np.zeros(jobs.n, dtype=bool)
    for _ in range(max_intervals):
        if (jobs.finish >= 0).all():
            break
        was = jobs.finish < 0
        jobs.advance(now, interval_s)
        now += interval_s
        if gate is None:
            admitted = jobs.submit <= now
        else:
            admitted[gate.step(now, np.flatnonzero(was & (jobs.finish >= 0)).tolist())] = True
        active = np.flatnonzero(admitted & (jobs.finish < 0)).tolist()
        if not active:
            continue
        alloc = {j: v for j, v in alloc.items() if j in set(active)}
        new = pol.optimize(active, alloc, now)
        if not any(new.values()) and (jobs.submit <= now).all():
            _stalled(pol, active, jobs)
        for j in active:
            if new.get(j) != alloc.get(j):
                jobs.reallocate(j, to_placement(new.get(j, [])), now)
        alloc = new
    else:
        raise RuntimeError(f"the replay did not finish in {max_intervals} intervals")
    return {"start_s": jobs.first, "finish_s": jobs.finish, "preemptions": jobs.preempted, "restarts": jobs.restarts,
            "attained_gpu_s": jobs.attained_gpu, "end_s": float(jobs.finish.max())}


def _stalled(pol, active: list, jobs: Jobs) -> None:
    """Raise SimulationError: the policy gave no job GPUs on an idle cluster and none arrives
    later, so nothing will ever change (only a native placement, ``fastblox.mixed``, refuses gangs)."""
    from .errors import SimulationError

    kind = getattr(pol.place, "kind", "the simulator's")
    raise SimulationError(f"--placement {kind} can never place the waiting jobs on this cluster (the first: workload "
                          f"row {active[0]}), and no job arrives later; use another placement (or none: the "
                          "simulator's packing)")


def check_cluster(cluster) -> tuple:
    """(nodes, GPUs per node) of a cluster the simulator can run: nodes of 1 to 4 GPUs of one type
    (its profiles measure up to 4 GPUs a node), all alike, no racks. Raises ConfigError."""
    g = np.asarray(cluster.node_gpus)
    if len(cluster.gpu_types) > 1 or cluster.node_rack is not None or (g != g[0]).any() or not 1 <= g[0] <= 4:
        raise ConfigError(f"--compat pollux needs nodes of 1-4 GPUs, all alike, one GPU type and no racks (the "
                          f"simulator's: {NODES}x{GPUS_PER_NODE}); not {cluster.spec!r}")
    return len(g), int(g[0])


def run(workload, r, cluster, tracked, sim_timer):
    """``--compat pollux``: replay ``workload`` (a Pollux workload: :func:`read_workload`) with
    resolved spec ``r`` and build the run's :class:`~fastblox.results.Result`."""
    from .mixed import admission_gate
    from .results import Result, _jobs_table, _summary
    from .slices import mark

    nodes, per_node = check_cluster(cluster)
    apps, bs, gpus = job_table(workload)
    if r.policy == "tiresias" and (gpus > nodes * per_node).any():
        raise WorkloadError(f"a job asks for {int(gpus.max())} GPUs; the cluster has {nodes * per_node}")
    gate = admission_gate(r.admission, workload.submit_s, gpus, nodes * per_node)
    with sim_timer() as t:
        if r.policy == "pollux":
            out = simulate_pollux(apps, workload.submit_s, r.round_s, nodes, per_node, gate=gate)
        else:
            out = simulate(apps, bs, gpus, workload.submit_s, r.policy, r.round_s, nodes, per_node, gate=gate)
    finish, first = out["finish_s"], out["start_s"]
    att_gpu = out["attained_gpu_s"]
    # (an elastic job's GPUs change over its run: seconds of service are its GPU-seconds over its GPUs in the workload)
    att = att_gpu / np.maximum(workload.num_gpus, 1)
    jobs = lambda: _jobs_table(workload, first, finish, out["preemptions"], att, att_gpu, tracked)  # noqa: E731
    summ = _summary(workload, cluster, tracked, finish, first, out["preemptions"], att_gpu,
                    float(workload.submit_s.min()), out["end_s"], t.seconds, 0.0)
    summ["engine"] = f"the Pollux simulator's {r.policy} (--compat pollux)"
    summ["restarts"] = int(out["restarts"].sum())
    if gate is not None:
        summ["held_jobs"] = int(gate.held().sum())  # (by --admission)
    mark(summ, None)
    return Result(jobs, summ, r.as_dict())


# ------------------------------------------------------------------------------------------ pollux
#: the fairness exponent of Pollux's power mean of the jobs' speedups (``p = -1``: harmonic)
POLLUX_P = -1.0
POLLUX_NCF_BATCH = 32768  # the simulator fixes ncf's batch size under Pollux (and gives it one GPU)
MAX_NODES_PER_JOB = 16


def relaunched(job, now: float) -> None:
    """A job (elastic or ``fastblox.mixed.RigidJob``) given new GPUs at ``now``: stopped for its
    restart delay (``job.restart_s``); its first launch is not counted as a restart."""
    job.rescale = job.restart_s
    if job.restarts is None:
        job.restarts, job.first = 0, now
    else:
        job.restarts += 1


class ElasticJob:
    """One job under Pollux: it adapts its batch size to the goodput model it fits from the
    configurations it has run (``Job.step`` / ``update_params`` / ``update_local_bsz``)."""

    gang = 0  # (not a rigid job: fastblox.mixed.RigidJob has its fixed GPUs here)
    restart_s = elastic.RESTART_S  # (fastblox.mixed sets --restart-s on the job)

    def __init__(self, app: str, submit: float, batch_size: int | None = None, fits: dict | None = None):
        self.app, self.prof, self.submit, self.target_bs = app, elastic.profile(app), submit, batch_size
        self.fits = {} if fits is None else fits  # (shared by the jobs of a run: see _observe)
        self.seen = {}  # (nodes, replicas, atomic batch) -> (step s, sync s), first measurement
        self.pp = self.grad = None
        self.epoch, self.progress, self.rescale = 0, 0.0, 0.0
        self.placement, self.atomic, self.accum = (), 0, 0
        self.finish, self.attained_gpu, self.restarts, self.first = None, 0.0, None, None
        self.preempted = 0
        self._bkey = self._bmemo = None
        self._steps = {}  # (elastic.best_batch's step times under the job's model: reused until it changes)

    def memo(self) -> dict:
        """The best batch sizes remembered under the job's current model and gradient statistics
        (emptied when they change): :meth:`best_batches`' (nodes, GPUs) -> values."""
        if self._bkey is None or self._bkey[0] is not self.pp or self._bkey[1] != self.grad:
            key = (self.pp, self.grad, self.pp.tobytes())  # (the same model: the same object, or the same bytes)
            if self._bkey is None or self._bkey[1:] != key[1:]:
                self._bmemo = {}
            if self._bkey is None or self._bkey[2] != key[2] or len(self._steps) > 32:
                self._steps = {}  # (a new model: new step times; a few sets of configurations at most)
            self._bkey = key
        return self._bmemo

    def best_batches(self, pairs: list) -> dict:
        """(nodes, GPUs) -> (goodput, atomic batch, accumulation steps) of the best batch size there
        (``elastic.best_batch``) under the job's model and gradient statistics, for ``pairs`` and
        any other pair asked for since they last changed (remembered until then). The pairs not
        remembered are computed in one call (a pair's values do not depend on the others in it)."""
        memo = self.memo()
        miss = sorted({pr for pr in pairs if pr not in memo})
        if miss:
            p = self.prof
            m = np.array(miss, dtype=np.float64)
            good, a, k = elastic.best_batch(self.pp, self.grad, p.init_batch_size, m[:, 0], m[:, 1], p.max_batch_size,
                                            p.min_local_bsz, p.max_local_bsz, self._steps)
            memo.update(zip(miss, zip(good.tolist(), a.tolist(), k.tolist())))
        return memo

    @property
    def max_profiled_replicas(self) -> int:
        return max((k[1] for k in self.seen), default=0)

    def speedups(self, fair: float, ahead: list = ()) -> "Speedups":
        return Speedups(self, fair, ahead)

    def max_replicas(self, gpus: int) -> int:
        p = self.prof
        if self.app == "ncf":
            return 1
        # (at most the profiles' largest measured GPU count, 64: beyond it their step times are not defined)
        return min(max(2 * self.max_profiled_replicas, 1), gpus, p.max_batch_size // p.min_local_bsz,
                   p.max_measured_replicas)

    def _choose_batch(self) -> None:
        p, n, r = self.prof, len(self.placement), sum(self.placement)
        bs = self.target_bs
        if bs is None and self.pp is None:
            bs = max(p.init_batch_size, p.min_local_bsz * r)
        if bs is None:
            _, atomic, accum = self.best_batches([(n, r)])[n, r]
        else:
            a, k = elastic.fixed_batch_config(bs, r, p.init_batch_size, p.max_batch_size, p.max_local_bsz)
            atomic, accum = int(a), int(k)
        self.atomic, self.accum = min(atomic, int(p.max_batch_size / (r * (accum + 1)))), accum

    def _observe(self, n, r, step, sync, sqr, var) -> None:
        self.grad = (sqr, var)
        key = (n, r, self.atomic)
        if key in self.seen:
            return
        self.seen[key] = (step, sync)
        k = np.array(list(self.seen), dtype=np.float64)
        v = np.array(list(self.seen.values()))
        # the same observations (jobs of one application often measure the same configurations in the
        # same order) give the same fit: computed once per run
        key = (k.tobytes(), v.tobytes())
        if key not in self.fits:
            self.fits[key] = elastic.fit_perf_params(k[:, 0], k[:, 1], k[:, 2], v[:, 0] - v[:, 1], v[:, 0],
                                                         kernel=True)
        self.pp = self.fits[key]

    def reallocate(self, placement: tuple, now: float, nodes=()) -> None:
        """The job runs on ``placement`` (GPUs per node; empty: suspended) from ``now`` (``nodes``,
        a node per GPU: read by ``fastblox.mixed.RigidJob`` only)."""
        if not placement:
            if self.placement:
                self.preempted += 1
            self.placement, self.atomic = (), 0
            return
        self.placement = tuple(placement)
        self._choose_batch()
        relaunched(self, now)

    def advance(self, t0: float, secs: float) -> None:
        if not self.placement or self.finish is not None:
            return
        p, n, r = self.prof, len(self.placement), sum(self.placement)
        d = min(self.rescale, secs)
        used = d
        self.attained_gpu += d * r
        self.rescale -= d
        secs -= d
        while secs > 0 and self.finish is None:
            batch = r * self.atomic * (self.accum + 1)
            step, sync = p.step_time(self.placement, self.atomic)
            sqr, var = p.grad_stats_at(batch, int(self.epoch))
            g = elastic.gain(sqr, var, batch / p.init_batch_size)
            self._observe(n, r, step, sync, sqr, var)
            good = g / (step + (step - sync) * self.accum)
            nxt = p.epoch_progress[self.epoch + 1]
            if self.progress + good * secs < nxt:
                self.progress += good * secs
                self.attained_gpu += secs * r
                used += secs
                secs = 0
            else:
                self.epoch += 1
                delta = round(float((nxt - self.progress) / good))
                if self.epoch > p.max_epochs - 1:
                    self.finish = t0 + used + delta
                self.progress = nxt
                self.attained_gpu += delta * r
                used += delta
                secs -= delta
            self._choose_batch()
        if self.finish is not None:  # (done: nothing asks for its goodputs again; a 100k-job run keeps every job)
            self._bkey = self._bmemo = self._lgood = self._lkey = None
            self._steps = {}


class Speedups:
    """A job's speedup over its fair share for any (nodes, GPUs): the goodput of its best batch
    size there over that on one node with ``fair`` GPUs (``r / fair`` before it has a model).
    Goodputs are remembered on the job until its model or gradient statistics change."""

    def __init__(self, job: ElasticJob, fair: float, ahead: list = ()):
        """``ahead``: (nodes, GPUs) pairs the round will ask for, computed with the fair share's."""
        self.job, self.fair = job, fair
        if job.pp is not None:
            self.base = job.best_batches([(1, int(fair)), *ahead])[1, int(fair)][0]

    def _goodputs(self, nodes, reps) -> np.ndarray:
        pairs = list(zip(nodes.tolist(), reps.tolist()))
        memo = self.job.best_batches(pairs)
        return np.array([memo[pr][0] for pr in pairs])

    def at_layouts(self, n_r: np.ndarray, count: int) -> np.ndarray:
        """Speedups at the first ``count`` (nodes, GPUs) pairs of ``n_r`` (a read-only array of
        :func:`_layouts`); the goodputs of all its pairs are remembered on the job with its model."""
        job = self.job
        if job.pp is None:
            return n_r[:count, 1] / self.fair
        key = (job.pp.tobytes(), job.grad, id(n_r))
        if getattr(job, "_lkey", None) != key:
            job._lkey, job._lgood = key, None
        if job._lgood is None or len(job._lgood) < count:
            job._lgood = self._goodputs(n_r[:count, 0], n_r[:count, 1])
        return job._lgood[:count] / self.base

    def one(self, nodes: int, reps: int) -> float:
        """The speedup at one (nodes, GPUs) pair: ``self([nodes], [reps])[0]`` (the same bits) without
        the arrays when the job's goodput there is remembered."""
        if reps <= 0:
            return 0.0
        job = self.job
        if job.pp is None:
            return reps / self.fair
        v = job.memo().get((nodes, reps))
        return (v if v is not None else job.best_batches([(nodes, reps)])[nodes, reps])[0] / self.base

    def __call__(self, nodes, reps) -> np.ndarray:
        """Speedups at (nodes, GPUs) pairs (arrays; 0 where GPUs is 0)."""
        nodes, reps = np.asarray(nodes, dtype=np.int64), np.asarray(reps, dtype=np.int64)
        out = np.zeros(len(reps))
        on = reps > 0
        if self.job.pp is None:
            out[on] = reps[on] / self.fair
        elif on.any():
            out[on] = self._goodputs(nodes[on], reps[on]) / self.base
        return out


@functools.lru_cache(maxsize=64)
def _layout_pairs(*args) -> list:
    """The rows of ``_layouts(*args)`` as (nodes, GPUs) tuples of ints (do not change the list)."""
    return [tuple(x) for x in _layouts(*args).tolist()]


@functools.lru_cache(maxsize=64)
def _layouts(max_r: int, nodes: int, per_node: int, max_nodes: int, spread: int) -> np.ndarray:
    """(nodes, GPUs) pairs of the rows of 1..max_r GPUs the local search values: from the fewest
    nodes that hold them to ``spread`` more (at most the GPUs and ``max_nodes``). Read-only."""
    out = [(n, r) for r in range(1, max_r + 1) for n in range(-(-r // per_node), min(r, max_nodes) + 1)
           if n <= -(-r // per_node) + spread]
    a = np.array(out, dtype=np.int64).reshape(-1, 2)
    a.flags.writeable = False
    return a


class PolluxPolicy:
    """Pollux's allocation: maximise the power mean (p = -1) of the jobs' speedups over their fair
    share, each scaled so one node's worth is 1, a job whose GPUs change discounted by the
    share of its age its restarts would cost. Pollux searches with a genetic algorithm
    (NSGA-II); this one solves the same objective by a dynamic programme over GPU counts (every
    job's best size given the GPUs left, exactly, on its fewest nodes; once with new multi-node
    allocations in whole nodes only, once with any size), packs the result onto nodes (at most
    one multi-node job per node, a node's GPUs at most), plans again without the sizes the
    packing could not give, and keeps the best of those and the unchanged allocation by the exact
    objective. Then a compiled local search on the exact values of every job on every (nodes, GPUs)
    layout (``kernels/pollux.py``: best responses, the best pair move, kicks back to a job's base
    row) improves both that allocation and the unchanged one; the better by the exact objective is
    taken."""

    PASSES = 8  # plans at most, each without the sizes the packing of the one before could not give
    LAYOUT_SPREAD = 3  # the local search's rows of r GPUs: on the fewest nodes up to this many more
    MAX_SWEEPS = 50  # of the local search (it stops sooner when a sweep moves nothing)
    KICKS = 3  # jobs put back on their base row, then jobs put on their best GPUs on one node (the jobs in
    # the way emptied), each followed by the search again
    PAIR_CAP = 64  # a round of more active jobs: the search's pair moves give GPUs only to the 64 jobs furthest
    # above the least value they could have (kernels.pollux._partners), so a sweep costs jobs x 64, not jobs^2

    def __init__(self, jobs: list, nodes: int, per_node: int, restart_s: float = elastic.RESTART_S,
                 search: bool = True, rigid_sizes=None):
        self.jobs, self.nodes, self.per_node, self.restart_s = jobs, nodes, per_node, float(restart_s)
        # (search False and rigid_sizes ``fastblox.reference.pollux.rigid_sizes``, the plan of a round of
        # rigid jobs only: the rule kernels.pollux_rigid compiles, of which this is then the plain twin)
        self.search, self.rigid_sizes = search, rigid_sizes
        self.objectives = []  # (interval time, objective of the chosen, of the unchanged allocation)

    # ---- the objective
    def _values(self, sp: Speedups, max_r: int, factor: float, whole: bool):
        """1 / (scaled speedup + 1e-3) of a job per GPU count 0..max_r on its fewest nodes (changed;
        inf: not a size a changed allocation may take). ``whole``: a new multi-node allocation takes
        whole nodes (a part-filled node left to it fragments the cluster for single-node jobs)."""
        r = np.arange(max_r + 1)
        s = sp(-(-r // self.per_node), r) / self.per_node * factor
        v = 1.0 / (s + 1e-3)
        gang = getattr(sp, "gang", 0)
        if gang:  # (a rigid job: its gang or nothing)
            v = np.where((r == 0) | (r == gang), v, np.inf)
        return self._whole(v) if whole else v

    def _whole(self, v: np.ndarray) -> np.ndarray:
        """Values ``v`` of 0.. GPUs with the multi-node sizes of part of a node ruled out (inf)."""
        r = np.arange(len(v))
        return np.where((r > self.per_node) & (r % self.per_node != 0), np.inf, v)

    def objective(self, state: np.ndarray, base: np.ndarray, tabs: list, factors: np.ndarray) -> float:
        """Pollux's power mean (p = -1) of the scaled speedups of allocation ``state`` [job, node]."""
        reps = state.sum(axis=1)
        nn = np.count_nonzero(state, axis=1)
        s = np.array([tabs[j].one(n, r) for j, (n, r) in enumerate(zip(nn.tolist(), reps.tolist()))]) / self.per_node
        changed = (state != base).any(axis=1)
        s = s * np.where(changed, factors, 1.0)
        return float((np.sum((s + 1e-3) ** POLLUX_P) / len(s)) ** (1.0 / POLLUX_P))

    # ---- the search
    def _options(self, base: np.ndarray, tabs: list, factors: np.ndarray, maxr: np.ndarray, whole: bool) -> list:
        """Each job's options: (values of 0..maxr GPUs, (GPUs, value) of keeping its allocation or None)."""
        out = []
        for j in range(len(tabs)):
            key = (j, whole)  # (a job's values up to its cap, and its keep: once a round; a lower cap: a prefix)
            if key not in self._vals:
                if j not in self._vals:
                    v = self._values(tabs[j], int(self._maxr[j]), factors[j], False)
                    self._vals[j] = v, self._keep(j, base, tabs)
                v, keep = self._vals[j]
                self._vals[key] = (self._whole(v) if whole else v), keep
            vals, keep = self._vals[key]
            out.append((vals[:int(maxr[j]) + 1], keep))
        return out

    def _keep(self, j: int, base: np.ndarray, tabs: list):
        """(GPUs, value) of job ``j`` keeping its allocation, or None."""
        rb = int(base[j].sum())
        if not 0 < rb <= self._maxr[j]:  # (keeping more GPUs than it may have is not an option)
            return None
        return rb, 1.0 / (tabs[j].one(int(np.count_nonzero(base[j])), rb) / self.per_node + 1e-3)

    def _sizes(self, base: np.ndarray, tabs: list, factors: np.ndarray, maxr: np.ndarray, whole: bool) -> list:
        """Each job's (GPUs, keep its current allocation) minimising the sum of 1/(speedup + 1e-3):
        ``kernels.elastic.pollux_sizes`` (its twin: :meth:`_sizes_numpy`)."""
        from .kernels.elastic import pollux_sizes

        opts = self._options(base, tabs, factors, maxr, whole)
        if self.rigid_sizes is not None and (self._gang > 0).all():
            return self._rigid_sizes(opts)
        G, J = self.nodes * self.per_node, len(opts)
        offs = np.zeros(J + 1, dtype=np.int64)
        offs[1:] = np.cumsum([len(v) for v, _ in opts])
        vals = np.concatenate([v for v, _ in opts]) if J else np.zeros(0)
        keep_r = np.array([-1 if k is None else k[0] for _, k in opts], dtype=np.int64)
        keep_v = np.array([0.0 if k is None else k[1] for _, k in opts], dtype=np.float64)
        out_r, out_keep = np.zeros(J, dtype=np.int64), np.zeros(J, dtype=np.bool_)
        pollux_sizes(vals.astype(np.float64), offs, keep_r, keep_v, G, np.zeros((J, G + 1), dtype=np.int64),
                     np.zeros(G + 1), np.zeros(G + 1), out_r, out_keep)
        return [(int(r), bool(k)) for r, k in zip(out_r, out_keep)]

    def _rigid_sizes(self, opts: list) -> list:
        """:meth:`_sizes` of rigid jobs by ``self.rigid_sizes`` over each job's finite options (no
        GPUs, its gang, keeping its row)."""
        three = []
        for (vals, kp), g in zip(opts, self._gang.tolist()):
            o = [(0, float(vals[0]))]
            if len(vals) > g and np.isfinite(vals[g]):
                o.append((g, float(vals[g])))
            if kp is not None:
                o.append((int(kp[0]), float(kp[1])))
            three.append(o)
        pick = self.rigid_sizes(three, self.nodes * self.per_node)
        return [(o[k][0], k == len(o) - 1 and kp is not None) for o, k, (_, kp) in zip(three, pick, opts)]

    def _sizes_numpy(self, base: np.ndarray, tabs: list, factors: np.ndarray, maxr: np.ndarray, whole: bool) -> list:
        """:meth:`_sizes` in numpy (the plain twin the tests compare the kernel with)."""
        G = self.nodes * self.per_node
        dp = np.zeros(G + 1)
        choice = []
        cap = np.arange(G + 1)
        for vals, kp in self._options(base, tabs, factors, maxr, whole):
            rs = np.arange(len(vals))
            opts_r, opts_v, keep = list(rs), list(vals), [False] * len(rs)
            if kp is not None:
                opts_r.append(kp[0])
                opts_v.append(kp[1])
                keep.append(True)
            opts_r, opts_v = np.array(opts_r), np.array(opts_v)
            src = cap[None, :] - opts_r[:, None]
            cand = np.where(src >= 0, dp[np.maximum(src, 0)] + opts_v[:, None], np.inf)
            k = np.argmin(cand, axis=0)
            dp = cand[k, cap]
            choice.append((k, opts_r, keep))
        c = int(np.argmin(dp))
        out = [None] * len(choice)
        for j in range(len(choice) - 1, -1, -1):
            k, opts_r, keep = choice[j]
            kk = k[c]
            out[j] = (int(opts_r[kk]), keep[kk])
            c -= int(opts_r[kk])
        return out

    def _pack(self, sizes: list, base: np.ndarray) -> np.ndarray:
        """An allocation [job, node] with those sizes: kept jobs as they are, the others largest
        first on whole free nodes plus the best-fitting node for the rest (spread over more nodes,
        or fewer GPUs, when that is impossible)."""
        J, N, P = len(sizes), self.nodes, self.per_node
        state = np.zeros((J, N), dtype=np.int64)
        dist_on = np.zeros(N, dtype=bool)
        for j, (r, keep) in enumerate(sizes):
            if keep:
                state[j] = base[j]
                if np.count_nonzero(base[j]) > 1:
                    dist_on |= base[j] > 0
        free = P - state.sum(axis=0)
        for j in sorted((j for j, (r, keep) in enumerate(sizes) if not keep and r > 0), key=lambda j: -sizes[j][0]):
            r = sizes[j][0]
            row = self._place_one(r, free, dist_on)
            if self._gang[j] and row.sum() != self._gang[j]:
                row[:] = 0  # (a rigid job short of its gang does not run: planned again without it)
            state[j] = row
            free -= row
            if np.count_nonzero(row) > 1:
                dist_on |= row > 0
        return state

    def _place_one(self, r: int, free: np.ndarray, dist_on: np.ndarray) -> np.ndarray:
        N, P = len(free), self.per_node
        row = np.zeros(N, dtype=np.int64)
        if r <= P:
            fit = np.flatnonzero(free >= r)
            if len(fit):
                i = fit[np.argmin(free[fit])]
                row[i] = r
                return row
        else:
            whole = np.flatnonzero(free == P)
            full, rest = divmod(r, P)
            if len(whole) >= full:
                use = list(whole[:full])
                if rest:
                    ok = np.flatnonzero((free >= rest) & ~dist_on)
                    ok = [i for i in ok if i not in use]
                    if ok:
                        i = min(ok, key=lambda i: free[i])
                        use.append(i)
                        row[use[:-1]] = P
                        row[i] = rest
                        return row
                else:
                    row[use] = P
                    return row
        # spread: nodes without another multi-node job, most free first
        ok = np.flatnonzero((free > 0) & ~dist_on)
        ok = ok[np.argsort(-free[ok], kind="stable")][:MAX_NODES_PER_JOB]
        left = r
        for i in ok:
            take = min(left, free[i])
            row[i] = take
            left -= take
            if not left:
                break
        if np.count_nonzero(row) <= 1 and row.sum() < r:  # one node can take part of it only
            i = int(np.argmax(free)) if free.max() > 0 else None
            row[:] = 0
            if i is not None:
                row[i] = min(r, free[i])
        return row

    def _table(self, base, tabs, factors, maxr) -> tuple:
        """(table[job, nodes, GPUs], keep[job]) of :mod:`kernels.pollux`: 1 / (scaled speedup + 1e-3)
        of each job on a changed row of r GPUs on n nodes (n from the fewest to LAYOUT_SPREAD more; inf
        elsewhere), and on its base row."""
        J, N, P = len(tabs), self.nodes, self.per_node
        R = int(maxr.max()) if J else 0
        n_r, upto = self._layouts_of(maxr)
        table = np.full((J, N + 1, R + 1), np.inf)
        table[:, 0, 0] = 1.0 / 1e-3
        keep = np.empty(J)
        for j in range(J):
            sel = n_r[:upto[j]]
            s = tabs[j].at_layouts(n_r, int(upto[j])) / P * factors[j]
            table[j, sel[:, 0], sel[:, 1]] = 1.0 / (s + 1e-3)
            if self._gang[j]:  # (a rigid job: its gang or nothing, on any nodes)
                table[j, :, 1:self._gang[j]] = np.inf
                table[j, :, self._gang[j] + 1:] = np.inf
            rb = int(base[j].sum())
            sb = tabs[j].one(int(np.count_nonzero(base[j])), rb) / P if rb else 0.0
            keep[j] = 1.0 / (sb + 1e-3)
        return table, keep

    def _layouts_of(self, maxr: np.ndarray) -> tuple:
        """(the local search's (nodes, GPUs) pairs up to the most GPUs of ``maxr``: :func:`_layouts`,
        and each job's count of them: those of at most its GPUs); the pairs also as tuples in
        ``_pairs`` (the speedups compute them ahead). Remembered for the same ``maxr``."""
        key = maxr.tobytes()
        if getattr(self, "_lkey", None) != key:
            args = (int(maxr.max()) if len(maxr) else 0, self.nodes, self.per_node,
                    min(self.nodes, MAX_NODES_PER_JOB), self.LAYOUT_SPREAD)
            n_r = _layouts(*args)
            self._lkey, self._lay = key, (n_r, np.searchsorted(n_r[:, 1], maxr, side="right"))  # (pairs by GPUs)
            self._pairs = _layout_pairs(*args)
        return self._lay

    def _refine(self, seeds: list, f_first: float, base, tabs, factors, maxr) -> tuple:
        """The best of the seeds (allocations; None: skipped) each improved by
        :func:`kernels.pollux.search` (with kicks from the first only), by the exact objective (the
        first seed's is ``f_first``)."""
        from .kernels.pollux import scratch, search

        table, keep = self._table(base, tabs, factors, maxr)
        J, N = base.shape
        work = scratch(J, N, table.shape[2], self.per_node)
        best, f_best = seeds[0], f_first
        for s_i, seed in enumerate(seeds):
            if seed is None:
                continue
            state = np.ascontiguousarray(seed, dtype=np.int64).copy()
            search(state, base, table, keep, maxr.astype(np.int64), self.per_node, min(N, MAX_NODES_PER_JOB),
                   self.MAX_SWEEPS, self.KICKS if s_i == 0 else 0, self.PAIR_CAP, *work)
            f = self.objective(state, base, tabs, factors)
            if best is None or f > f_best:
                best, f_best = state, f
        return best, f_best

    def optimize(self, active: list, prev: dict, now: float) -> dict:
        jobs = self.jobs
        order = sorted(active, key=lambda j: (jobs[j].attained_gpu, jobs[j].submit))
        G = self.nodes * self.per_node
        fair = float(np.ceil(G / len(order)))
        base = np.zeros((len(order), self.nodes), dtype=np.int64)
        for i, j in enumerate(order):
            for node in prev.get(j, []):
                base[i, node] += 1
        maxr = np.array([jobs[j].max_replicas(G) for j in order])
        upto, pairs = self._layouts_of(maxr)[1], self._pairs
        tabs = [jobs[j].speedups(fair, pairs[:u]) for j, u in zip(order, upto.tolist())]
        age = np.array([now - jobs[j].submit for j in order])
        rst = np.array([jobs[j].restarts or 0 for j in order])
        factors = np.maximum(age - rst * self.restart_s, 0.0) / (age + self.restart_s)
        self._maxr, self._vals = maxr, {}
        self._gang = np.array([jobs[j].gang for j in order], dtype=np.int64)  # (0: elastic)
        f_base = self.objective(base, base, tabs, factors)
        best, f_best = (base, f_base) if (base.sum(axis=1) <= maxr).all() else (None, -np.inf)
        for whole in (True, False):
            caps = maxr.copy()
            for _ in range(self.PASSES):
                sizes = self._sizes(base, tabs, factors, caps, whole)
                cand = self._pack(sizes, base)
                f = self.objective(cand, base, tabs, factors)
                if f > f_best:
                    best, f_best = cand, f
                got = cand.sum(axis=1)
                short = [i for i, (r, keep) in enumerate(sizes) if not keep and got[i] < r]
                if not short:
                    break
                caps[short] = got[short]  # (the packing could not give them that many: plan again without)
        ok = (base.sum(axis=1) <= maxr).all()
        if self.search:
            best, f_best = self._refine([best, base if ok else None], f_best, base, tabs, factors, maxr)
        self.objectives.append((now, f_best, f_base))
        nodes = np.arange(self.nodes)
        return {j: np.repeat(nodes, best[i]).tolist() for i, j in enumerate(order)}


def simulate_pollux(apps, submit_s, interval_s: float = INTERVAL_S, nodes: int = NODES, per_node: int = GPUS_PER_NODE,
                    max_intervals: int = 1_000_000, until_s: float | None = None, gate=None) -> dict:
    """Replay the jobs under Pollux as the simulator does (adaptive batch sizes; ncf fixed at
    32,768 on one GPU). Returns what :func:`simulate` does, plus ``objectives``. ``until_s``: stop
    after the round at that simulated time (unfinished jobs: finish -1). ``gate``: as :func:`simulate`'s."""
    fits = {}
    jobs = [ElasticJob(a, float(t), POLLUX_NCF_BATCH if a == "ncf" else None, fits) for a, t in zip(apps, submit_s)]
    pol = PolluxPolicy(jobs, nodes, per_node)
    with elastic.one_blas_thread():
        return _run_pollux(jobs, pol, np.asarray(submit_s, dtype=np.float64), interval_s, max_intervals, until_s,
                           gate)


def _run_pollux(jobs, pol, submit, interval_s, max_intervals, until_s=None, gate=None) -> dict:
    """The simulator's loop: every interval each job advances, then the policy allocates the jobs
    submitted and unfinished (in workload order). Only those jobs are visited (a job not yet
    submitted or finished holds no GPUs, so advancing it does nothing): a round costs what its
    active jobs cost, not the workload's length. ``until_s``: stop after the round at that
    simulated time. ``gate`` (``fastblox.mixed.Gate``; None: every submitted job): the jobs let in."""
    now, alloc = 0.0, {}
    arrivals = np.argsort(submit, kind="stable")
    nxt, left = 0, len(jobs)
    active = []
    for _ in range(max_intervals):
        if not left or (until_s is not None and now >= until_s):
            break
        for j in active:
            jobs[j].advance(now, interval_s)
        now += interval_s
        done = [j for j in active if jobs[j].finish is not None]
        left -= len(done)
        new_jobs = []
        if gate is not None:
            new_jobs = gate.step(now, done)
        while gate is None and nxt < len(arrivals) and submit[arrivals[nxt]] <= now:
            new_jobs.append(int(arrivals[nxt]))
            nxt += 1
        if done or new_jobs:
            active = sorted([j for j in active if jobs[j].finish is None] + new_jobs)
        for j in done:
            alloc.pop(j, None)
        if not active:
            continue
        new = pol.optimize(active, alloc, now)
        for j in active:
            if new.get(j) != alloc.get(j):
                jobs[j].reallocate(to_placement(new.get(j, [])), now, new.get(j, ()))
        alloc = new
    else:
        raise RuntimeError(f"the replay did not finish in {max_intervals} intervals")
    f = lambda a, d=-1.0: np.array([d if x is None else x for x in a], dtype=np.float64)  # noqa: E731
    finish = f([j.finish for j in jobs])
    return {"start_s": f([j.first for j in jobs]), "finish_s": finish,
            "preemptions": np.array([j.preempted for j in jobs]), "restarts": np.array([j.restarts or 0 for j in jobs]),
            "attained_gpu_s": f([j.attained_gpu for j in jobs], 0.0), "end_s": float(finish.max()),
            "objectives": np.array(pol.objectives)}
