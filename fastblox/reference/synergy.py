"""Plain-Python twin of :mod:`fastblox.kernels.synergy`: Synergy's simulator (msr-fiddle/synergy,
``simulator/``) as objects, one job and one GPU at a time, written after its ``runner.py``,
``schedulers/*_synergy_new.py``, ``resources/cluster.py`` (``allocate_synergy_random``,
``_top_synergy_gpus``, ``_tune``, ``_reallocate_peer``, ``_make_fair_share``) and ``jobs/job.py``
(not their code). The tests compare the kernel to it, and both to the simulator's own runs.

Jobs come set up by :func:`fastblox.compat_synergy.job_setup` (demands, speedups, iteration times).
"""

from __future__ import annotations

import math

#: the order of a demand vector: GPUs, CPUs, memory (GB), storage speed (MB/s), network (Gbps)
NRES = 5
#: a job runs first again after this long without running (job.py: ``job_priority = 1``)
STARVE_S = 1000 * 3600
FIFO, SRTF, LAS, FTF = 0, 1, 2, 3
FAIR, GREEDY, TUNE = 0, 1, 2


class Server:
    def __init__(self, sid, cap):
        self.id = sid
        self.cap = list(cap)  # gpus, cpus, mem, sspeed, net
        self.used = [0.0] * NRES
        self.hold = [0.0] * NRES
        self.jobs = []  # jobs given resources here this round (cluster.server_job_schedule)

    def avail(self):
        return [c - u for c, u in zip(self.cap, self.used)]

    def fits(self, d):
        return all(c - u - h >= x for c, u, h, x in zip(self.cap, self.used, self.hold, d))


class Job:
    def __init__(self, i, arrival, total, gpus, demand, speedup, iter_s, penalty):
        self.id, self.arrival, self.total, self.gpus_req = i, arrival, total, gpus
        self.demand = list(demand)  # gpus, cpus, mem, sspeed, 0: the job's ideal (clipped) demand
        self.speedup_orig = self.speedup = speedup
        self.iter_s, self.penalty = iter_s, penalty
        self.done_iters = self.last_round_iters = 0
        self.attained_s = 0.0
        self.priority = 0
        self.last_run = -1.0
        self.gpus = []  # GPU ids
        self.res = {}  # server -> [gpus, cpus, mem, sspeed, net]
        self.finish = math.nan

    def alloc_vec(self):
        v = [float(len(self.gpus)), 0.0, 0.0, 0.0, 0.0]
        for r in self.res.values():
            for k in (1, 2, 3):
                v[k] += r[k]
        return v

    def remaining_s(self, fair):
        rem = self.total - self.done_iters
        return self.iter_s * rem if fair else self.iter_s * rem / self.speedup

    def key(self, policy, fair, now):
        if policy == SRTF:
            return (-self.priority, self.remaining_s(fair), self.arrival)
        if policy == LAS:
            return (-self.priority, self.attained_s * self.gpus_req, self.arrival)
        if policy == FTF:
            return (-self.priority, (now - self.arrival + self.remaining_s(fair)) / (self.iter_s * self.total),
                    self.arrival)
        return (self.arrival,)


