"""Admission control, shared by the native kernel and Blox's compat kernel."""

from __future__ import annotations

from ._calls import helper


@helper(nrt=False, inline=True)
def admit_to(theta, total_gpus, demand, ov_head, next_arr, gpus):
    """The first arrived job not admitted now: every arrived one (``theta <= 0``: accept-all),
    else, in arrival order from ``ov_head``, while the GPUs asked for by the active jobs
    (``demand``) plus those admitted so far are within ``theta`` × the cluster's GPUs (Blox's
    load-based accept; the job that crosses the bound is admitted too)."""
    if theta <= 0.0:
        return next_arr
    added = 0
    j = ov_head
    while demand + added <= theta * total_gpus and j < next_arr:
        added += gpus[j]
        j += 1
    return j
