"""LAS: least attained service, counted in wall-seconds (as Blox counts it).

A job's key is the seconds it has held GPUs so far, the current launch included, whatever the
number of GPUs. The job that has run least goes first. It preempts: a waiting job that has run
less than a running one takes its GPUs. Jobs that run move back as they run, so the order
changes while jobs run. This is Blox's ``Las``. For GPU-seconds, see ``las-gpu``.
"""

from __future__ import annotations

from .. import parts
from ..kernels import enums
from ..kernels._calls import helper


@helper(nrt=False, inline=True)
def key(j, t, running, el, jobs, run, pp, restart_s):
    return 0, run.attained[j] + el


POLICY = parts.POLICIES.register("las", parts.Policy(
    "las", enums.POL_LAS, preemptive=True, dynamic=True, key=key, blox_name="Las",
    description="least attained service, wall-seconds run (as Blox)",
))
