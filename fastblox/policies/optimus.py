"""Optimus (Peng et al., EuroSys'18): elastic gang sizes chosen by marginal gain.

At every scheduling step (Optimus runs in rounds by default, one allocation per round) the GPUs in
service are shared out afresh:

1. every active job, shortest estimated remaining time on one GPU first, gets one GPU while
   GPUs remain (Optimus' starvation guard: one worker each before anyone gets a second);
2. then one GPU at a time goes to the job with the largest marginal gain — the drop in its
   estimated remaining time ``work_left / speed(n)`` from ``n`` to ``n + 1`` GPUs — until no GPU
   is left or every job has its cap (``max_gpus_per_job``, and never more than its largest GPU
   type holds).

``speed(n)`` is the job's throughput on ``n`` GPUs from the run's speed model (the throughput
table for known models — the oracle of Optimus' fitted speed function; Amdahl's law otherwise),
on the fastest GPU type. The planned jobs are placed shortest remaining time first; a job whose
planned size differs from what it holds is restarted at the new size (``--restart-s`` applies).
"""

from __future__ import annotations

import numpy as np

from .. import parts
from ..kernels import enums
from ..kernels import planners as kplanners
from ..planning import ANY_TYPE, NO_RUN, PlanContext
from ._opts import positive_int


class OptimusPlanner:
    def __init__(self, state, opts: dict):
        self.ctx = PlanContext(state)
        self.cap_type = int(state.c.gpus_of_type().max())
        n = len(state.w)
        self.cap = np.minimum(np.diff(state.jobs.alloc_off), self.cap_type)
        self.cmax = int(self.cap.max()) if n else 1
        self.S_all = self._speeds(np.arange(n, dtype=np.int64), self.cmax)  # speeds do not change: once

    def _speeds(self, idx: np.ndarray, cmax: int) -> np.ndarray:
        """``S[a, n]``: throughput of job ``idx[a]`` on ``n`` GPUs (0..cmax) of its fastest type."""
        ctx = self.ctx
        a = len(idx)
        rep = np.repeat(idx, cmax + 1)
        ns = np.tile(np.arange(cmax + 1, dtype=np.int64), a)
        best = np.zeros(a * (cmax + 1))
        for t in range(ctx.n_types):
            best = np.maximum(best, ctx.rate(rep, t, ns))
        return best.reshape(a, cmax + 1)

    def plan(self, idx: np.ndarray, now: float):
        ctx = self.ctx
        v = ctx.view(idx)
        a = len(idx)
        cap = self.cap[idx]
        S = self.S_all[idx]
        free = int(ctx.type_gpus().sum())
        size = np.zeros(a, dtype=np.int64)
        with np.errstate(divide="ignore"):
            T = np.where(S > 0, v.work_left[:, None] / np.where(S > 0, S, 1.0), np.inf)  # remaining time on n GPUs
        kplanners.optimus_sizes(S, T, cap.astype(np.int64), free, size)
        run_it = size > 0
        types = np.where(run_it, ANY_TYPE, NO_RUN)
        keys = np.where(run_it, T[np.arange(a), np.maximum(size, 1)], np.finfo(np.float64).max)
        return keys, types, np.maximum(size, 1)


OPTIMUS = parts.Policy(
    "optimus", enums.POL_PLAN, True, True,
    "Optimus: elastic gang sizes, one GPU each then extra GPUs by marginal gain in remaining time",
    kind=enums.KIND_PLAN, planner=OptimusPlanner, default_time_model="rounds",
    options=(parts.Option("max_gpus_per_job", 8, positive_int, "the largest gang a job may be given (at least what it asked for)"),),
)
parts.POLICIES.register(OPTIMUS.name, OPTIMUS)
