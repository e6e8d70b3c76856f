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
  ``batch_size // smallest per-GPU batch``; ncf 1).
* **tiresias** (Tiresias+TunedJobs): two queues in arrival order, a job moves down after 16
  GPU-hours of service (counted in whole seconds between decisions, times its GPUs); every
  interval the queues are walked and each job that fits in the GPUs left runs (running jobs that
  no longer fit are preempted); new gangs go on the nodes with the most free GPUs.
* **optimus** (Optimus+Oracle): every job gets one GPU in arrival order while GPUs last; the rest
  go one at a time to the job whose (true) step time drops most times its remaining iterations; a
  job keeps its GPUs if their number is unchanged; the others are placed smallest first on the
  nodes with the most free GPUs.
"""

from __future__ import annotations

import collections
import csv
from pathlib import Path

import numpy as np

from . import elastic
from .errors import ConfigError, TraceError, WorkloadError

#: the policies ``--compat pollux`` runs (the simulator's names)
POLICIES = ("tiresias", "optimus")
INTERVAL_S = 60
NODES, GPUS_PER_NODE = 16, 4
TIRESIAS_THRESHOLD_GPU_S = 3600 * 16  # tiresias.py: _queue_threshold
WORKLOAD_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")


# ------------------------------------------------------------------------------------------ workload
def read_workload(path, name: str | None = None):
    """A Pollux workload CSV (``name,time,application,num_replicas,batch_size``) as a
    :class:`~fastblox.Workload` with ``model`` (the application) and ``batch_size`` columns;
    ``duration_s`` is each job's time alone on its ``num_replicas`` GPUs at its batch size.
    A bad row raises TraceError naming the file, row (the header is row 1) and column."""
    from .workload import Workload

    path = Path(path)
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        raise TraceError(f"cannot read ({e.strerror})", path=path) from None
    if not rows:
        raise TraceError("empty file", path=path)
    head = [h.strip() for h in rows[0]]
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
        submit.append(_number(row, col, "time", path, i, whole=False))
        reps.append(_number(row, col, "num_replicas", path, i))
        bsz.append(_number(row, col, "batch_size", path, i))
        _check_job(app, reps[-1], bsz[-1], path, i)
    if not names:
        raise TraceError("no jobs", path=path)
    dur = [elastic.isolated_run_s(a, b, r) for a, b, r in zip(apps, bsz, reps)]
    return Workload.from_arrays(submit, reps, duration_s=dur, name=name or path.stem, model=np.array(apps, dtype=object),
                                batch_size=np.array(bsz, dtype=np.int64), source_id=np.array(names, dtype=object))


def _number(row, col, c, path, i, whole=True) -> float:
    v = row[col[c]].strip()
    try:
        x = float(v)
    except ValueError:
        x = float("nan")
    if not np.isfinite(x) or x < 0 or (whole and (x != int(x) or x < 1)):
        what = "a whole number >= 1" if whole else "a number of seconds >= 0"
        raise TraceError(f"{v!r} is not {what}", path=path, row=i, column=c)
    return int(x) if whole else x


def _check_job(app, reps, bsz, path, i) -> None:
    pr = elastic.profile(app)
    if not pr.init_batch_size <= bsz <= pr.max_batch_size:
        raise TraceError(f"{app} batch size {bsz} is outside its validated {pr.init_batch_size}..{pr.max_batch_size}",
                         path=path, row=i, column="batch_size")
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

    def __init__(self, apps, batch_size, submit_s):
        self.n = n = len(apps)
        self.apps = apps
        self.prof = [elastic.profile(a) for a in apps]
        self.target_bs = np.asarray(batch_size, dtype=np.int64)
        self.submit = np.asarray(submit_s, dtype=np.float64)
        emax = max(p.max_epochs for p in self.prof)
        self.last_epoch = np.array([p.max_epochs - 1 for p in self.prof])  # completes when epoch passes it
        self.prog = np.full((n, emax + 1), np.inf)
        for j, p in enumerate(self.prof):
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
        atomic, accum = elastic.fixed_batch_config(self.target_bs[j], r, p.init_batch_size, p.max_batch_size,
                                                   p.max_local_bsz)
        self.placement[j], self.nrep[j] = tuple(placement), r
        self.step_s[j] = p.step_times([placement], [atomic], np.array([accum]))[0]
        self.gains[j, :p.max_epochs] = p.gains(r * atomic * (accum + 1))[0]
        self.rescale[j] = elastic.RESTART_S
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
            delta = np.round((nb - self.progress[b]) / gb)  # (half to even, as Python's round)
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

    def __init__(self, jobs: Jobs, num_gpus: np.ndarray, nodes: int, per_node: int):
        self.jobs, self.gpus, self.nodes, self.per_node = jobs, num_gpus, nodes, per_node
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
        alloc.update(place({j: int(self.gpus[j]) for j in start}, start,
                           free_gpus(alloc, self.nodes, self.per_node)))
        return alloc


class Optimus:
    """``optimus.py``'s ``OptimusPolicy`` with the simulator's oracle step times."""

    def __init__(self, jobs: Jobs, num_gpus: np.ndarray, nodes: int, per_node: int):
        self.jobs, self.nodes, self.per_node = jobs, nodes, per_node
        self.max_reps = np.array([1 if a == "ncf" else int(b // p.min_local_bsz)
                                  for a, b, p in zip(jobs.apps, jobs.target_bs, jobs.prof)], dtype=np.int64)
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
        last, ep = p.max_epochs - 1, int(jobs.epoch[j])
        if last <= ep:
            return 1.0
        b = jobs.target_bs[j]
        return float(p.iterations(b, last) - p.iterations(b, ep))

    def _gain(self, j: int, r: int, left: int, remaining: float) -> float:
        if r + 1 > self.max_reps[j] or left < 1:
            return 0.0
        return (self.step_time(j, r) - self.step_time(j, r + 1)) * remaining

    def optimize(self, active: list, prev: dict, now: float) -> dict:
        remaining = {j: self._remaining(j) for j in active}
        left = self.nodes * self.per_node
        reps, gain = {}, {}
        for j in active:
            if left < 1:
                reps[j], gain[j] = 0, 0.0
                continue
            reps[j] = 1
            left -= 1
            gain[j] = self._gain(j, 1, left, remaining[j])
        while left > 0 and max(gain.values()) > 0:
            j = max(gain, key=lambda k: gain[k])
            reps[j] += 1
            gain[j] = self._gain(j, reps[j], left, remaining[j])
            left -= 1
        alloc = {j: v for j, v in prev.items() if j in reps and len(v) == reps[j]}
        order = [j for j in sorted(active, key=lambda k: reps[k]) if reps[j] > 0 and not alloc.get(j)]
        alloc.update(place(reps, order, free_gpus(alloc, self.nodes, self.per_node)))
        return alloc


# ------------------------------------------------------------------------------------------ run
def simulate(apps, batch_size, num_gpus, submit_s, policy: str, interval_s: float = INTERVAL_S, nodes: int = NODES,
             per_node: int = GPUS_PER_NODE, max_intervals: int = 1_000_000) -> dict:
    """Replay the jobs (workload order) as the Pollux simulator does with ``policy``. Returns
    per-job ``start_s`` (first allocation), ``finish_s``, ``preemptions``, ``restarts``,
    ``attained_gpu_s`` (GPU-seconds held, restarts included) and ``end_s``."""
    if policy not in POLICIES:
        raise ConfigError(f"--compat pollux runs the Pollux simulator's policies: {', '.join(POLICIES)}; "
                          f"not {policy!r}")
    jobs = Jobs(apps, batch_size, submit_s)
    gpus = np.asarray(num_gpus, dtype=np.int64)
    pol = (Tiresias if policy == "tiresias" else Optimus)(jobs, gpus, nodes, per_node)
    now, alloc = 0.0, {}
    for _ in range(max_intervals):
        if (jobs.finish >= 0).all():
            break
        jobs.advance(now, interval_s)
        now += interval_s
        active = np.flatnonzero((jobs.submit <= now) & (jobs.finish < 0)).tolist()
        if not active:
            continue
        alloc = {j: v for j, v in alloc.items() if j in set(active)}
        new = pol.optimize(active, alloc, now)
        for j in active:
            if new.get(j) != alloc.get(j):
                jobs.reallocate(j, to_placement(new.get(j, [])), now)
        alloc = new
    else:
        raise RuntimeError(f"the replay did not finish in {max_intervals} intervals")
    return {"start_s": jobs.first, "finish_s": jobs.finish, "preemptions": jobs.preempted, "restarts": jobs.restarts,
            "attained_gpu_s": jobs.attained_gpu, "end_s": float(jobs.finish.max())}


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
    from .results import Result, _jobs_table, _summary
    from .slices import mark

    nodes, per_node = check_cluster(cluster)
    apps, bs, gpus = job_table(workload)
    if r.policy == "tiresias" and (gpus > nodes * per_node).any():
        raise WorkloadError(f"a job asks for {int(gpus.max())} GPUs; the cluster has {nodes * per_node}")
    with sim_timer() as t:
        out = simulate(apps, bs, gpus, workload.submit_s, r.policy, r.round_s, nodes, per_node)
    finish, first = out["finish_s"], out["start_s"]
    att_gpu = out["attained_gpu_s"]
    # (an elastic job's GPUs change over its run: seconds of service are its GPU-seconds over its GPUs in the workload)
    att = att_gpu / np.maximum(workload.num_gpus, 1)
    jobs = lambda: _jobs_table(workload, first, finish, out["preemptions"], att, att_gpu, tracked)  # noqa: E731
    summ = _summary(workload, cluster, tracked, finish, first, out["preemptions"], att_gpu,
                    float(workload.submit_s.min()), out["end_s"], t.seconds, 0.0)
    summ["engine"] = f"the Pollux simulator's {r.policy} (--compat pollux)"
    summ["restarts"] = int(out["restarts"].sum())
    mark(summ, None)
    return Result(jobs, summ, r.as_dict())
