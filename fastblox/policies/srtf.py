"""SRTF: shortest remaining time first.

A job's key is its remaining work in seconds at the reference speed on the GPUs it asked for.
The key is an oracle: it uses the trace's true duration. A running job's key counts its
progress up to now, after the restart cost of its launch. The job closest to done goes first,
and the policy preempts. This is Blox's ``Srtf``.
"""

from __future__ import annotations

from .. import parts
from ..kernels import enums
from ..kernels._calls import helper


@helper(nrt=False, inline=True)
def key(j, t, running, el, jobs, run, pp, restart_s):
    left = run.work_left[j] - (max(0.0, el - restart_s) * run.rate[j] if running else 0.0)
    return 0, left / jobs.ref_rate[j]


POLICY = parts.POLICIES.register("srtf", parts.Policy(
    "srtf", enums.POL_SRTF, preemptive=True, dynamic=True, key=key, blox_name="Srtf",
    description="shortest remaining time first (oracle remaining work)",
))
