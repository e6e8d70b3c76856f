"""Tiresias' simulator's semantics, for ``--compat tiresias``: its 2D-LAS and 2D-Gittins as its
``run_sim.py`` runs them (SymbioticLab/Tiresias at ``959f9b0``), to the second.

fastblox's native ``tiresias`` policy is the rule of the paper with exact times (a job moves down
the instant its GPU-service crosses a threshold). Tiresias' simulator differs in ways that change
results, and this module reproduces each one (the line of ``run_sim.py`` ``dlas_sim_jobs`` it
comes from in brackets):

* **Whole seconds.** Submit times and durations are integers (``int(float(duration))`` when the
  trace is read, ``jobs.py``), and so is every time it computes.
* **Decision points only.** Service is added up at events: an arrival, the earliest completion,
  or the next "jump" it predicts (``next_job_jump``). A running job's service in queue terms is
  ``executed_time`` *seconds*; it is demoted when ``int(executed_time × GPUs) >= limit``, at most
  one queue per event ("check demotion").
* **Late demotions.** The next jump of a running job is
  ``event_time + (limit - executed_time) // GPUs`` (``jump_time = int(math.ceil((limit -
  executed_time)/num_gpu) + event_time)``, Python 2 integer division): GPU-seconds minus seconds,
  so a multi-GPU job is checked late and demoted at some later event.
* **Queues are lists.** New jobs are appended to queue 0, demoted or promoted jobs to the end of
  their new queue; after every pass each queue is re-partitioned, running jobs first, pending
  jobs after them, each group in its previous order ("sort based on the job start time").
* **GPUs are a counter.** The pass walks the queues in order and each job in its queue: a job
  that fits in what is left runs (pending jobs start, running ones keep going), one that does not
  is skipped (a running one is preempted); no nodes, no restart cost (``CLUSTER.empty_infra()``,
  ``free_gpu``; the ``--scheme`` only changes its logs here).
* **Starvation knob** (``dlas-gpu-2``, ``-8``…): a pending job of a lower queue that has run is
  promoted to the end of queue 0 when its pending time since its last promotion reaches
  ``int(executed_time × knob)``; its ``executed_time`` restarts from 0.
* **2D-Gittins** (``dlas-gpu-gittins``): within a queue, jobs are sorted by Tiresias' index of
  ``int(executed_time × GPUs)`` from the YARN job sizes (``get_gittins_index``,
  ``cal_r_gittins_index``), highest first, ties by submit time; the index uses ``S`` instead of
  ``S - a`` and Python 2's integer division and rounding, as there.
"""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: imported lazily where used
    from .results import Result

#: Tiresias' schedule names this module runs -> (promotion knob, Gittins)
SCHEDULES = {
    "dlas-gpu": (0, False),
    "dlas-gpu-1": (1, False), "dlas-gpu-2": (2, False), "dlas-gpu-4": (4, False), "dlas-gpu-8": (8, False),
    "dlas-gpu-05": (0.5, False), "dlas-gpu-10": (10, False), "dlas-gpu-100": (100, False),
    "dlas-gpu-1000": (1000, False),
    "dlas-gpu-gittins": (0, True),
}
DEFAULT_LIMITS = (3250, 7200)  # jobs.py: queue_limit = [3250, 7200, 18000] with num_queue = 3
GITTINS_DELTA = 3250  # jobs.py: gittins_delta
#: Tiresias' schedules that the native engine reproduces job by job (docs/fidelity.md), run
#: there: name -> (what runs, RunSpec changes, on one pool of all the GPUs as its count scheme)
NATIVE_EQUIVALENTS = {
    "fjf": ("native fifo (backfilling) on one node of all the GPUs", {"policy": "fifo"}, True),
    "shortest": ("native srtf on one node of all the GPUs", {"policy": "srtf"}, True),
    "fifo": ("native fifo without backfilling on the yarn placement",
             {"policy": "fifo", "policy_opts": (("backfill", False),), "placement": "yarn"}, False),
}


def native_spec(r, cluster):
    """The native :class:`~fastblox.spec.RunSpec` that reproduces Tiresias' schedule ``r.policy``
    (a key of :data:`NATIVE_EQUIVALENTS`) on ``cluster``."""
    _, changes, pool = NATIVE_EQUIVALENTS[r.policy]
    return r.replace(compat=None, cluster=f"1x{cluster.total_gpus}" if pool else r.cluster, **changes)


def parse_options(schedule: str, opts: dict) -> dict:
    """``--policy-opt`` values of a Tiresias schedule: ``thresholds`` (its ``queue_limit``, GPU-seconds,
    ascending; default 3250;7200) and, for ``dlas-gpu-gittins``, ``distribution`` (default
    ``tiresias-yarn``, the file its simulator reads). Raises ConfigError naming a bad one."""
    from .errors import ConfigError
    from .policies._opts import ascending_list

    known = ("thresholds", "distribution") if SCHEDULES[schedule][1] else ("thresholds",)
    out = {"thresholds": DEFAULT_LIMITS, "distribution": "tiresias-yarn"}
    for k, v in opts.items():
        if k not in known:
            raise ConfigError(f"Tiresias' {schedule!r} has no option {k!r} (its options: {', '.join(known)})")
        try:
            out[k] = tuple(int(x) for x in ascending_list(v)) if k == "thresholds" else str(v)
        except ValueError as e:
            raise ConfigError(f"{k}={v!r} for Tiresias' {schedule!r}: {e}") from None
    return out


