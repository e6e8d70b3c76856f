"""Plain-Python reference of Blox's simulator (``--blox-compat``), written to be obviously right.

It follows ``shared/docs/blox-semantics.md`` step by step with dicts and lists, the way Blox's own
code does, and is the oracle the numba kernel ``fastblox.kernels.compat`` is tested against. It is
slow (it sorts every active job every round) and is never used by ``fastblox run``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

STARVATION_LIMIT_S = 3600 * 1000  # Blox's priority_thresh


@dataclass
class RefJob:
    jid: int
    arrival: float
    gpus: int
    iter_time: float
    total_iters: float
    executed: float = 0.0
    attained: float = 0.0
    priority: int = 999
    waited: float = 0.0
    running: bool = False
    previously_launched: bool = False
    gpu_ids: list = field(default_factory=list)
    num_preemptions: int = 0


@dataclass
class RefBloxResult:
    job_stats: dict  # jid -> [arrival, finish]   (tracked jobs)
    responsiveness: dict  # jid -> [arrival, first credited round]
    preemptions_per_round: dict  # t -> n
    finish: dict  # jid -> finish time, every job that finished
    num_preemptions: dict  # jid -> count
    first_start: dict  # jid -> round at which it was launched first
    end_time: float


def _key(policy: str, job: RefJob):
    if policy == "fifo":
        return job.arrival
    if policy in ("las", "tiresias"):
        return job.attained
    if policy in ("srtf", "optimus"):
        return job.iter_time * job.total_iters - job.attained
    raise ValueError(policy)


def _free_by_node(gpu_owner: list, node_of: list) -> dict:
    free: dict[int, list[int]] = {}
    for g, owner in enumerate(gpu_owner):
        if owner is None:
            free.setdefault(node_of[g], []).append(g)
    return free


def _scattered(n: int, free: dict):
    """Blox's ``_scattered_placement``: the accumulated count must hit ``n`` exactly."""
    got: list[int] = []
    for node in sorted(free):
        got.extend(free[node][:n])
        if len(got) == n:
            return got
    return None


def simulate_blox_reference(
    submit_s,
    num_gpus,
    iter_time_s,
    total_iters,
    gpus_per_node,
    policy: str = "las",
    admission: float | None = None,
    track: tuple[int, int] = (0, -1),
    round_s: float = 300.0,
    max_rounds: int = 10_000_000,
) -> RefBloxResult:
    """Replay jobs (sorted by submit time, ids 0..N-1) with Blox's exact semantics.

    ``gpus_per_node`` lists the GPUs of each node; ``admission`` is None (accept-all) or the
    load-based threshold θ; ``track`` is the inclusive id range whose completion ends the run.
    """
    n_jobs = len(submit_s)
    node_of = [nd for nd, g in enumerate(gpus_per_node) for _ in range(int(g))]
    total_gpus = len(node_of)
    gpu_owner: list = [None] * total_gpus
    lo, hi = track
    if hi < 0:
        hi = n_jobs - 1
    tracked = set(range(lo, hi + 1))
    unfinished_tracked = set(tracked)

    active: dict[int, RefJob] = {}
    overflow: list[RefJob] = []
    next_arrival = 0
    res = RefBloxResult({}, {}, {}, {}, {}, {}, 0.0)
    t = 0.0
    for _ in range(max_rounds):
        # 1. progress of jobs that were running before this round
        done = []
        for jid, job in active.items():
            if not job.running:
                continue
            first = not job.previously_launched
            job.previously_launched = True
            job.attained += round_s
            job.executed = round_s / job.iter_time + job.executed
            if first and jid in tracked:
                res.responsiveness[jid] = [job.arrival, t]
            if job.executed >= job.total_iters:
                done.append(jid)
        for jid in done:
            job = active.pop(jid)
            for g in job.gpu_ids:
                gpu_owner[g] = None
            res.finish[jid] = t
            res.num_preemptions[jid] = job.num_preemptions
            if jid in tracked:
                res.job_stats[jid] = [job.arrival, t]
            unfinished_tracked.discard(jid)
        # 2. end when every tracked job has finished
        if not unfinished_tracked:
            res.end_time = t
            return res
        # 3. arrivals
        new = []
        while next_arrival < n_jobs and submit_s[next_arrival] <= t:
            i = next_arrival
            new.append(
                RefJob(i, float(submit_s[i]), int(num_gpus[i]), float(iter_time_s[i]), float(total_iters[i]))
            )
            next_arrival += 1
        # 4. admission
        if admission is None:
            admitted = new
        else:
            overflow.extend(new)
            demand = sum(j.gpus for j in active.values())
            added = 0
            admitted = []
            while demand + added <= admission * total_gpus and overflow:
                job = overflow.pop(0)
                added += job.gpus
                admitted.append(job)
        for job in admitted:
            active[job.jid] = job
        # 5. order: stable sort by (priority, key); dict order is admission order
        order = sorted(active.values(), key=lambda j: (j.priority, _key(policy, j)))
        # 6. placement walk
        to_suspend: list[int] = []
        launched: dict[int, list[int]] = {}
        for idx, job in enumerate(order):
            if job.running:
                continue
            placement = _scattered(job.gpus, _free_by_node(gpu_owner, node_of))
            if placement is None:
                for rev in range(1, len(order) - idx):
                    victim = order[-rev]
                    if victim.running:
                        to_suspend.append(victim.jid)
                        victim.running = False
                        victim.num_preemptions += 1
                        for g in victim.gpu_ids:
                            gpu_owner[g] = None
                        placement = _scattered(job.gpus, _free_by_node(gpu_owner, node_of))
                        if placement is not None:
                            break
            if placement is None:
                break
            launched[job.jid] = placement
            for g in placement:
                gpu_owner[g] = job.jid
        for jid, placement in launched.items():
            job = active[jid]
            job.running = True
            job.gpu_ids = placement
            res.first_start.setdefault(jid, t)
        res.preemptions_per_round[t] = len(to_suspend)
        # 7. starvation guard
        suspended = set(to_suspend)
        for jid, job in active.items():
            if jid in suspended or jid in launched or job.running:
                job.waited = 0.0
            else:
                job.waited += round_s
                if job.waited >= STARVATION_LIMIT_S:
                    job.priority = 1
        t += round_s
    raise RuntimeError(f"reference Blox replay did not finish within {max_rounds} rounds")


def avg(d: dict) -> float:
    vals = np.array([v[1] - v[0] for v in d.values()], dtype=np.float64)
    return float(vals.sum() / len(vals))
