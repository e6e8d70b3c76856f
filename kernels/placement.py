"""Placement kernels: find GPUs for a gang, take them, give them back.

Cluster state (all length-``num_nodes`` unless said otherwise):
``node_gpus`` GPUs per node, ``node_base`` global id of the node's first GPU, ``node_free`` free
GPU count, ``node_mask`` bit ``i`` set when local GPU ``i`` is free (nodes hold at most 64 GPUs),
``node_up`` 1 while the node is in service, ``node_bits`` one bit per node set while it has a
free GPU and is up (64 nodes a word: placement skips full nodes a word at a time). ``owner`` (length ``num_gpus``) is the job index that
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
def next_node(node_bits, start):
    """The first node ``>= start`` with a free GPU (its bit set in ``node_bits``), or -1."""
    wi = start >> 6
    if wi >= node_bits.shape[0]:
        return -1
    word = node_bits[wi] & ~((np.uint64(1) << np.uint64(start & 63)) - np.uint64(1))
    while True:
        if word != 0:
            low = word & (~word + np.uint64(1))  # the lowest set bit alone: a power of two
            return (wi << 6) + int(np.log2(np.float64(low)))
        wi += 1
        if wi >= node_bits.shape[0]:
            return -1
        word = node_bits[wi]


@jit
def node_bits_of(node_free, node_up):
    """The ``node_bits`` words of a cluster state."""
    bits = np.zeros((node_free.shape[0] + 63) >> 6, dtype=np.uint64)
    for nd in range(node_free.shape[0]):
        if node_free[nd] > 0 and node_up[nd]:
            bits[nd >> 6] |= np.uint64(1) << np.uint64(nd & 63)
    return bits


@jit
def fit_first(n, node_free, node_mask, node_base, node_up, node_bits, out):
    """Any free GPUs: lowest-numbered first, node by node (a correct scattered placement).
    The caller has checked that at least ``n`` GPUs are free."""
    pos = 0
    nd = next_node(node_bits, 0)
    while nd >= 0:
        k = min(node_free[nd], n - pos)
        pos = _lowest_bits(node_mask[nd], k, node_base[nd], out, pos)
        if pos == n:
            return n
        nd = next_node(node_bits, nd + 1)
    return 0


@jit
def fit_blox(n, node_free, node_mask, node_base, node_up, node_bits, out):
    """Blox's ``_scattered_placement``: take ``min(free, n)`` from each node in order; the running
    total must equal ``n`` exactly at some node, else the job does not fit (Blox's quirk)."""
    pos = 0
    nd = next_node(node_bits, 0)
    while nd >= 0:
        f = node_free[nd]
        k = min(f, n)
        if pos + k > n:
            return 0
        pos = _lowest_bits(node_mask[nd], k, node_base[nd], out, pos)
        if pos == n:
            return n
        nd = next_node(node_bits, nd + 1)
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
def fit(kind, n, node_free, node_mask, node_base, node_gpus, node_up, node_bits, out):
    """Dispatch on the placement code (see ``enums``)."""
    if kind == PL_FIRST_FIT:
        return fit_first(n, node_free, node_mask, node_base, node_up, node_bits, out)
    if kind == PL_BLOX:
        return fit_blox(n, node_free, node_mask, node_base, node_up, node_bits, out)
    if kind == PL_CONSOLIDATED:
        return fit_consolidated(n, node_free, node_mask, node_base, node_gpus, node_up, out)
    return 0


@jit
def take(gpu_ids, n, job, owner, gpu_node, node_base, node_free, node_mask, node_bits):
    """Give GPUs ``gpu_ids[:n]`` (all free) to ``job``."""
    one = np.uint64(1)
    for k in range(n):
        g = gpu_ids[k]
        nd = gpu_node[g]
        owner[g] = job
        node_free[nd] -= 1
        node_mask[nd] = node_mask[nd] & ~(one << np.uint64(g - node_base[nd]))
        if node_free[nd] == 0:
            node_bits[nd >> 6] &= ~(one << np.uint64(nd & 63))


@jit
def assign(gpu_ids, n, job, alloc, alloc_off, owner, gpu_node, node_base, node_free, node_mask, node_bits):
    """Give GPUs ``gpu_ids[:n]`` to ``job`` and record them as its allocation
    (``alloc[alloc_off[job]:][:n]``, where ``release`` finds them)."""
    take(gpu_ids, n, job, owner, gpu_node, node_base, node_free, node_mask, node_bits)
    o = alloc_off[job]
    for k in range(n):
        alloc[o + k] = gpu_ids[k]


@jit
def release(gpu_ids, n, owner, gpu_node, node_base, node_free, node_mask, node_bits):
    """Free GPUs ``gpu_ids[:n]``."""
    one = np.uint64(1)
    for k in range(n):
        g = gpu_ids[k]
        nd = gpu_node[g]
        owner[g] = FREE
        node_free[nd] += 1
        node_mask[nd] = node_mask[nd] | (one << np.uint64(g - node_base[nd]))
        node_bits[nd >> 6] |= one << np.uint64(nd & 63)
