"""Placement kernels: find GPUs for a gang, take them, give them back.

The cluster state is a :class:`kernels.state.Nodes`. ``fit_*`` only look: they write the chosen
global GPU ids into ``out[:n]`` and return ``n`` on success, 0 when the gang does not fit.
``take``/``release``/``assign`` change the state.

Every ``fit`` takes ``row``: 0 searches every node, ``1 + t`` only the nodes of GPU type ``t``
(a gang always runs on one type). The caller has checked that the cluster (or the type) has at
least ``n`` free GPUs in total where that is cheap to know.
"""

from __future__ import annotations

import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros  # LLVM's cttz (undefined for 0: never passed 0)
from numba.extending import overload

from . import variants
from ._calls import helper
from .enums import FREE, PL_BLOX, PL_CONSOLIDATED, PL_FIRST_FIT, PL_TOPOLOGY, PL_YARN
from .state import Nodes


@helper(nrt=False, inline=True)
def _lowest_bits(mask, k, base, out, pos):
    """Write the ``k`` lowest set bits of ``mask`` (it has at least ``k``) as ``base + bit`` into
    ``out[pos:pos+k]``."""
    m = np.uint64(mask)
    one = np.uint64(1)
    for got in range(k):
        out[pos + got] = base + np.int64(trailing_zeros(m))
        m &= m - one  # clear the lowest set bit
    return pos + k


@helper(nrt=False, inline=True)
def next_node(bits, row, start):
    """The first node ``>= start`` whose bit is set in ``bits[row]`` (up, with a free GPU), or -1."""
    wi = start >> 6
    nw = bits.shape[1]
    if wi >= nw:
        return -1
    word = bits[row, wi] & ~((np.uint64(1) << np.uint64(start & 63)) - np.uint64(1))
    while True:
        if word != 0:
            return (wi << 6) + np.int64(trailing_zeros(word))
        wi += 1
        if wi >= nw:
            return -1
        word = bits[row, wi]


@helper(nrt=False, inline=True)
def set_node_bit(nodes, nd):
    """Recompute node ``nd``'s bits from its free count and service state."""
    b = np.uint64(1) << np.uint64(nd & 63)
    r = nodes.row[nd]
    if nodes.free[nd] > 0 and nodes.up[nd]:
        nodes.bits[0, nd >> 6] |= b
        if r:
            nodes.bits[r, nd >> 6] |= b
    else:
        nodes.bits[0, nd >> 6] &= ~b
        if r:
            nodes.bits[r, nd >> 6] &= ~b


@helper(nrt=False)
def _eligible(nodes, nd, row):
    return nodes.up[nd] != 0 and (row == 0 or nodes.row[nd] == row)


@helper(nrt=False, inline=True)
def fit_first(n, row, nodes, out):
    """Any free GPUs: lowest-numbered first, node by node (a correct scattered placement)."""
    pos = 0
    nd = next_node(nodes.bits, row, 0)
    while nd >= 0:
        k = min(nodes.free[nd], n - pos)
        pos = _lowest_bits(nodes.mask[nd], k, nodes.base[nd], out, pos)
        if pos == n:
            return n
        nd = next_node(nodes.bits, row, nd + 1)
    return 0


@helper(nrt=False)
def fit_blox(n, row, nodes, out):
    """Blox's ``_scattered_placement``: take ``min(free, n)`` from each node in order; the running
    total must equal ``n`` exactly at some node, else the job does not fit (Blox's quirk)."""
    pos = 0
    nd = next_node(nodes.bits, row, 0)
    while nd >= 0:
        k = min(nodes.free[nd], n)
        if pos + k > n:
            return 0
        pos = _lowest_bits(nodes.mask[nd], k, nodes.base[nd], out, pos)
        if pos == n:
            return n
        nd = next_node(nodes.bits, row, nd + 1)
    return 0


