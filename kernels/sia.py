"""Kernels of ``--compat sia``'s jobs (``fastblox.compat_sia``): a job's steps over an interval
(``SiaJob.advance``, whose plain-Python twin is ``fastblox.reference.sia.advance``); the tests
compare them."""

from __future__ import annotations

import numpy as np

from ._jit import jit
from .elastic import batch_pick

#: job_steps' answers: the interval is done (or the job finished); it needs the step time of its
#: atomic batch on its placement (not in the table); it runs a configuration the first time (the
#: model is fitted again, new speeds); the global batch is outside the validated batch sizes
DONE, NEED_STEP, NEED_FIT, OUT_OF_RANGE = 0, 1, 2, 3


@jit(nrt=False)
def _find(keys, count, key):
    """The index of ``key`` among the first ``count`` of ``keys``, -1 if absent."""
    for i in range(count):
        if keys[i] == key:
            return i
    return -1


@jit(nrt=False)
def grad_at(batch_sizes, grad_sqr, grad_var, b, epoch):
    """``elastic.Profile.grad_stats_at(b, epoch)``: (ok, sqr, var) interpolated linearly between the
    validated batch sizes around ``b`` (the same operations on doubles; ok False outside them)."""
    m = batch_sizes.shape[0]
    lo = -1  # (bisect_right - 1: the last size <= b)
    while lo + 1 < m and batch_sizes[lo + 1] <= b:
        lo += 1
    hi = 0  # (bisect_left: the first size >= b)
    while hi < m and batch_sizes[hi] < b:
        hi += 1
    if lo < 0 or hi >= m:
        return False, 0.0, 0.0
    if lo == hi:
        return True, grad_sqr[lo, epoch], grad_var[lo, epoch]
    blo, bhi = batch_sizes[lo], batch_sizes[hi]
    sqr = ((b - blo) * grad_sqr[hi, epoch] + (bhi - b) * grad_sqr[lo, epoch]) / (bhi - blo)
    var = ((b - blo) * grad_var[hi, epoch] + (bhi - b) * grad_var[lo, epoch]) / (bhi - blo)
    return True, sqr, var


@jit(nrt=False)
def job_steps(t0, secs, used, r, atomic, accum, epoch, progress, attained, calib, init_bs, max_bs, cap,
              batch_sizes, grad_sqr, grad_var, ep, st_atomic, st_step, st_sync, n_st, seen, n_seen,
              sp_atomic, sp_accum, sp_batch, sp_ok, sp_scale, sp_time, sp_optim, good_out, atomic_out, accum_out):
    """``SiaJob.advance``'s loop from ``secs`` left of the interval starting at ``t0`` (``used``
    seconds of it used) on ``r`` GPUs: one step per epoch crossed, each on the job's atomic batch
    and accumulation steps, its step and sync times from the table of its placement (``st_*``,
    ``n_st`` rows), its gradient statistics from the profile's (``batch_sizes``, ``grad_sqr``,
    ``grad_var``; ``ep``: progress at each epoch's start), then the batch chosen again
    (``batch_pick`` on the speeds ``sp_*`` of its model on its placement, one configuration;
    ``cap``: the memory correction's per-GPU cap, -1 none). Stops before a step whose time is not
    in the table (NEED_STEP) or whose configuration (its atomic batch on ``r`` GPUs) is not among
    the ``n_seen`` first of ``seen`` (NEED_FIT: the caller fits, gives the new model's speeds and
    calls again: the step is computed again from its start). Returns (answer, secs, used, atomic,
    accum, epoch, progress, attained, finish (NaN: not finished), sqr, var (the last step's
    statistics), stepped (a step ran), step, sync (the last step's))."""
    last = ep.shape[0] - 2
    finish = np.nan
    sqr = var = step = sync = 0.0
    stepped = finished = False
    while secs > 0 and not finished:
        batch = r * atomic * (accum + 1)
        k = _find(st_atomic, n_st, atomic)
        if k < 0:
            return NEED_STEP, secs, used, atomic, accum, epoch, progress, attained, finish, sqr, var, stepped, step, sync
        step, sync = st_step[k], st_sync[k]
        ok, sqr, var = grad_at(batch_sizes, grad_sqr, grad_var, float(batch), epoch)
        if not ok:
            return OUT_OF_RANGE, secs, used, atomic, accum, epoch, progress, attained, finish, sqr, var, stepped, step, sync
        stepped = True
        g = (var + sqr) / (var / (batch / init_bs) + sqr)
        if _find(seen, n_seen, atomic) < 0:
            return NEED_FIT, secs, used, atomic, accum, epoch, progress, attained, finish, sqr, var, stepped, step, sync
        good = g / (step + (step - sync) * accum) * calib
        nxt = ep[epoch + 1]
        if progress + good * secs < nxt:
            progress += good * secs
            attained += secs * r
            secs = 0.0
        else:
            epoch += 1
            delta = np.rint((nxt - progress) / good)  # (Python's round: half to even)
            if epoch > last:
                finish, finished = t0 + used + delta, True
            progress = nxt
            attained += delta * r
            used += delta
            secs -= delta
        batch_pick(sp_batch, sp_accum, sp_time, sp_optim, sp_scale, sp_ok, sqr, var, sp_atomic, good_out, atomic_out,
                   accum_out)
        atomic, accum = atomic_out[0], accum_out[0]
        if cap >= 0:
            atomic = min(atomic, cap)
        atomic = min(atomic, int(max_bs / (r * (accum + 1))))
    return DONE, secs, used, atomic, accum, epoch, progress, attained, finish, sqr, var, stepped, step, sync
