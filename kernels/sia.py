"""Kernels of ``--compat sia``'s jobs (``fastblox.compat_sia``): a job's steps over an interval
(``SiaJob.advance``, whose plain-Python twin is ``fastblox.reference.sia.advance``); the tests
compare them."""

from __future__ import annotations

import numpy as np

from ._jit import jit
from .elastic import batch_pick

#: job_steps' answers: the interval is done (or the job finished); it needs the step time of its
#: atomic batch on its placement (not in the table); it runs a configuration the first time after
#: observations never fitted with it (the caller fits); it needs the speeds of its model on its
#: placement (not in the table); the global batch is outside the validated batch sizes
DONE, NEED_STEP, NEED_FIT, NEED_SPEEDS, OUT_OF_RANGE = 0, 1, 2, 3, 4

#: a lane's (``RunMemo.lane``: one application's profile on one placement) int fields: rows of its
#: step table, nodes, the memory correction's per-GPU cap (-1: none), the profile's initial and
#: largest global batch
L_STEPS, L_NODES, L_CAP, L_INIT_BS, L_MAX_BS = 0, 1, 2, 3, 4

#: a chain's (``RunMemo.fit_after``: one sequence of observations, 0 none) int fields: the chain it
#: extends by one observation, that observation's nodes, GPUs and atomic batch, its first child
#: and its next sibling (-1: none); float fields: the observation's step and sync seconds
C_PARENT, C_NODES, C_GPUS, C_ATOMIC, C_CHILD, C_SIBLING = 0, 1, 2, 3, 4, 5


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
def seen_in(links, chain, n, r, atomic):
    """Whether chain ``chain``'s observations (``links``: the chains' int fields) include ``n`` nodes,
    ``r`` GPUs and ``atomic``."""
    while chain > 0:
        if links[chain, C_ATOMIC] == atomic and links[chain, C_GPUS] == r and links[chain, C_NODES] == n:
            return True
        chain = links[chain, C_PARENT]
    return False


@jit(nrt=False)
def child_of(links, times, chain, n, r, atomic, step, sync):
    """The chain that extends ``chain`` by the observation (``n``, ``r``, ``atomic``, ``step``,
    ``sync``), -1 if none yet (``times``: the chains' float fields)."""
    c = links[chain, C_CHILD]
    while c >= 0:
        if (links[c, C_ATOMIC] == atomic and links[c, C_GPUS] == r and links[c, C_NODES] == n
                and times[c, 0] == step and times[c, 1] == sync):
            return c
        c = links[c, C_SIBLING]
    return -1


@jit(nrt=False)
def job_steps(t0, secs, used, r, atomic, accum, epoch, progress, attained, chain, calib, lane, st_atomic, st_times,
              sp_row, sp_f, sp_i, sp_ok, batch_sizes, grad_sqr, grad_var, ep, links, times, good_out, atomic_out,
              accum_out):
    """``SiaJob.advance``'s loop from ``secs`` left of the interval starting at ``t0`` (``used``
    seconds of it used) on ``r`` GPUs with observations ``chain`` on its type: one step per epoch
    crossed, each on the job's atomic batch and accumulation steps, its step and sync times from
    its lane's table (``lane``: the ``L_*`` fields; ``st_atomic``, ``st_times``), its gradient
    statistics from the profile's (``batch_sizes``, ``grad_sqr``, ``grad_var``; ``ep``: progress at
    each epoch's start), a configuration run the first time the chain's child (``links``,
    ``times``: the ``C_*`` fields), then the batch chosen again (``batch_pick`` on the speeds of
    the chain's model on the lane: row ``sp_row[chain]`` of ``sp_f`` (batch, scale, compute time,
    optimizer-step time), ``sp_i`` (atomic, accumulation steps), ``sp_ok``). Stops before a step
    whose time is not in the table (NEED_STEP), whose chain has no such child (NEED_FIT) or no speeds
    (NEED_SPEEDS): the caller adds them and calls again (the step is computed again from its start).
    Returns (answer, secs, used, atomic, accum, epoch, progress, attained, finish (NaN: not
    finished), chain, sqr, var (the last step's statistics), stepped (a step ran), step, sync, good
    (the last step's progress per second), steady (the last step ended the interval in its epoch and
    left chain, atomic batch and accumulation steps as they were: the same step again next time))."""
    n, cap, init_bs, max_bs = lane[L_NODES], lane[L_CAP], lane[L_INIT_BS], lane[L_MAX_BS]
    last = ep.shape[0] - 2
    finish = np.nan
    sqr = var = step = sync = good = 0.0
    stepped = finished = steady = False
    while secs > 0 and not finished:
        was = (chain, atomic, accum)
        batch = r * atomic * (accum + 1)
        k = _find(st_atomic, lane[L_STEPS], atomic)
        if k < 0:
            return NEED_STEP, secs, used, atomic, accum, epoch, progress, attained, finish, chain, sqr, var, stepped, \
                step, sync, good, False
        step, sync = st_times[k, 0], st_times[k, 1]
        ok, sqr, var = grad_at(batch_sizes, grad_sqr, grad_var, float(batch), epoch)
        if not ok:
            return OUT_OF_RANGE, secs, used, atomic, accum, epoch, progress, attained, finish, chain, sqr, var, \
                stepped, step, sync, good, False
        stepped = True
        g = (var + sqr) / (var / (batch / init_bs) + sqr)
        if not seen_in(links, chain, n, r, atomic):
            c = child_of(links, times, chain, n, r, atomic, step, sync)
            if c < 0:
                return NEED_FIT, secs, used, atomic, accum, epoch, progress, attained, finish, chain, sqr, var, \
                    stepped, step, sync, good, False
            chain = c
        row = sp_row[chain] if chain < sp_row.shape[0] else -1
        if row < 0:
            return NEED_SPEEDS, secs, used, atomic, accum, epoch, progress, attained, finish, chain, sqr, var, \
                stepped, step, sync, good, False
        good = g / (step + (step - sync) * accum) * calib
        nxt = ep[epoch + 1]
        if progress + good * secs < nxt:
            progress += good * secs
            attained += secs * r
            secs = 0.0
            steady = True
        else:
            epoch += 1
            delta = np.rint((nxt - progress) / good)  # (Python's round: half to even)
            if epoch > last:
                finish, finished = t0 + used + delta, True
            progress = nxt
            attained += delta * r
            used += delta
            secs -= delta
        batch_pick(sp_f[row, 0], sp_i[row, 1], sp_f[row, 2], sp_f[row, 3], sp_f[row, 1], sp_ok[row], sqr, var,
                   sp_i[row, 0], good_out, atomic_out, accum_out)
        atomic, accum = atomic_out[0], accum_out[0]
        if cap >= 0:
            atomic = min(atomic, cap)
        atomic = min(atomic, int(max_bs / (r * (accum + 1))))
        steady = steady and (chain, atomic, accum) == was
    return DONE, secs, used, atomic, accum, epoch, progress, attained, finish, chain, sqr, var, stepped, step, sync, \
        good, steady
