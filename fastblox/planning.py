"""What a planner policy sees and returns (Gavel, Optimus, your own).

A planner is called at every scheduling step of a ``KIND_PLAN`` policy with the indices of the
active jobs (arrival order) and the time, and answers, for each of them, a key (lower is placed
first), a GPU type index (``ANY_TYPE`` = -1, ``NO_RUN`` = -2: do not run now) and a gang size.
Running jobs whose plan differs from what they hold are stopped; then the planned jobs are
placed in key order, skipping those that do not fit.

``PlanContext`` wraps a paused run's state in numpy views a planner can read; it never lets a
planner change the run except through its answer.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .kernels import enums

ANY_TYPE = enums.ANY_TYPE
NO_RUN = enums.NO_RUN


class PlanView(NamedTuple):
    """The active jobs at the current time, one row per job (arrival order).

    ``remaining_s``: work left in seconds at the reference speed on the GPUs asked for;
    ``work_left``: work left in the job's units; ``held_gpus``/``held_type``: what it holds now
    (0 / -1 when waiting); ``max_gpus``: the largest gang it may be given."""

    idx: np.ndarray
    job_id: np.ndarray
    submit_s: np.ndarray
    num_gpus: np.ndarray
    max_gpus: np.ndarray
    model: np.ndarray
    work: np.ndarray
    work_left: np.ndarray
    remaining_s: np.ndarray
    attained_s: np.ndarray
    attained_gpu_s: np.ndarray
    running: np.ndarray
    held_gpus: np.ndarray
    held_type: np.ndarray
    num_preemptions: np.ndarray


class PlanContext:
    """Read access to a run for planners: the cluster, the speed model, the active jobs."""

    def __init__(self, state):
        self.st = state
        self.cluster = state.c
        self.gpu_types = state.c.gpu_types
        self.n_types = len(state.c.gpu_types)

    @property
    def now(self) -> float:
        return self.st.now

    def type_gpus(self) -> np.ndarray:
        """GPUs of each type in service now."""
        nd = self.st.nodes
        up = nd.up.astype(bool)
        return np.bincount(nd.gtype[up], weights=nd.gpus[up], minlength=self.n_types).astype(np.int64)

    def view(self, idx: np.ndarray) -> PlanView:
        st = self.st
        r, jb = st.run, st.jobs
        t = st.now
        running = r.status[idx] == enums.RUNNING
        el = np.where(running, t - r.launch_t[idx], 0.0)
        restart = st.restart_s
        left = r.work_left[idx] - np.maximum(0.0, el - restart) * r.rate[idx] * running
        return PlanView(
            idx=idx, job_id=st.w.job_id[idx], submit_s=jb.submit[idx], num_gpus=jb.gpus[idx],
            max_gpus=st.slots(idx), model=jb.cls[idx], work=jb.work[idx], work_left=left,
            remaining_s=left / jb.ref_rate[idx], attained_s=r.attained[idx] + el,
            attained_gpu_s=r.attained_gpu[idx] + el * r.held[idx], running=running,
            held_gpus=np.where(running, r.held[idx], 0), held_type=np.where(running, r.held_type[idx], -1),
            num_preemptions=r.n_preempt[idx],
        )

    def rate(self, idx: np.ndarray, gpu_type: int, n) -> np.ndarray:
        """Work units per second of jobs ``idx`` on ``n`` GPUs (an int or one per job) of
        ``gpu_type`` within one node (no placement effects); 0 where they cannot run."""
        st = self.st
        jb, rt = st.jobs, st.rates
        n = np.broadcast_to(np.asarray(n, dtype=np.int64), idx.shape)
        cls = jb.cls[idx]
        out = np.zeros(len(idx))
        known = cls >= 0
        g_tab = rt.tab.shape[2]
        ok = known & (n < g_tab)
        out[ok] = rt.tab[cls[ok], gpu_type, n[ok]]
        unk = ~known
        if unk.any():
            g = jb.gpus[idx][unk]
            nn = n[unk]
            sp = rt.type_speed[gpu_type]
            valid = nn < rt.speedup.shape[0]
            ratio = np.where(nn == g, 1.0, rt.speedup[np.minimum(nn, rt.speedup.shape[0] - 1)] / rt.speedup[g])
            out[unk] = np.where(valid, sp * ratio, 0.0)
        return np.where(np.isfinite(out) & (out > 0), out, 0.0)

    def ref_rate(self, idx: np.ndarray) -> np.ndarray:
        return self.st.jobs.ref_rate[idx]
