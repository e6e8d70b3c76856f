"""Why native Gavel policies differ from Gavel's simulator: its quirks switched off one at a time.

``--compat gavel`` (``fastblox/compat_gavel.py``) replays Gavel's ``Scheduler.simulate`` exactly
(tests/test_compat_gavel.py checks it job by job). This ladder starts from that replay and, one
rung at a time, replaces one of Gavel's rules with what the native ``gavel*`` policies do; each
rung keeps the ones before it. Its last rung is then compared with the native policy, so each
part of the native-vs-Gavel gap is a measured effect (``python bench/gavel_ladder.py --write``
writes the table of docs/fidelity.md; tests/test_fidelity.py checks its ends):

Rungs (each a method of :class:`Ladder`, a subclass of the replay, overriding one rule):

1. ``native allocation``: the allocation of the native policy (HiGHS with its small efficiency
   tie-break among max-min optima, finish-time fairness by bisection, ``fifo_perf``'s rule for
   base ``fifo``) instead of ECOS's point (and base ``fifo``'s ignored random draw);
2. ``no idle GPUs``: a job chosen for a round but not in the allocation no longer holds GPUs it
   leaves idle (``_schedule_jobs_on_workers``);
3. ``no drops``: a micro-task whose steps split to 0 on some GPU no longer fails (no job dropped
   after 5 failures);
4. ``continuous work``: a round runs ``throughput x 360`` steps of work, not ``int(...)``, so a
   job no longer needs an extra round for a handful of steps left;
5. ``rounds on a 360 s grid``: rounds at ``k x 360 s``, each 360 s long even when its jobs finish
   early, and arrivals wait for the next grid point (Gavel's round ends at its last micro-task,
   and its clock jumps to the next arrival when nothing runs);
6. ``no early resets``: the allocation is recomputed only 1,920 s after the last recomputation
   (Gavel also allows it any time while its last reset is at time 0);
7. ``native type order``: agnostic policies visit the GPU types in the order of fastblox's seeded
   generator (``numpy.random.default_rng(seed).permutation``), not Python's
   ``random.Random(seed + 5).shuffle``;
8. ``native throughputs``: where Gavel has no throughput (0: ResNet-50 batch 128 on 2, 4 or 8
   K80s), the native one (fastblox's table fills an unmeasured size from the nearest measured
   one's per-GPU rate), so those jobs may run on K80s;
9. ``native LP type order``: the allocation (rung 1's native one) computed with the GPU types
   in the cluster's order (``v100, p100, k80``), as the native planner builds its LP, not in
   Gavel's alphabetical order (``k80, p100, v100``). The allocation is the same problem either
   way, but agnostic max-min's LP has many optima (every type is alike to it) and HiGHS returns
   another one when its columns are permuted.

The table gives the average JCT of the jobs each run finishes (Gavel's drops have no JCT) and
the gap to Gavel's.
"""

from __future__ import annotations

import numpy as np

from . import compat_gavel as cg
from . import fidelity
from .policies import gavel as native

RUNGS = ("native allocation", "no idle GPUs", "no drops", "continuous work", "rounds on a 360 s grid", "no early resets",
         "native type order", "native throughputs", "native LP type order")
RUNS = ("over1000_v100x36_fifo_perf", "over1000_v100x36_max_min_fairness_perf",
        "over1000_v100x36_finish_time_fairness_perf", "over1000_v100x36_fifo",
        "n2000_v100x36_max_min_fairness", "n2000_v100x36_fifo", "n2000_het36_max_min_fairness",
        "light1000_het36_max_min_fairness")


