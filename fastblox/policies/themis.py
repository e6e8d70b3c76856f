"""Themis (Mahajan et al., NSDI'20): finish-time fairness with a fairness knob.

A job's finish-time fairness is ``rho = T_shared / T_alone``: the time it will have spent in the
cluster (elapsed since it arrived + its remaining work alone) over its whole work alone (times at
the reference speed on the GPUs it asked for). At every lease (a round of ``--round-s``; Themis
runs in rounds by default) the ``ceil((1 - f) · active)`` jobs with the worst ``rho`` as it will
stand at the end of the lease if they get no GPUs (``(elapsed + lease + remaining) / alone``: the
``rho_old`` of Themis' partial-allocation auction, which also favours short jobs a lease hurts
most; ties at the cut all bid) take part in the auction and are served first, in the order of their bid — how much a lease on GPUs improves
their ``rho`` (``rho`` after the lease without GPUs over ``rho`` after it with them, the
partial-allocation auction's objective, taken greedily); the other jobs get what is left over, the
worst ``rho`` first. ``f = 0``: every job bids (efficiency); ``f`` near 1: the worst-off job first
(fairness). Placement is the run's placement part. The auction is ``keys`` below, compiled into
the kernel.
"""

from __future__ import annotations

import math

import numpy as np

from .. import parts
from ..kernels import enums
from ..kernels._calls import helper
from ..kernels.enums import RUNNING
from ._opts import fraction

INF = np.inf


@helper(nrt=False)
def rho(j, t, jobs, run, restart_s, ahead):
    """Finish-time fairness ``rho = (T_elapsed + T_remaining) / T_alone`` of job ``j`` as it would
    stand ``ahead`` seconds from ``t`` if it does not run meanwhile; times at the reference speed
    on the GPUs it asked for, ``T_alone`` its whole work alone."""
    running = run.status[j] == RUNNING
    el = t - run.launch_t[j] if running else 0.0
    left = run.work_left[j] - (max(0.0, el - restart_s) * run.rate[j] if running else 0.0)
    alone = jobs.work[j] / jobs.ref_rate[j]
    return ((t + ahead - jobs.submit[j]) + left / jobs.ref_rate[j]) / alone


@helper
def keys(t, jobs, run, s, na, restart_s, lease_s, f):
    """Themis' lease auction, as an order of the ``na`` active jobs (``s.keys`` by position,
    ``s.prio`` by job). The ``ceil((1 - f) · na)`` jobs with the worst ``rho`` take part in the
    auction and come first, ordered by their bid: the ratio ``rho_wait / rho_run`` of their
    ``rho`` after a lease without and with GPUs (the partial-allocation auction's Nash-welfare
    objective, greedily); the others follow by worst ``rho`` first (the leftover allocation)."""
    r = np.empty(na)
    for a in range(na):
        r[a] = rho(s.active[a], t, jobs, run, restart_s, lease_s)
    k = int(math.ceil((1.0 - f) * na))
    if k < 1:
        k = 1
    cut = np.sort(r)[na - k] if na > 0 else 0.0
    for a in range(na):
        j = s.active[a]
        if r[a] >= cut:
            s.prio[j] = 0
            alone = jobs.work[j] / jobs.ref_rate[j]
            run_rho = r[a] - lease_s / alone
            s.keys[a] = -(r[a] / run_rho) if run_rho > 0.0 else -INF
        else:
            s.prio[j] = 1
            s.keys[a] = -r[a]


THEMIS = parts.Policy(
    "themis", enums.POL_THEMIS, True, True,
    "Themis' finish-time fairness: the worst-rho fraction 1-f bids for each lease, the rest gets leftovers",
    kind=enums.KIND_FULL, keys=keys, default_time_model="rounds",
    options=(parts.Option("f", 0.8, fraction, "fairness knob in [0, 1): the 1-f fraction with the worst rho bids"),),
)
parts.POLICIES.register(THEMIS.name, THEMIS)
