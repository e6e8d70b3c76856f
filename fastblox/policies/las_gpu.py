"""LAS-GPU: least attained service in GPU-seconds (a continuous two-dimensional LAS).

A job's key is the GPU-seconds it has had so far: seconds held times the GPUs held, the
current launch included. A wide job therefore moves back faster than a narrow one that ran as
long. The job with the least goes first, and the policy preempts. Tiresias (``tiresias``) is
the same idea with discrete queues.
"""

from __future__ import annotations

from .. import parts
from ..kernels import enums
from ..kernels._calls import helper


@helper(nrt=False, inline=True)
def key(j, t, running, el, jobs, run, pp, restart_s):
    return 0, run.attained_gpu[j] + el * run.held[j]


POLICY = parts.POLICIES.register("las-gpu", parts.Policy(
    "las-gpu", enums.POL_LAS_GPU, preemptive=True, dynamic=True, key=key,
    description="least attained service in GPU-seconds (continuous 2D-LAS)",
))