class Ladder(cg._Run):
    """The replay with the first ``k`` rungs of :data:`RUNGS` switched to the native rule."""

    def __init__(self, *a, k: int = 0, **kw):
        super().__init__(*a, **kw)
        self.off = set(RUNGS[:k])
        if "continuous work" in self.off:
            self.done_steps = self.done_steps.astype(np.float64)
        self.dispatch_t = 0.0
        if "native type order" in self.off:
            self.shuffler = _NumpyShuffler(cg.DEFAULT_SEED)
        if "native LP type order" in self.off:  # (9.: the allocation's columns as the cluster's types)
            self.abc_col = list(range(len(self.types)))

    # 1. the allocation
    def _allocate(self, jobs, idx, thr, cap):
        if "native allocation" not in self.off:
            return super()._allocate(jobs, idx, thr, cap)
        sf = self.sf[idx].astype(np.int64)
        if self.kind == "fifo":
            return native.fifo_allocation(thr, sf, cap)
        if self.kind == "max_min":
            return native.max_min_allocation(thr, sf, cap, self.aware)
        return self._native_ftf(jobs, idx, thr, sf, cap)

    def _native_ftf(self, jobs, idx, thr, sf, cap):
        v100 = self.thr[idx][:, [self.types.index("v100")]] if "v100" in self.types else thr[:, :1]
        t_eff = thr if self.aware else np.repeat(v100, len(self.abc), axis=1)
        rem = (self.steps[idx] - self.done_steps[idx]).astype(np.float64)
        m = len(jobs)
        x_iso = (cap[None, :] / m) / sf[:, None]
        x_iso = x_iso / np.maximum(x_iso.sum(axis=1), 1.0)[:, None]
        iso = (t_eff * x_iso).sum(axis=1)
        f = self.ftf
        for k, j in enumerate(jobs):
            f.cum.setdefault(j, 0.0)
            if j in f.prev_rem:
                f.cum[j] += (f.prev_rem[j] - rem[k]) / f.prev_iso[j]
        denom = np.array([f.cum[j] for j in jobs]) + rem / iso
        f.prev_rem, f.prev_iso = dict(zip(jobs, rem.tolist())), dict(zip(jobs, iso.tolist()))
        return native.ftf_allocation(t_eff, sf, cap, self.now - self.arrival[idx], rem, denom)[0]

    # 2. idle GPUs of jobs outside the allocation; 6. early resets
    def _select(self):
        if "no idle GPUs" not in self.off:
            return super()._select()
        prio = self._priorities()  # (as _Run._select, but a job outside the allocation takes no GPUs)
        order = list(range(len(self.types)))
        if not self.aware:
            self.shuffler.shuffle(order)
        queue = []
        for t in order:
            entries = [(j, t, prio[j][t], self.deficit[j, t], self.alloc[j][t]) for j in self.active if j in self.alloc]
            queue += sorted(entries, key=lambda e: (e[2], e[3], e[4]), reverse=True)
        left = self.cap.astype(np.int64).tolist()
        taken, out = set(), []
        for j, t, p, *_ in queue:
            if left[t] == 0 or j in taken or self.thr[j, t] <= 0 or (self.kind == "fifo" and p <= 0.0):
                continue
            if self.sf[j] > left[t]:
                continue
            left[t] -= self.sf[j]
            taken.add(j)
            out.append((j, t))
        return out

    def _priorities(self):
        if "no early resets" in self.off and self.last_reset == 0 and self.n_alloc > 0:
            self.last_reset = -1e-9  # only the 1,920 s rule (time 0 is no longer special)
        return super()._priorities()

    # 3. drops; 4. continuous work
    def _dispatch(self, chosen):
        self.dispatch_t = self.now
        if "continuous work" not in self.off:
            return super()._dispatch(chosen)
        running = []
        for j, t in chosen:
            if 0 <= self.last_round[j] < self.rounds - 1:
                self.preempted[j] += 1
            self.last_round[j] = self.rounds
            r = float(self.thr[j, t])
            s = min(r * self.round_s, float(self.steps[j] - self.done_steps[j]))
            running.append((self.now + s / r, j, t, s))
            if self.first[j] < 0:
                self.first[j] = self.now
        return running

    def _complete(self, running, round_start):
        if "no drops" not in self.off:
            return super()._complete(running, round_start)
        for f, j, t, s in sorted(running, key=lambda e: (-e[0], e[1])):
            ex = max(f - round_start, 0.0)
            self.done_steps[j] += s
            self.rounds_run[j] += 1
            self.run_s[j] += s / self.thr[j, t]
            self.job_time[j, t] += ex
            self.worker_time[t] += ex
            if self.done_steps[j] >= self.steps[j] - 1e-9:
                self.finish[j] = f
                self._remove(j)