@helper(nrt=False)
def _best_node(n, row, nodes):
    """The fullest eligible node that still holds ``n`` free GPUs (lowest id on ties), or -1."""
    best = -1
    best_free = 1 << 30
    for nd in range(nodes.free.shape[0]):
        f = nodes.free[nd]
        if f >= n and f < best_free and _eligible(nodes, nd, row):
            best = nd
            best_free = f
    return best


@helper(nrt=False)
def _max_node_size(row, nodes):
    m = 0
    for nd in range(nodes.gpus.shape[0]):
        if nodes.gpus[nd] > m and _eligible(nodes, nd, row):
            m = nodes.gpus[nd]
    return m


@helper
def _emptiest_first(n, row, nodes, rack):
    """The eligible nodes with a free GPU (of ``rack``, or any when ``rack < 0``), most free GPUs
    first, ties by id; returns ``(nodes, how many)``. A counting sort: a node has at most 64 GPUs
    (the order of a stable sort by ``-free``, without compiling one)."""
    num_nodes = nodes.free.shape[0]
    start = np.zeros(66, dtype=np.int64)  # start[64 - f + 1]: nodes with more than f free GPUs
    for nd in range(num_nodes):
        if _eligible(nodes, nd, row) and nodes.free[nd] > 0 and (rack < 0 or nodes.rack[nd] == rack):
            start[64 - nodes.free[nd] + 1] += 1
    for b in range(1, 66):
        start[b] += start[b - 1]
    idx = np.empty(start[65], dtype=np.int64)
    for nd in range(num_nodes):
        if _eligible(nodes, nd, row) and nodes.free[nd] > 0 and (rack < 0 or nodes.rack[nd] == rack):
            b = 64 - nodes.free[nd]
            idx[start[b]] = nd
            start[b] += 1
    return idx, idx.shape[0]


@helper
def _take_emptiest(n, row, nodes, out, k_max, rack):
    """Fill ``out[:n]`` from the emptiest eligible nodes (of ``rack``, or any when ``rack < 0``),
    ties by id; fails when that needs more than ``k_max`` nodes."""
    idx, m = _emptiest_first(n, row, nodes, rack)
    pos = 0
    used = 0
    for r in range(m):
        nd = idx[r]
        used += 1
        if used > k_max:
            return 0
        k = min(nodes.free[nd], n - pos)
        pos = _lowest_bits(nodes.mask[nd], k, nodes.base[nd], out, pos)
        if pos == n:
            return n
    return 0


