"""Placement kernels: find GPUs for a gang, take them, give them back.

Cluster state (all length-``num_nodes`` unless said otherwise):
``node_gpus`` GPUs per node, ``node_base`` global id of the node's first GPU, ``node_free`` free
GPU count, ``node_mask`` bit ``i`` set when local GPU ``i`` is free (nodes hold at most 64 GPUs),
``node_up`` 1 while the node is in service. ``owner`` (length ``num_gpus``) is the job index that
holds each GPU, or ``FREE``; ``gpu_node`` maps a GPU to its node.

``fit_*`` only look: they write the chosen global GPU ids into ``out[:n]`` and return ``n`` on
success, 0 when the job does not fit. ``take``/``release`` change the state.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit
from .enums import FREE, PL_BLOX, PL_CONSOLIDATED, PL_FIRST_FIT


@jit
def _lowest_bits(mask, k, base, out, pos):
    """Write the ``k`` lowest set bits of ``mask`` as ``base + bit`` into ``out[pos:pos+k]``."""
    m = np.uint64(mask)
    one = np.uint64(1)
    got = 0
    b = 0
    while got < k:
        if (m >> np.uint64(b)) & one:
            out[pos + got] = base + b
            got += 1
        b += 1
    return pos + got


@jit
def fit_first(n, node_free, node_mask, node_base, node_up, out):
    """Any free GPUs: lowest-numbered first, node by node (a correct scattered placement)."""
    total = 0
    for nd in range(node_free.shape[0]):
        if node_up[nd]:
            total += node_free[nd]
    if total < n:
        return 0
    pos = 0
    for nd in range(node_free.shape[0]):
        f = node_free[nd]
        if f == 0 or not node_up[nd]:
            continue
        k = min(f, n - pos)
        pos = _lowest_bits(node_mask[nd], k, node_base[nd], out, pos)
        if pos == n:
            break
    return n


@jit
def fit_blox(n, node_free, node_mask, node_base, node_up, out):
    """Blox's ``_scattered_placement``: take ``min(free, n)`` from each node in order; the running
    total must equal ``n`` exactly at some node, else the job does not fit (Blox's quirk)."""
    pos = 0
    for nd in range(node_free.shape[0]):
        f = node_free[nd]
        if f == 0 or not node_up[nd]:
            continue
        k = min(f, n)
        if pos + k > n:
            return 0
        pos = _lowest_bits(node_mask[nd], k, node_base[nd], out, pos)
        if pos == n:
            return n
    return 0


@jit
def fit_consolidated(n, node_free, node_mask, node_base, node_gpus, node_up, out):
    """Fewest nodes. A gang that fits in one node goes to the fullest node that still holds it
    (best fit; ties to the lowest node id). A larger gang takes the emptiest nodes first and fits
    only if it then spans the minimum possible number of nodes ``ceil(n / max node size)``."""
    num_nodes = node_free.shape[0]
    max_g = 0
    for nd in range(num_nodes):
        if node_up[nd] and node_gpus[nd] > max_g:
            max_g = node_gpus[nd]
    if max_g == 0:
        return 0
    if n <= max_g:
        best = -1
        best_free = 1 << 30
        for nd in range(num_nodes):
            f = node_free[nd]
            if node_up[nd] and f >= n and f < best_free:
                best = nd
                best_free = f
        if best < 0:
            return 0
        _lowest_bits(node_mask[best], n, node_base[best], out, 0)
        return n
    k_min = (n + max_g - 1) // max_g
    # nodes by descending free count, ties by id: a stable sort of -free
    keys = np.empty(num_nodes, dtype=np.int64)
    for nd in range(num_nodes):
        keys[nd] = -node_free[nd] if node_up[nd] else 1
    idx = np.argsort(keys, kind="mergesort")
    pos = 0
    used = 0
    for r in range(num_nodes):
        nd = idx[r]
        f = node_free[nd]
        if f == 0 or not node_up[nd]:
            return 0
        used += 1
        if used > k_min:
            return 0
        k = min(f, n - pos)
        pos = _lowest_bits(node_mask[nd], k, node_base[nd], out, pos)
        if pos == n:
            return n
    return 0


@jit
def fit(kind, n, node_free, node_mask, node_base, node_gpus, node_up, out):
    """Dispatch on the placement code (see ``enums``)."""
    if kind == PL_FIRST_FIT:
        return fit_first(n, node_free, node_mask, node_base, node_up, out)
    if kind == PL_BLOX:
        return fit_blox(n, node_free, node_mask, node_base, node_up, out)
    if kind == PL_CONSOLIDATED:
        return fit_consolidated(n, node_free, node_mask, node_base, node_gpus, node_up, out)
    return 0


@jit
def take(gpu_ids, n, job, owner, gpu_node, node_base, node_free, node_mask):
    """Give GPUs ``gpu_ids[:n]`` (all free) to ``job``."""
    one = np.uint64(1)
    for k in range(n):
        g = gpu_ids[k]
        nd = gpu_node[g]
        owner[g] = job
        node_free[nd] -= 1
        node_mask[nd] = node_mask[nd] & ~(one << np.uint64(g - node_base[nd]))


@jit
def release(gpu_ids, n, owner, gpu_node, node_base, node_free, node_mask):
    """Free GPUs ``gpu_ids[:n]``."""
    one = np.uint64(1)
    for k in range(n):
        g = gpu_ids[k]
        nd = gpu_node[g]
        owner[g] = FREE
        node_free[nd] += 1
        node_mask[nd] = node_mask[nd] | (one << np.uint64(g - node_base[nd]))