class _NumpyShuffler:
    """``shuffle(order)`` as the native planner orders types: ``rng.permutation`` of a seeded
    numpy generator, one draw per round."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def shuffle(self, order: list) -> None:
        order[:] = [order[i] for i in self.rng.permutation(len(order))]


class _FixedRounds(Ladder):
    """5. rounds on the grid ``k x round_s``: a round lasts ``round_s`` (a placeholder micro-task
    of no job at its end keeps ``_Run.run``'s clock, which jumps to the largest finish time,
    there), and with nothing running the clock goes to the first grid point at or after the next
    arrival (Gavel's goes to the arrival itself)."""

    def __init__(self, arrival, *a, **kw):
        super().__init__(arrival, *a, **kw)
        self.true_arrival = self.arrival
        # the loop reads arrivals for its clock only; JCTs and ages use the true arrival below
        self.arrival = np.ceil(arrival / self.round_s) * self.round_s

    def _native_ftf(self, jobs, idx, thr, sf, cap):
        grid, self.arrival = self.arrival, self.true_arrival
        try:
            return super()._native_ftf(jobs, idx, thr, sf, cap)
        finally:
            self.arrival = grid

    def _allocation(self):
        grid, self.arrival = self.arrival, self.true_arrival
        try:
            return super()._allocation()
        finally:
            self.arrival = grid

    def _dispatch(self, chosen):
        running = super()._dispatch(chosen)
        if running:
            running.append((self.now + self.round_s, -1, 0, 0))
        return running

    def _complete(self, running, round_start):
        real = [r for r in running if r[1] >= 0]
        return super()._complete(real, round_start)


def _cls(k: int):
    return _FixedRounds if "rounds on a 360 s grid" in RUNGS[:k] else Ladder


def _gavel_jobs(run: str, w) -> np.ndarray:
    """Positions of the jobs Gavel finished (the averages are over them: Gavel's drops have no JCT)."""
    theirs = fidelity.peer_finish(run)
    return np.array([i in theirs for i in w.job_id.tolist()])


def _trace(wl: str, traces: dict):
    from .traces import read_trace

    if wl not in traces:
        traces[wl] = read_trace(fidelity.GAVEL_WORKLOADS[wl], steps_per_s="builtin")
    return traces[wl]


def rung_finish(run: str, k: int, traces: dict) -> np.ndarray:
    """Finish times (-1: not finished) of peer run ``run``'s jobs replayed with the first ``k``
    rungs switched to the native rule (``k`` = 0: Gavel's simulator)."""
    wl, cl, pol = run.split("_", 2)
    w = _trace(wl, traces)
    counts = _counts(fidelity.GAVEL_SPECS[cl])
    types = [t for t in cg.WORKER_TYPES if counts.get(t, 0) > 0]
    thr = cg.job_throughputs(w, types)
    if "native throughputs" in RUNGS[:k]:
        thr = _native_throughputs(w, types, thr)
    r = _cls(k)(np.asarray(w.submit_s, dtype=np.float64), w.iterations.astype(np.int64),
                np.asarray(w.num_gpus, dtype=np.int64), thr, counts, pol, cg.DEFAULT_SEED,
                cg.ROUND_S, cg.RESET_S, k=k)
    r.run()
    return r.finish


def rung_avg(run: str, k: int, traces: dict) -> float:
    """Average JCT over Gavel's finished jobs of ``run`` with the first ``k`` rungs (a job the
    variant does not finish is left out: none from rung 3 on)."""
    w = _trace(run.split("_")[0], traces)
    fin = rung_finish(run, k, traces)
    sel = _gavel_jobs(run, w) & (fin >= 0)
    return float((fin[sel] - w.submit_s[sel]).mean())


def _native_throughputs(w, types, thr):
    """``thr`` with Gavel's zeros replaced by the native table's rates (8.)."""
    from .throughput import ThroughputTable

    table = ThroughputTable.builtin()
    out = thr.copy()
    codes = table.model_codes(np.asarray(w.extra["model"], dtype=object))
    for k, t in enumerate(types):
        nat = table.rates_at(codes, w.num_gpus, t)
        out[:, k] = np.where(thr[:, k] > 0, thr[:, k], nat)
    return out


def _counts(spec: str) -> dict:
    v, p, k = (int(x) for x in spec.split(":"))
    return {t: c for t, c in zip(cg.WORKER_TYPES, (v, p, k)) if c > 0}


def native_finish(run: str, traces: dict) -> np.ndarray:
    """Finish times of the native policy fastblox compares with ``run`` (docs/fidelity.md's table)."""
    from .engine import simulate

    wl, cl, pol = run.split("_", 2)
    npol, _ = fidelity.GAVEL_POLICIES[pol]
    res = simulate(_trace(wl, traces), policy=npol, **fidelity.gavel_config(cl))
    return res.jobs["finish_s"].to_numpy()


def native_avg(run: str, traces: dict) -> float:
    """The native policy's average JCT over Gavel's finished jobs."""
    w = _trace(run.split("_")[0], traces)
    fin = native_finish(run, traces)
    sel = _gavel_jobs(run, w) & np.isfinite(fin)
    return float((fin[sel] - w.submit_s[sel]).mean())