class Cluster:
    def __init__(self, servers, gpus_per_server, cap, round_s):
        self.servers = [Server(s, cap) for s in range(servers)]
        self.G = gpus_per_server
        self.owner = [-1] * (servers * gpus_per_server)
        self.fair = [c / cap[0] for c in cap]  # per_server_size_fair
        self.round_s = round_s

    # -- allocate_synergy_random / _top_synergy_gpus
    def place(self, free, n, d):
        """GPUs (in ``free`` order) whose server still holds the per-GPU demand ``d``, and the
        resources per server; None if fewer than ``n``."""
        take, res = [], {}
        for g in free:
            s = self.servers[g // self.G]
            if s.fits(d):
                take.append(g)
                for k in range(NRES):
                    s.hold[k] += d[k]
                r = res.setdefault(s.id, [0.0] * NRES)
                for k in range(NRES):
                    r[k] += d[k]
            if len(take) == n:
                break
        for s in self.servers:
            s.hold = [0.0] * NRES
        return (take, res) if len(take) == n else (None, None)

    def give(self, job, gpus, res, fair):
        """_do_allocate + Job.allocate: take the resources, credit the round's iterations."""
        job.gpus = list(gpus)
        job.res = res
        for g in gpus:
            self.owner[g] = job.id
        for sid, r in res.items():
            s = self.servers[sid]
            for k in range(4):
                s.used[k] += r[k]
        it = job.iter_s
        if len({g // self.G for g in gpus}) > 1:
            it = it / job.penalty
        if not fair:
            it = it / job.speedup
        job.last_attained_s = job.attained_s
        job.attained_s += self.round_s
        job.last_round_iters = job.done_iters
        job.done_iters = min(job.done_iters + math.floor(self.round_s / it), job.total)

    def take_back(self, job, revert=False):
        for sid, r in job.res.items():
            s = self.servers[sid]
            for k in range(4):
                s.used[k] -= r[k]
        for g in job.gpus:
            self.owner[g] = -1
        if revert:
            job.attained_s = max(job.attained_s - self.round_s, 0.0)
            job.done_iters = job.last_round_iters
        job.gpus, job.res = [], {}

    def allocate(self, free, job, d_total, fair):
        """Place ``job`` with total demand ``d_total``; returns the GPUs left free or None."""
        n = job.gpus_req
        d = [x / d_total[0] for x in d_total]
        gpus, res = self.place(free, n, d)
        if gpus is None:
            return None
        self.give(job, gpus, res, fair)
        for sid in sorted({g // self.G for g in gpus}):
            self.servers[sid].jobs.append(job)
        taken = set(gpus)
        return [g for g in free if g not in taken]

    # -- Synergy-Tune (cluster.allocate_synergy_tune / _tune)
    def fair_share(self, job, d):
        """_make_fair_share: the proportional vector if ``d`` asks more than it anywhere."""
        if any(x > f * job.gpus_req for x, f in zip(d, self.fair)):
            job.speedup = 1
            return [d[0], self.fair[1] * job.gpus_req, self.fair[2] * job.gpus_req, self.fair[3] * job.gpus_req, d[4]]
        return None

    def tune(self, free, job):
        d = list(job.demand)
        left = self.allocate(free, job, d, False)
        if left is not None:
            return left
        f = self.fair_share(job, d)
        if f is not None:
            d = f
        left = self.allocate(free, job, d, False)
        if left is not None:
            return left
        f = self.fair_share(job, d)
        if f is None:  # (the simulator retries once more, unchanged, before asking the peers)
            left = self.allocate(free, job, d, False)
            if left is not None:
                return left
            self.adjust_peers(free, job, d)
        else:
            raise AssertionError("unreachable: a fair vector never asks more than the fair share")
        left = self.allocate(free, job, d, False)
        if left is None:
            raise RuntimeError(f"Synergy-Tune cannot place job {job.id} (the simulator exits here)")
        return left

    def underused(self, n, free):
        """_get_underutilized_servers: {server: GPUs} to free resources on."""
        if n > 1:
            for s in self.servers:
                if s.avail()[0] >= n:
                    return {s.id: n}
        count = {}
        for g in free:
            count[g // self.G] = count.get(g // self.G, 0) + 1
        out = {}
        for sid in sorted(count, key=lambda s: (count[s], s)):
            if count[sid] >= n:
                out[sid] = n
                return out
            out[sid] = count[sid]
            n -= count[sid]
        return out

    def adjust_peers(self, free, job, d):
        n = job.gpus_req
        for sid, g in self.underused(n, free).items():
            s = self.servers[sid]
            share = [x * (g / n) for x in d]
            for p in self.peers_to_shrink(share, s.avail(), s):
                res = {k: list(v) for k, v in p.res.items()}
                gpus = list(p.gpus)
                self.take_back(p, revert=True)
                pd = [float(p.gpus_req), p.demand[1], p.demand[2], p.demand[3], 0]
                f = self.fair_share(p, pd)
                if f is not None:
                    pd = f
                for k in res:
                    share_k = res[k][0] / len(gpus)
                    res[k] = [x * share_k for x in pd]
                self.give(p, gpus, res, True)

    def peers_to_shrink(self, need_vec, avail, s):
        """_reallocate_peer: the jobs on server ``s`` to bring back to their fair share."""
        need = [max(0, a - b) for a, b in zip(need_vec, avail)]
        if all(v == 0 for v in need):
            return []
        out = []
        s.jobs.sort(key=lambda j: (len({g // self.G for g in j.gpus}), -(j.alloc_vec()[1] / j.alloc_vec()[0]),
                                   -(j.alloc_vec()[2] / j.alloc_vec()[0])))
        for j in s.jobs:
            here = sum(1 for g in j.gpus if g // self.G == s.id)
            fair = [x * here for x in self.fair]
            a = j.alloc_vec()
            share = [x * (here / a[0]) for x in a]
            excess = [max(0, x1 - x2) for x1, x2 in zip(share, fair)]
            diff = [max(0, x2 - x1) for x1, x2 in zip(excess, need)]
            if all(v == 0 for v in diff):
                out.append(j)
                return out
            if all(v > 0 for v in diff):
                continue
            out.append(j)
            need = diff
        return out


def simulate(arrival, total_iters, gpus, demand, speedup, iter_s, penalty, servers, gpus_per_server, cap,
             policy, mode, round_s=300.0, static=False, max_rounds=10_000_000, log=None, wait_gaps=False,
             theta=0.0):
    """Replay the jobs (sorted by arrival) as Synergy's simulator does; returns per-job finish
    times (NaN: never finished: the simulator stops at the first round with no runnable job).
    ``log``: a list to which each round appends (time, servers' resources in use, {job: (GPU
    ids, resources held per server)}) for the tests' invariants. ``wait_gaps``: a round with no runnable job
    skips to the next arrival's round instead of ending the replay. ``theta`` > 0: arrived jobs
    become runnable in arrival order while the runnable jobs' GPUs are within ``theta`` × the
    cluster's (the one that crosses it too)."""
    cl = Cluster(servers, gpus_per_server, cap, round_s)
    jobs = [Job(i, float(arrival[i]), int(total_iters[i]), int(gpus[i]), [float(x) for x in demand[i]],
                float(speedup[i]), float(iter_s[i]), float(penalty[i])) for i in range(len(arrival))]
    fair = mode == FAIR
    now = 1.0 if static else math.ceil(jobs[0].arrival / round_s) * round_s
    nxt, runnable, running = 0, [], []
    for _ in range(max_rounds):
        for j in running:  # lease ends
            j.last_run = now
            cl.take_back(j)
            if j.done_iters >= j.total:
                j.finish = now
                runnable.remove(j)
        load = sum(j.gpus_req for j in runnable)
        while nxt < len(jobs) and jobs[nxt].arrival <= now and (theta <= 0 or load <= theta * servers * gpus_per_server):
            runnable.append(jobs[nxt])
            load += jobs[nxt].gpus_req
            nxt += 1
        for s in cl.servers:  # (all back: exactly zero, not the sum of what came back)
            s.used = [0.0] * NRES
        running = schedule(cl, runnable, policy, mode, fair, now)
        if log is not None:
            log.append((now, [list(sv.used) for sv in cl.servers],
                        {j.id: (list(j.gpus), {k: list(v) for k, v in j.res.items()}) for j in running}))
        if not runnable:
            if not wait_gaps or nxt == len(jobs):
                break
            now += math.ceil((jobs[nxt].arrival - now) / round_s) * round_s  # (the first round at or after it)
            continue
        now += round_s
    else:
        raise RuntimeError(f"the replay did not finish in {max_rounds} rounds")
    return [j.finish for j in jobs]


def schedule(cl, runnable, policy, mode, fair, now):
    """One ScheduleEvent: the jobs given GPUs this round."""
    runnable.sort(key=lambda j: j.key(policy, fair, now))
    for s in cl.servers:
        s.jobs = []
    for j in runnable:
        j.speedup = j.speedup_orig
    chosen, nfree = [], cl.owner.count(-1)
    for j in runnable:
        if nfree >= j.gpus_req:
            chosen.append(j)
            nfree -= j.gpus_req
        since = now - (j.arrival if j.last_run < 0 else j.last_run)
        if since > STARVE_S:
            j.priority = 1
    if policy == LAS and mode == TUNE:
        chosen.sort(key=lambda j: -j.gpus_req)
    free = [g for g, o in enumerate(cl.owner) if o < 0]
    running = []
    for j in (chosen if policy == LAS else runnable):
        if len(free) < j.gpus_req:
            continue
        if mode == TUNE:
            free = cl.tune(free, j)
        else:
            d = [cl.fair[k] * j.gpus_req for k in range(NRES)] if fair else list(j.demand)
            left = cl.allocate(free, j, d, fair)
            if left is None:
                continue
            free = left
        running.append(j)
    return running