@helper(nrt=False)
def fit_consolidated(n, row, nodes, out):
    """Fewest nodes. A gang that fits in one node goes to the fullest node that still holds it
    (best fit; ties to the lowest node id). A larger gang takes the emptiest nodes first and fits
    only if it then spans the minimum possible number of nodes ``ceil(n / max node size)``."""
    max_g = _max_node_size(row, nodes)
    if max_g == 0:
        return 0
    if n <= max_g:
        best = _best_node(n, row, nodes)
        if best < 0:
            return 0
        _lowest_bits(nodes.mask[best], n, nodes.base[best], out, 0)
        return n
    return _take_emptiest(n, row, nodes, out, (n + max_g - 1) // max_g, -1)


@helper
def fit_topology(n, row, nodes, out):
    """Topology-aware: one node if the gang fits in one (best fit); else one rack, the fullest rack
    that holds it (ties to the lowest rack id), emptiest nodes first; else across racks, emptiest
    nodes first. Never waits for a better spot: it only ranks the spots there are."""
    best = _best_node(n, row, nodes)
    if best >= 0:
        _lowest_bits(nodes.mask[best], n, nodes.base[best], out, 0)
        return n
    num_nodes = nodes.free.shape[0]
    n_racks = 0
    for nd in range(num_nodes):
        if nodes.rack[nd] + 1 > n_racks:
            n_racks = nodes.rack[nd] + 1
    rack_free = np.zeros(n_racks, dtype=np.int64)
    total = 0
    for nd in range(num_nodes):
        if _eligible(nodes, nd, row):
            rack_free[nodes.rack[nd]] += nodes.free[nd]
            total += nodes.free[nd]
    if total < n:
        return 0
    best_r = -1
    for r in range(n_racks):
        if rack_free[r] >= n and (best_r < 0 or rack_free[r] < rack_free[best_r]):
            best_r = r
    if best_r >= 0:
        return _take_emptiest(n, row, nodes, out, num_nodes, best_r)
    return _take_emptiest(n, row, nodes, out, num_nodes, -1)


@helper(nrt=False)
def _first_holding(n, row, nodes):
    """The lowest-numbered eligible node with at least ``n`` free GPUs, or -1."""
    for nd in range(nodes.free.shape[0]):
        if nodes.free[nd] >= n and _eligible(nodes, nd, row):
            return nd
    return -1


@helper(nrt=False)
def _whole_nodes(n, row, nodes, out, write):
    """Tiresias' YARN walk over idle nodes: in node order, every eligible idle node no larger
    than what is still needed is taken whole (its GPUs into ``out`` when ``write``). Returns
    ``(GPUs still needed, GPUs written)``."""
    rem = n
    pos = 0
    for nd in range(nodes.free.shape[0]):
        g = nodes.gpus[nd]
        if g > 0 and nodes.free[nd] == g and g <= rem and _eligible(nodes, nd, row):
            rem -= g
            if write:
                pos = _lowest_bits(nodes.mask[nd], g, nodes.base[nd], out, pos)
    return rem, pos


@helper(nrt=False)
def fit_yarn(n, row, nodes, out):
    """Tiresias' ``yarn`` scheme (``ms_yarn_placement``): a gang that fits in one node goes to the
    lowest-numbered node that holds it (first fit, not best fit). A larger gang takes idle nodes
    whole, lowest-numbered first, while it needs at least a whole node, and the rest from the
    lowest-numbered other node that holds it; else it waits."""
    max_g = _max_node_size(row, nodes)
    if max_g == 0:
        return 0
    if n <= max_g:
        nd = _first_holding(n, row, nodes)
        if nd < 0:
            return 0
        _lowest_bits(nodes.mask[nd], n, nodes.base[nd], out, 0)
        return n
    rem, _ = _whole_nodes(n, row, nodes, out, False)
    last = -1
    if rem > 0:
        # the first node not taken whole that holds the rest (a node is taken whole exactly when
        # the walk above, replayed in step, takes it)
        left = n
        for nd in range(nodes.free.shape[0]):
            g = nodes.gpus[nd]
            if not _eligible(nodes, nd, row):
                continue
            if g > 0 and nodes.free[nd] == g and g <= left:
                left -= g
            elif nodes.free[nd] >= rem:
                last = nd
                break
        if last < 0:
            return 0
    _, pos = _whole_nodes(n, row, nodes, out, True)
    if last >= 0:
        _lowest_bits(nodes.mask[last], rem, nodes.base[last], out, pos)
    return n


@helper(nrt=False, inline=True)
def fit(kind, n, row, nodes, out):
    """Dispatch on the placement code (see ``enums``)."""
    if kind == PL_FIRST_FIT:
        return fit_first(n, row, nodes, out)
    if kind == PL_BLOX:
        return fit_blox(n, row, nodes, out)
    if kind == PL_CONSOLIDATED:
        return fit_consolidated(n, row, nodes, out)
    if kind == PL_TOPOLOGY:
        return fit_topology(n, row, nodes, out)
    if kind == PL_YARN:
        return fit_yarn(n, row, nodes, out)
    return 0


def fit_by(kind, n, row, nodes, out):
    """:func:`fit` with ``kind`` a placement code (chosen at run time) or, in a kernel specialized
    on its placement (``kernels/variants.py``), a marker whose type names it: then only that
    placement's code is compiled."""
    return fit(kind, n, row, nodes, out)


#: the placement functions by code (``fit_by`` in a specialized kernel)
FITS = {PL_FIRST_FIT: fit_first, PL_BLOX: fit_blox, PL_CONSOLIDATED: fit_consolidated, PL_TOPOLOGY: fit_topology,
        PL_YARN: fit_yarn}


@overload(fit_by, jit_options=dict(nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True, forceinline=True,
                                   _nrt=False))
def _ov_fit_by(kind, n, row, nodes, out):
    code = variants.fixed_code(kind, "placement_code")
    if code is None:
        return lambda kind, n, row, nodes, out: fit(kind, n, row, nodes, out)
    f = FITS[code]
    return lambda kind, n, row, nodes, out: f(n, row, nodes, out)


@helper(nrt=False, inline=True)
def take(gpu_ids, o, n, job, nodes):
    """Give GPUs ``gpu_ids[o:o + n]`` (all free) to ``job``."""
    one = np.uint64(1)
    for k in range(o, o + n):
        g = gpu_ids[k]
        nd = nodes.gpu_node[g]
        nodes.owner[g] = job
        nodes.free[nd] -= 1
        nodes.mask[nd] = nodes.mask[nd] & ~(one << np.uint64(g - nodes.base[nd]))
        if nodes.free[nd] == 0:
            b = ~(one << np.uint64(nd & 63))
            nodes.bits[0, nd >> 6] &= b
            r = nodes.row[nd]
            if r:
                nodes.bits[r, nd >> 6] &= b


@helper(nrt=False, inline=True)
def assign(gpu_ids, n, job, alloc, o, nodes):
    """Give GPUs ``gpu_ids[:n]`` to ``job`` and record them as its allocation ``alloc[o:o+n]``
    (where ``release`` finds them)."""
    take(gpu_ids, 0, n, job, nodes)
    for k in range(n):
        alloc[o + k] = gpu_ids[k]


@helper(nrt=False, inline=True)
def release(gpu_ids, o, n, nodes):
    """Free GPUs ``gpu_ids[o:o + n]`` (a job's slots in ``Run.alloc``: offsets rather than a slice,
    which would be a new array)."""
    one = np.uint64(1)
    for k in range(o, o + n):
        g = gpu_ids[k]
        nd = nodes.gpu_node[g]
        nodes.owner[g] = FREE
        nodes.free[nd] += 1
        nodes.mask[nd] = nodes.mask[nd] | (one << np.uint64(g - nodes.base[nd]))
        if nodes.up[nd]:
            b = one << np.uint64(nd & 63)
            nodes.bits[0, nd >> 6] |= b
            r = nodes.row[nd]
            if r:
                nodes.bits[r, nd >> 6] |= b


@helper(nrt=False, inline=True)
def spans(gpu_ids, o, n, nodes):
    """``(more than one node, more than one rack)`` for the gang ``gpu_ids[o:o + n]``."""
    if n == 0:
        return False, False
    nd0 = nodes.gpu_node[gpu_ids[o]]
    r0 = nodes.rack[nd0]
    multi_node = False
    multi_rack = False
    for k in range(o + 1, o + n):
        nd = nodes.gpu_node[gpu_ids[k]]
        if nd != nd0:
            multi_node = True
            if nodes.rack[nd] != r0:
                multi_rack = True
                break
    return multi_node, multi_rack


@helper
def fresh_nodes(node_gpus, node_base, gpu_node):
    """An empty one-type, one-rack cluster state built inside a kernel (Blox-compat runs)."""
    n = node_gpus.shape[0]
    free = node_gpus.copy()
    mask = np.zeros(n, dtype=np.uint64)
    bits = np.zeros((1, max((n + 63) >> 6, 1)), dtype=np.uint64)
    for nd in range(n):
        mask[nd] = (np.uint64(1) << np.uint64(node_gpus[nd])) - np.uint64(1) if node_gpus[nd] < 64 else ~np.uint64(0)
        if free[nd] > 0:
            bits[0, nd >> 6] |= np.uint64(1) << np.uint64(nd & 63)
    zeros = np.zeros(n, dtype=np.int64)
    return Nodes(node_gpus, node_base, free, mask, np.ones(n, dtype=np.uint8), zeros, zeros.copy(), zeros.copy(),
                 bits, gpu_node, np.full(gpu_node.shape[0], FREE, dtype=np.int64))