def _round2(x: float, nd: int) -> float:
    """Python 2's ``round``: half away from zero, on the exact value of the double."""
    from decimal import ROUND_HALF_UP, Decimal

    q = Decimal(1).scaleb(-nd)
    return float(Decimal(x).quantize(q, rounding=ROUND_HALF_UP))


def gittins_table(durations) -> tuple[list, list]:
    """Tiresias' ``parse_job_dist``: the sorted sizes (with a sentinel) and each one's index."""
    data = sorted(int(d) for d in durations)
    n = len(data)

    def r_gi(a):  # cal_r_gittins_index
        if a > data[-1] - 1:
            return 0.0
        idx = bisect_right(data, a)  # the first size above a
        nxt = a + GITTINS_DELTA
        idx_d = n - 1 if nxt > data[-1] - 1 else bisect_right(data, nxt)
        p = _round2((idx_d - idx) * 1.0 / (n - idx), 5)
        e_sum = sum(data[idx:idx_d]) + GITTINS_DELTA * (n - idx_d)
        e = _round2(e_sum // (n - idx), 5)  # Python 2: int / int
        return _round2(p * 1000000 / e, 4)

    gi = [r_gi(v - 1) for v in data]
    return data + [math.inf], gi + [0.0]


def _gittins_index(table, a) -> float:
    data, gi = table
    if a > data[-2]:
        return 0.0
    return gi[bisect_right(data, a)]


class _Job:
    __slots__ = ("i", "submit", "gpus", "duration", "status", "start", "end", "last_check", "total", "executed",
                 "pending", "last_pending", "q", "rank", "preempt")

    def __init__(self, i, submit, gpus, duration):
        self.i, self.submit, self.gpus, self.duration = i, submit, gpus, duration
        self.status, self.start, self.end = "PENDING", None, None
        self.last_check, self.total, self.executed = submit, 0, 0
        self.pending = self.last_pending = 0
        self.q, self.rank, self.preempt = 0, math.inf, 0


def simulate(submit_s, num_gpus, duration_s, total_gpus: int, schedule: str = "dlas-gpu", limits=DEFAULT_LIMITS,
             distribution=None) -> dict:
    """Replay jobs (in file order, submit times ascending) as Tiresias' ``dlas_sim_jobs(gputime=True)``
    does. ``limits``: the queue limits in GPU-seconds (K - 1 of them); ``distribution``: job sizes
    for ``dlas-gpu-gittins`` (Tiresias' ``yarn-gput1000.csv``). Returns per-job ``start_s``,
    ``finish_s`` (float arrays, -1: never), ``preemptions`` and ``attained_s`` (seconds run), and
    ``end_s`` (the last completion)."""
    knob, gittins = SCHEDULES[schedule]
    table = gittins_table(distribution) if gittins else None
    jobs = make_jobs(submit_s, num_gpus, duration_s)
    _Run(jobs, int(total_gpus), [int(x) for x in limits], knob, table).run()
    start = np.array([-1.0 if j.start is None else j.start for j in jobs], dtype=np.float64)
    finish = np.array([-1.0 if j.end is None else j.end for j in jobs], dtype=np.float64)
    return {"start_s": start, "finish_s": finish, "preemptions": np.array([j.preempt for j in jobs], dtype=np.int64),
            # (Tiresias adds up service at events only: a finished job ran its whole duration)
            "attained_s": np.array([j.duration if j.end is not None else j.total for j in jobs], dtype=np.float64),
            "end_s": float(max((j.end for j in jobs if j.end is not None), default=0))}


def make_jobs(submit_s, num_gpus, duration_s) -> list:
    """The jobs of a replay, as Tiresias reads them (whole seconds and GPUs, in file order)."""
    return [_Job(i, int(s), int(g), int(float(d))) for i, (s, g, d) in enumerate(zip(submit_s, num_gpus, duration_s))]


class _Run:
    """One run of :func:`simulate` (the loop of ``dlas_sim_jobs``, a method per part)."""

    def __init__(self, jobs, total_gpus, limits, knob, table):
        self.jobs, self.total, self.limits, self.knob, self.table = jobs, total_gpus, limits, knob, table
        self.queues = [[] for _ in range(len(limits) + 1)]
        self.runnable = []
        self.next_arr = 0

    def run(self) -> None:
        jobs = self.jobs
        end_t, ending = math.inf, []
        jump = math.inf
        while self.next_arr < len(jobs) or self.runnable:
            if self.next_arr >= len(jobs) and not ending:
                return  # nothing runs and nothing comes: Tiresias stops ("not large enough")
            start_t = jobs[self.next_arr].submit if self.next_arr < len(jobs) else math.inf
            t = min(start_t, end_t)
            done = ending if end_t <= start_t else []
            arrive = start_t <= end_t
            if t > jump:  # a predicted demotion or promotion comes first: only that
                t, done, arrive = jump, [], False
            for j in done:
                j.end = t
                self.runnable.remove(j)
                self.queues[j.q].remove(j)
            if arrive:
                self._arrivals(t)
            self._account(t)
            self._schedule(t)
            end_t, ending = self._next_end(t)
            jump = self._next_jump(t)

    def _arrivals(self, t) -> None:
        jobs = self.jobs
        while self.next_arr < len(jobs) and jobs[self.next_arr].submit == t:
            j = jobs[self.next_arr]
            self.runnable.append(j)
            self.queues[0].append(j)
            self.next_arr += 1

    def _account(self, t) -> None:
        """Service and pending time up to ``t``; demotions (one queue at most) and promotions."""
        last_q = len(self.queues) - 1
        for j in list(self.runnable):
            dt = int(t - j.last_check)
            j.last_check = t
            if j.status == "RUNNING":
                j.total += dt
                j.executed += dt
                if j.q < last_q and int(j.executed * j.gpus) >= self.limits[j.q]:
                    self.queues[j.q].remove(j)
                    j.q += 1
                    self.queues[j.q].append(j)
            else:
                j.pending += dt
                if j.executed > 0:
                    j.last_pending += dt
                if self.knob > 0 and j.q > 0 and j.total > 0 and j.executed > 0 and \
                        j.last_pending >= int(j.executed * self.knob):
                    j.executed = 0
                    j.last_pending = 0
                    self.queues[j.q].remove(j)
                    j.q = 0
                    self.queues[0].append(j)
            if self.table is not None:
                j.rank = _gittins_index(self.table, int(j.executed * j.gpus))

    def _schedule(self, t) -> None:
        free = self.total
        start, stop = [], []
        for q in self.queues:
            if self.table is not None:  # sort by (rank, -submit) descending: stable, as Python's sort
                q.sort(key=lambda j: (j.rank, -j.submit), reverse=True)
            for j in q:
                if free >= j.gpus:
                    if j.status == "PENDING":
                        start.append(j)
                    free -= j.gpus
                elif j.status == "RUNNING":
                    stop.append(j)
        for j in stop:
            j.status = "PENDING"
            j.preempt += 1
        for j in start:
            j.status = "RUNNING"
            if j.start is None:
                j.start = t
        for q in self.queues:
            q[:] = [j for j in q if j.status != "PENDING"] + [j for j in q if j.status == "PENDING"]

    def _next_end(self, t):
        best, ending = math.inf, []
        for j in self.runnable:
            if j.status == "RUNNING":
                e = int(t + (j.duration - j.total))
                if e < best:
                    best, ending = e, [j]
                elif e == best:
                    ending.append(j)
        return best, ending

    def _next_jump(self, t):
        last_q = len(self.queues) - 1
        jump = math.inf
        for j in self.runnable:
            if j.status == "RUNNING":
                if j.q < last_q:
                    jump = min(jump, int((self.limits[j.q] - j.executed) // j.gpus + t))
            elif self.knob > 0 and j.q > 0 and j.total and j.executed > 0:
                diff = int(j.executed * self.knob - j.last_pending)
                if diff > 0:
                    jump = min(jump, int(diff + t))
        return jump


def run(workload, r, cluster, tracked, sim_timer) -> "Result":
    """``--compat tiresias``: replay ``workload`` with resolved spec ``r`` on ``cluster`` (one pool of
    its GPUs) and build the run's :class:`~fastblox.results.Result`."""
    from .policies.tiresias import read_service
    from .results import Result, _jobs_table, _summary
    from .slices import mark

    opts = parse_options(r.policy, dict(r.policy_opts))
    dist = read_service(opts["distribution"]) if SCHEDULES[r.policy][1] else None
    with sim_timer() as t:
        out = simulate(workload.submit_s, workload.num_gpus, workload.duration_s, cluster.total_gpus, r.policy,
                       opts["thresholds"], dist)
    finish, first, n_pre, att = out["finish_s"], out["start_s"], out["preemptions"], out["attained_s"]
    att_gpu = att * workload.num_gpus
    jobs = lambda: _jobs_table(workload, first, finish, n_pre, att, att_gpu, tracked)  # noqa: E731
    summ = _summary(workload, cluster, tracked, finish, first, n_pre, att_gpu, float(workload.submit_s.min()),
                    out["end_s"], t.seconds, 0.0)
    mark(summ, None)  # (every job fits the pool: check_sizes refused larger ones, so every one finishes)
    return Result(jobs, summ, r.as_dict())
