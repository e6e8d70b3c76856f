"""FIFO: first in, first out.

A job's key is its submit time, so the jobs run in arrival order. It never preempts: a running
job keeps its GPUs until it finishes. A waiting job that does not fit is skipped and later
jobs that fit start (backfilling), so a large gang at the head does not block the cluster;
``--policy-opt backfill=false`` turns that off (head-of-line blocking: Tiresias' ``fifo``).
This is ``fastblox run``'s default policy and Blox's ``Fifo``.
"""

from __future__ import annotations

from .. import parts
from ..kernels import enums
from ..kernels._calls import helper
from ._opts import backfill_option


@helper(nrt=False, inline=True)
def key(j, t, running, el, jobs, run, pp, restart_s):
    return 0, jobs.submit[j]


POLICY = parts.POLICIES.register("fifo", parts.Policy(
    "fifo", enums.POL_FIFO, preemptive=False, dynamic=False, key=key, blox_name="Fifo",
    description="first in, first out by submit time (non-preemptive; backfills unless backfill=false)",
    options=(backfill_option(),),
))
