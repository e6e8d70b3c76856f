"""The speed model at launch: a job's work per second on a given GPU type, gang size and spread.

Jobs of a known model read ``Rates.tab``; jobs of unknown model run at their GPU type's relative
speed, scaled by the generic speed-up curve when they run on another number of GPUs than they
asked for (exactly ``type_speed[t]`` when they get what they asked for, so a one-type cluster
with no throughput table runs every job at exactly 1.0).
"""

from __future__ import annotations

from ._calls import helper


@helper(nrt=False, inline=True)
def base_rate(jobs, rates, j, t, n):
    """Work per second of job ``j`` on ``n`` GPUs of type ``t`` within one node (0 or NaN: cannot run)."""
    c = jobs.cls[j]
    if c < 0:
        sp = rates.type_speed[t]
        g = jobs.gpus[j]
        if n == g:
            return sp
        if n >= rates.speedup.shape[0]:
            return 0.0
        return sp * rates.speedup[n] / rates.speedup[g]
    if n >= rates.tab.shape[2]:
        return 0.0
    return rates.tab[c, t, n]


@helper(nrt=False, inline=True)
def can_run(jobs, rates, j, t, n):
    """Job ``j`` has a positive rate on ``n`` GPUs of type ``t``."""
    return base_rate(jobs, rates, j, t, n) > 0.0


@helper(nrt=False, inline=True)
def launch_rate(jobs, rates, j, t, n, multi_node, multi_rack, rack_factor):
    """Work per second of a launch, with the placement effects: a gang spanning several nodes
    runs at its measured multi-node throughput (``spread``) where the table has one, else at
    ``node_factor`` × its rate; ``rack_factor`` applies on top when it spans racks."""
    r = base_rate(jobs, rates, j, t, n)
    if multi_node:
        c = jobs.cls[j]
        if c >= 0 and n < rates.spread.shape[2] and rates.spread[c, t, n] > 0.0:
            r = rates.spread[c, t, n]
        else:
            r *= rates.node_factor[c] if c >= 0 else rates.node_factor[rates.node_factor.shape[0] - 1]
        if multi_rack:
            r *= rack_factor
    return r
