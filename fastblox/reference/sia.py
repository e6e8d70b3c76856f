"""Plain-Python twin of :func:`fastblox.compat_sia.solve_allocation` and
:func:`fastblox.compat_sia.place_fast`: every assignment of at most one configuration to each job
tried one by one (tiny instances only), and the placement written as ``sia.py`` describes it. The
tests compare the MILP path and the array code with them."""

from __future__ import annotations

import itertools


def best_allocation(cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n) -> tuple:
    """(choice per job, -1 none; objective) minimising ``sum cost[j][choice[j]] + lambda_n *
    (unallocated jobs)`` under each type's GPU capacity, jobs with ``fixed[j] >= 0`` on that
    configuration; the first best in enumeration order."""
    jobs = len(cost)
    configs = len(cost[0]) if jobs else 0
    best, best_val = None, float("inf")
    options = [[fixed[j]] if fixed[j] >= 0 else [-1, *range(configs)] for j in range(jobs)]
    for choice in itertools.product(*options):
        used = [0] * len(capacity)
        val = 0.0
        for j, c in enumerate(choice):
            if c < 0:
                val += lambda_n
            else:
                used[cfg_type[c]] += cfg_gpus[c]
                val += float(cost[j][c])
        if any(u > cap for u, cap in zip(used, capacity)):
            continue
        if val < best_val:
            best, best_val = list(choice), val
    return best, best_val


def place(allocs: list, nodes: int, per_node: int) -> dict:
    """Node index per GPU for each ``(job, GPUs)``, largest job first (stable), on empty nodes: whole
    free nodes from a cursor, then the remaining GPUs wherever free from where the search stopped;
    the next job starts where the last one stopped."""
    free = [per_node] * nodes
    order = sorted(range(len(allocs)), key=lambda i: (-allocs[i][1], i))
    cursor = 0
    out = {}
    for i in order:
        job, need = allocs[i]
        node = cursor
        got = []
        whole = need // per_node
        for _ in range(nodes):
            if whole == 0:
                break
            if free[node] == per_node:
                got.extend([node] * per_node)
                free[node] = 0
                need -= per_node
                whole -= 1
            node = (node + 1) % nodes
        while need > 0:
            take = min(need, free[node])
            if take:
                got.extend([node] * take)
                free[node] -= take
                need -= take
            node = (node + 1) % nodes
        out[job] = got
        cursor = node
    return out


def best_rigid_choice(cost, k, pin, cap, lambda_n) -> tuple:
    """(type per job, -1 waits; objective) minimising ``sum cost[j][type] + lambda_n * (waiting
    jobs)`` with at most ``cap[t]`` GPUs (gangs ``k``) per type, jobs with ``pin[j] >= 0`` on that
    type: every choice tried (tiny instances only; the native ``sia`` policy's twin)."""
    jobs, types = len(cost), len(cap)
    best, best_val = None, float("inf")
    options = [[pin[j]] if pin[j] >= 0 else [-1, *range(types)] for j in range(jobs)]
    for choice in itertools.product(*options):
        used = [0] * types
        val = 0.0
        for j, t in enumerate(choice):
            if t < 0:
                val += lambda_n
            else:
                used[t] += k[j]
                val += float(cost[j][t])
        if any(u > c for u, c in zip(used, cap)) or val == float("inf"):
            continue
        if val < best_val:
            best, best_val = list(choice), val
    return best, best_val
