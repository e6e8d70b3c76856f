"""SJF: shortest job first.

A job's key is its whole work in seconds at the reference speed on the GPUs it asked for. The
key is an oracle: it uses the trace's true duration. The shortest waiting job goes first. It
never preempts, and it backfills like FIFO (``--policy-opt backfill=false``: it does not).
"""

from __future__ import annotations

from .. import parts
from ..kernels import enums
from ..kernels._calls import helper
from ._opts import backfill_option


@helper(nrt=False, inline=True)
def key(j, t, running, el, jobs, run, pp, restart_s):
    return 0, jobs.work[j] / jobs.ref_rate[j]


POLICY = parts.POLICIES.register("sjf", parts.Policy(
    "sjf", enums.POL_SJF, preemptive=False, dynamic=False, key=key,
    description="shortest job first (oracle total work), non-preemptive; backfills unless backfill=false",
    options=(backfill_option(),),
))
