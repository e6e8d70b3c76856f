"""Plain-Python twins of ``kernels.planners`` (lists and sorted(), no tricks)."""

from __future__ import annotations

NO_RUN = -2


def gavel_select_reference(type_order, prio, deficit, x, thr, sf, left, eligible, fifo):
    """Returns ``(types, keys, left)`` as ``kernels.planners.gavel_select`` computes them."""
    a = len(prio)
    left = [int(v) for v in left]
    taken = [not bool(e) for e in eligible]
    types = [NO_RUN] * a
    keys = [0.0] * a
    rank = 0
    for t in type_order:
        if left[t] <= 0:
            continue
        order = sorted(range(a), key=lambda i: (-prio[i][t], -deficit[i][t], -x[i][t], i))
        for i in order:
            if left[t] <= 0:
                break
            if taken[i] or thr[i][t] <= 0 or sf[i] > left[t]:
                continue
            if fifo and prio[i][t] <= 0:
                continue
            left[t] -= sf[i]
            taken[i] = True
            types[i] = t
            keys[i] = rank
            rank += 1
    for i in range(a):
        if types[i] == NO_RUN:
            keys[i] = rank
    return types, keys, left


def optimus_sizes_reference(S, T, cap, free):
    """Returns ``(sizes, free left)`` as ``kernels.planners.optimus_sizes`` computes them."""
    import heapq

    a = len(S)
    size = [0] * a
    for i in sorted(range(a), key=lambda i: (T[i][1], i)):
        if free == 0:
            break
        if S[i][1] > 0:
            size[i] = 1
            free -= 1
    heap = []

    def push(i):
        k = size[i]
        if 0 < k < cap[i] and S[i][k + 1] > S[i][k]:
            heapq.heappush(heap, (-(T[i][k] - T[i][k + 1]), i))

    for i in range(a):
        push(i)
    while free > 0 and heap:
        _, i = heapq.heappop(heap)
        size[i] += 1
        free -= 1
        push(i)
    return size, free


def fifo_allocation_reference(thr, sf, cap):
    """``kernels.planners.fifo_allocation`` with numpy: ``x[a, T]``."""
    import numpy as np

    a, T = thr.shape
    x = np.zeros((a, T))
    avail = cap.astype(np.int64).copy()
    for j in range(a):
        ok = (avail >= sf[j]) & (thr[j] > 0)
        if not ok.any():
            break
        t = int(np.argmax(np.where(ok, thr[j], -1.0)))
        x[j, t] = 1.0
        avail[t] -= sf[j]
    return x
