"""Tiresias' discretized 2D-LAS written as a per-job user policy with state.

Job by job it runs as the built-in ``tiresias`` (``tests/test_userpol.py`` checks it, with and
without starvation promotion): the same queues, the same queue-entry times, the same demotion
and promotion instants, computed with the same operations in the same order (the same bits).

    from fastblox.examples.tiresias_user import tiresias
    fastblox.simulate(w, cluster="4x8", policy=tiresias(thresholds=(3250.0, 7200.0), promote=0.0))

The function learns what happened to a job from its state and the job's numbers: a waiting job
is asked when it arrives, when it stops (suspended, or its node failed) and at the promotion
time it asked for; a running job at its launch (``job.since_s`` is then new), at the threshold
crossing it asked for, and whenever the order of running jobs is needed (then it changes
nothing).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..errors import ConfigError
from ..userpol import make_policy

#: the per-job state: name -> (dtype, initial value)
STATE = {
    "queue": (np.int64, 0),  # its queue (0 first) as of its last launch or stop
    "qentry_s": (np.float64, -1.0),  # when it entered that queue (-1: not arrived yet)
    "on": (np.int8, 0),  # 1 from its launch to its stop
    "launch_s": (np.float64, 0.0),  # its last launch
    "svc_launch": (np.float64, 0.0),  # its service (GPU-seconds since its last promotion) at that launch
    "svc0": (np.float64, 0.0),  # attained GPU-seconds at its last promotion
    "exec0": (np.float64, 0.0),  # attained seconds at its last promotion
    "waited_s": (np.float64, 0.0),  # seconds waited after having run since its last promotion, to its last launch
    "wait_s": (np.float64, 0.0),  # when it last started waiting
}


def tiresias(thresholds=(3250.0, 7200.0), promote: float = 0.0, name: str = "tiresias-user",
             preemptive: bool = True):
    """The per-job policy (a :class:`~fastblox.parts.Policy`): queues split at ``thresholds``
    GPU-seconds (ascending), starvation promotion after waiting ``promote`` × the seconds run
    (0: off), as the built-in ``tiresias`` with the options of the same names."""
    thr = tuple(float(x) for x in np.atleast_1d(np.asarray(thresholds, dtype=np.float64)))
    if not thr or list(thr) != sorted(thr):
        raise ConfigError(f"tiresias: give one or more ascending thresholds in GPU-seconds, got {thresholds!r}")
    nq = len(thr)
    p = float(promote)

    @numba.njit
    def run_level(s, g, now):
        # the queue of a running job at now: its level at launch, then each crossing instant passed
        k = 0
        while k < nq and s.svc_launch >= thr[k]:
            k += 1
        k = max(k, s.queue)
        while k < nq and s.launch_s + (thr[k] - s.svc_launch) / g <= now:
            k += 1
        return k

    @numba.njit
    def crossing(s, g, k):
        return s.launch_s + (thr[k - 1] - s.svc_launch) / g

    @numba.njit
    def stop(s, g, now):
        k = run_level(s, g, now)
        if k != s.queue:
            s.qentry_s = crossing(s, g, k)
            s.queue = k
        s.wait_s = now
        s.on = 0

    def tiresias_user(job, now, s):
        g = job.num_gpus
        if job.running:
            if s.on == 0 or s.launch_s != job.since_s:  # launched now
                if s.on:  # suspended and placed again in the same step: its stop first
                    stop(s, g, now)
                if job.attained_s > s.exec0:
                    s.waited_s += now - s.wait_s
                s.on = 1
                s.launch_s = job.since_s
                s.svc_launch = job.attained_gpu_s - s.svc0
            k = run_level(s, g, now)
            key = s.qentry_s if k == s.queue else crossing(s, g, k)
            wake = math.inf if k >= nq else s.launch_s + (thr[k] - s.svc_launch) / g
            return 2 * k, key, wake
        if s.qentry_s < 0.0:  # arrived
            s.qentry_s = now
            s.wait_s = now
        elif s.on:  # stopped
            stop(s, g, now)
        else:  # the promotion time it asked for
            s.queue = 0
            s.qentry_s = now
            s.svc0 = job.attained_gpu_s
            s.exec0 = job.attained_s
            s.waited_s = 0.0
        ran = job.attained_s - s.exec0
        wake = math.inf
        if p > 0.0 and s.queue > 0 and ran > 0.0:
            wake = max(now, s.wait_s + (p * ran - s.waited_s))
        return 2 * s.queue + 1, s.qentry_s, wake

    return make_policy(name, tiresias_user, preemptive, "Tiresias' 2D-LAS as a per-job user policy with state",
                       state=STATE)
