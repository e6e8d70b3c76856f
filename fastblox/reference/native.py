"""Plain-Python reference of the native engine (``kernels.engine``), written to be obviously right.

Same semantics as the kernel, none of its tricks: dicts of jobs, ``heapq`` for completions, a
full sort at every step, and a victim search that scans the whole tail of the order. It checks
its own invariants as it goes (no GPU owned twice, gangs whole, time never goes back). The
hypothesis tests compare it with the kernel job by job.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

WAITING, RUNNING, DONE = "waiting", "running", "done"


@dataclass
class Job:
    i: int
    submit: float
    gpus: int
    work: float
    tracked: bool
    state: str = "future"
    work_left: float = 0.0
    attained: float = 0.0
    attained_gpu: float = 0.0
    launch_t: float = 0.0
    first_start: float = -1.0
    finish: float = -1.0
    n_preempt: int = 0
    version: int = 0
    gpu_ids: list = field(default_factory=list)


class Cluster:
    def __init__(self, node_gpus):
        self.node_gpus = list(node_gpus)
        self.base = [sum(self.node_gpus[:k]) for k in range(len(self.node_gpus))]
        self.owner: dict[int, int] = {}  # gpu -> job

    def free_on(self, nd):
        return [self.base[nd] + k for k in range(self.node_gpus[nd]) if self.base[nd] + k not in self.owner]

    def total_free(self):
        return sum(self.node_gpus) - len(self.owner)

    def fit(self, kind, n):
        free = [self.free_on(nd) for nd in range(len(self.node_gpus))]
        if kind == "first-fit":
            if sum(map(len, free)) < n:
                return None
            got = []
            for f in free:
                got += f[: n - len(got)]
            return got
        if kind == "blox":
            got = []
            for f in free:
                if not f:
                    continue
                got += f[:n]
                if len(got) == n:
                    return got
                if len(got) > n:
                    return None
            return None
        if kind == "consolidated":
            max_g = max(self.node_gpus)
            if n <= max_g:
                cands = [(len(f), nd) for nd, f in enumerate(free) if len(f) >= n]
                if not cands:
                    return None
                _, nd = min(cands)
                return free[nd][:n]
            k_min = -(-n // max_g)
            by_free = sorted(range(len(free)), key=lambda nd: -len(free[nd]))
            got, used = [], 0
            for nd in by_free:
                if not free[nd]:
                    return None
                used += 1
                if used > k_min:
                    return None
                got += free[nd][: n - len(got)]
                if len(got) == n:
                    return got
            return None
        raise ValueError(kind)

    def take(self, gpu_ids, j):
        for g in gpu_ids:
            assert g not in self.owner, f"GPU {g} given twice"
            self.owner[g] = j

    def release(self, gpu_ids, j):
        for g in gpu_ids:
            assert self.owner.get(g) == j
            del self.owner[g]


def _key(policy, job: Job, t, restart):
    run = job.state == RUNNING
    el = t - job.launch_t if run else 0.0
    if policy == "fifo":
        return job.submit
    if policy == "las":
        return job.attained + el
    if policy == "las-gpu":
        return job.attained_gpu + el * job.gpus
    if policy == "srtf":
        return job.work_left - (max(0.0, el - restart) * 1.0 if run else 0.0)
    if policy == "sjf":
        return job.work
    raise ValueError(policy)


def simulate_native_reference(
    submit, gpus, work, node_gpus, tracked=None, policy="fifo", placement="first-fit", theta=0.0,
    time_model="events", round_s=300.0, restart_s=0.0, preempt=True, key_fn=None,
):
    """Replay jobs (sorted by submit time). ``key_fn(job, t) -> key`` overrides ``policy``.

    Returns a dict of per-job lists: ``finish``, ``first_start``, ``n_preempt``, ``attained``,
    ``attained_gpu`` (-1 for never), plus ``end_t``, ``steps`` and ``deadlock``."""
    n = len(submit)
    tracked = [True] * n if tracked is None else list(tracked)
    jobs = [Job(i, float(submit[i]), int(gpus[i]), float(work[i]), bool(tracked[i])) for i in range(n)]
    for j in jobs:
        j.work_left = j.work
    cl = Cluster(node_gpus)
    total = sum(node_gpus)
    dynamic = key_fn is not None or policy in ("las", "las-gpu", "srtf")
    events = time_model == "events"
    heap: list = []
    active: list[Job] = []  # arrival order
    overflow: list[Job] = []
    next_arr = 0
    left = sum(tracked)
    t = None
    steps = 0
    deadlock = False
    while True:
        # the time of the next step
        if t is None:
            t = jobs[0].submit if events else 0.0
        else:
            while heap and not (jobs[heap[0][1]].state == RUNNING and jobs[heap[0][1]].version == heap[0][2]):
                heapq.heappop(heap)
            t_arr = jobs[next_arr].submit if next_arr < n else math.inf
            t_end = heap[0][0] if heap else math.inf
            waiting = sum(1 for j in active if j.state == WAITING)
            if events:
                t_new = min(t_arr, t_end)
            elif dynamic and waiting > 0:
                t_new = t + round_s
            else:
                t_ev = min(t_arr, t_end)
                t_new = math.inf if t_ev == math.inf else max(math.ceil(t_ev / round_s) * round_s, t + round_s)
            if t_new == math.inf:
                deadlock = True
                break
            assert t_new > t, "time went back"
            t = t_new
        # completions
        while heap and heap[0][0] <= t:
            te, i, ver = heapq.heappop(heap)
            job = jobs[i]
            if not (job.state == RUNNING and job.version == ver):
                continue
            el = te - job.launch_t
            job.attained += el
            job.attained_gpu += el * job.gpus
            job.work_left = 0.0
            job.finish = te
            job.state = DONE
            cl.release(job.gpu_ids, i)
            if job.tracked:
                left -= 1
        if left == 0:
            break
        active = [j for j in active if j.state != DONE]
        while next_arr < n and jobs[next_arr].submit <= t:
            overflow.append(jobs[next_arr])
            next_arr += 1
        demand = sum(j.gpus for j in active)
        added = 0
        while overflow and (theta <= 0 or demand + added <= theta * total):
            job = overflow.pop(0)
            added += job.gpus
            job.state = WAITING
            active.append(job)
        if not any(j.state == WAITING for j in active) or (cl.total_free() == 0 and not preempt):
            continue
        # order: stable sort, ties in arrival order
        keyf = (lambda j: key_fn(j, t)) if key_fn is not None else (lambda j: _key(policy, j, t, restart_s))
        order = sorted(active, key=keyf)
        launched, suspended = [], []
        for idx, job in enumerate(order):
            if job.state != WAITING:
                continue
            got = cl.fit(placement, job.gpus)
            victims = []
            if got is None and preempt:
                for v in reversed(order[idx + 1:]):
                    if v.state != RUNNING:
                        continue
                    cl.release(v.gpu_ids, v.i)
                    v.state = WAITING
                    victims.append(v)
                    got = cl.fit(placement, job.gpus)
                    if got is not None:
                        break
            if got is not None:
                cl.take(got, job.i)
                job.gpu_ids = got
                job.state = RUNNING
                launched.append(job)
            for v in victims:
                if all(g not in cl.owner for g in v.gpu_ids):
                    cl.take(v.gpu_ids, v.i)  # unused: put back, not a preemption
                    v.state = RUNNING
                else:
                    suspended.append(v)
        for v in suspended:
            el = t - v.launch_t
            v.work_left -= max(0.0, el - restart_s) * 1.0
            v.attained += el
            v.attained_gpu += el * v.gpus
            v.n_preempt += 1
            v.version += 1
        for job in launched:
            assert len(job.gpu_ids) == job.gpus == len(set(job.gpu_ids)), "gang not whole"
            job.launch_t = t
            if job.first_start < 0:
                job.first_start = t
            job.version += 1
            heapq.heappush(heap, (t + restart_s + job.work_left / 1.0, job.i, job.version))
        assert len(cl.owner) <= total
        steps += 1
        if not cl.owner and next_arr == n and not overflow and any(j.state == WAITING for j in active):
            deadlock = True  # an empty cluster no waiting job fits, and nothing left to arrive
            break
    return {
        "finish": [j.finish for j in jobs],
        "first_start": [j.first_start for j in jobs],
        "n_preempt": [j.n_preempt for j in jobs],
        "attained": [j.attained + ((t - j.launch_t) if j.state == RUNNING else 0.0) for j in jobs],
        "end_t": t,
        "steps": steps,
        "deadlock": deadlock,
    }
