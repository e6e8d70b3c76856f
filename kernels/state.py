"""NamedTuples of arrays that the kernels take (numba types them once; no jitclass, so they cache).

Every field is a numpy array; scalars travel in the small ``si``/``sf``/``ci``/``cf`` arrays of the
engine. Sentinels: ``FREE`` (-1) for a free GPU's owner, ``NO_TIME`` (-1.0) for a time not reached.
"""

from __future__ import annotations

import mmap
import sys
from typing import NamedTuple

import numba
import numpy as np
from numba.core import types

from ._jit import jit


class Nodes(NamedTuple):
    """Cluster state. Per node (length ``num_nodes``): ``gpus`` GPUs, ``base`` global id of its first
    GPU, ``free`` free GPUs, ``mask`` bit ``i`` set when local GPU ``i`` is free (nodes hold at most
    64 GPUs), ``up`` 1 while in service, ``row`` the row of ``bits`` for the node's GPU type (0 on a
    cluster of one type), ``rack`` rack id, ``gtype`` GPU type index. ``bits[0]`` has one bit per
    node set while the node is up with a free GPU; rows ``1 + t`` the same for the nodes of type
    ``t`` (heterogeneous clusters only), 64 nodes a word, so placement skips full nodes a word at a
    time. Per GPU: ``gpu_node`` its node, ``owner`` the job index holding it or ``FREE``."""

    gpus: np.ndarray
    base: np.ndarray
    free: np.ndarray
    mask: np.ndarray
    up: np.ndarray
    row: np.ndarray
    rack: np.ndarray
    gtype: np.ndarray
    bits: np.ndarray
    gpu_node: np.ndarray
    owner: np.ndarray


def full_mask(g: int) -> int:
    """The free mask of an empty node of ``g`` GPUs."""
    return (1 << int(g)) - 1 if g < 64 else (1 << 64) - 1


def make_nodes(node_gpus, node_type=None, node_rack=None, node_up=None) -> Nodes:
    """An empty cluster state (every GPU free) from per-node GPU counts, types and racks."""
    ng = np.ascontiguousarray(node_gpus, dtype=np.int64)
    n = ng.shape[0]
    gtype = np.zeros(n, dtype=np.int64) if node_type is None else np.ascontiguousarray(node_type, dtype=np.int64)
    rack = np.zeros(n, dtype=np.int64) if node_rack is None else np.ascontiguousarray(node_rack, dtype=np.int64)
    up = np.ones(n, dtype=np.uint8) if node_up is None else np.ascontiguousarray(node_up, dtype=np.uint8)
    n_types = int(gtype.max()) + 1 if n else 1
    row = gtype + 1 if n_types > 1 else np.zeros(n, dtype=np.int64)
    base = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(ng[:-1], out=base[1:])
    words = max((n + 63) >> 6, 1)
    bits = np.zeros((n_types + 1 if n_types > 1 else 1, words), dtype=np.uint64)
    for nd in range(n):
        if up[nd] and ng[nd] > 0:
            b = np.uint64(1) << np.uint64(nd & 63)
            bits[0, nd >> 6] |= b
            if row[nd]:
                bits[row[nd], nd >> 6] |= b
    total = int(ng.sum())
    return Nodes(
        gpus=ng, base=base, free=ng.copy(),
        mask=np.array([full_mask(g) for g in ng], dtype=np.uint64),
        up=up, row=row, rack=rack, gtype=gtype, bits=bits,
        gpu_node=np.repeat(np.arange(n, dtype=np.int64), ng),
        owner=np.full(total, -1, dtype=np.int64),
    )


def copy_nodes(nd: Nodes) -> Nodes:
    return Nodes(*(a.copy() for a in nd))


class Jobs(NamedTuple):
    """What the engine reads of each job (length N, sorted by submit time). ``submit`` seconds;
    ``gpus`` the gang size asked for; ``work`` total work in the job's units (iterations when its
    model's throughput is known, else seconds at the reference speed on ``gpus`` GPUs);
    ``tracked`` jobs whose completion ends the run; ``alloc_off`` (N + 1) offsets of each job's
    slots in ``Run.alloc`` (as many slots as GPUs it may ever hold); ``cls`` row of
    ``Rates.tab`` (-1: a job of unknown model); ``ref_rate`` work per second on ``gpus`` GPUs of
    the reference type (turns remaining work into seconds for remaining-time keys)."""

    submit: np.ndarray
    gpus: np.ndarray
    work: np.ndarray
    tracked: np.ndarray
    alloc_off: np.ndarray
    cls: np.ndarray
    ref_rate: np.ndarray


class Rates(NamedTuple):
    """The speed model. ``tab[c, t, n]`` work per second of a class-``c`` job on ``n`` GPUs of
    type ``t`` (NaN or 0: cannot run there); jobs of unknown model (``cls == -1``) run at
    ``type_speed[t] * speedup[n] / speedup[gpus]``; ``node_factor[c]`` multiplies the rate of a
    class-``c`` gang spread over several nodes (last entry: jobs of unknown model), unless
    ``spread[c, t, n]`` (a measured multi-node throughput, same shape as ``tab``) is positive."""

    tab: np.ndarray
    type_speed: np.ndarray
    speedup: np.ndarray
    node_factor: np.ndarray
    spread: np.ndarray


class Run(NamedTuple):
    """Mutable per-job run state (length N unless said). ``status`` (enums), ``work_left`` work
    units, ``attained``/``attained_gpu`` wall- and GPU-seconds holding GPUs, ``launch_t`` time
    of the current launch, ``first_start``/``finish`` (``NO_TIME`` until reached), ``n_preempt``
    suspensions by the scheduler, ``n_fail`` kills by a node going down, ``rate`` work per second
    of the current launch, ``version`` launch counter (stale heap entries carry an old one),
    ``alloc`` GPU ids held (slots at ``Jobs.alloc_off``), ``held``/``held_type`` GPUs and GPU type
    held now, ``want``/``want_type`` the size and type of the next launch (``ANY_TYPE``,
    ``NO_RUN``), ``lost_s`` productive seconds lost to kills since the last checkpoint, ``wait_t``
    when the job last started waiting. Tiresias: ``rank`` the queue a waiting job is in,
    ``qentry`` when it entered that queue, ``svc0``/``exec0`` its GPU-seconds / wall-seconds of
    service at its last promotion (service counts from there), ``pend0`` seconds it waited since
    then after having run (the starvation counter, up to its last launch)."""

    status: np.ndarray
    work_left: np.ndarray
    attained: np.ndarray
    attained_gpu: np.ndarray
    launch_t: np.ndarray
    first_start: np.ndarray
    finish: np.ndarray
    n_preempt: np.ndarray
    n_fail: np.ndarray
    rate: np.ndarray
    version: np.ndarray
    alloc: np.ndarray
    held: np.ndarray
    held_type: np.ndarray
    want: np.ndarray
    want_type: np.ndarray
    lost_s: np.ndarray
    wait_t: np.ndarray
    rank: np.ndarray
    qentry: np.ndarray
    svc0: np.ndarray
    exec0: np.ndarray
    pend0: np.ndarray


class Queues(NamedTuple):
    """``wq[head:head + nw]`` waiting jobs sorted by ``(wrank, wkey, job)`` (a window in 2N + 2
    slots: both ends can grow); ``rq[:nr]`` running jobs (unordered; ``rpos`` a job's slot);
    ``ro`` the running jobs in ``(rank, key, job)`` order as of the last preempting step (``ro_ver``
    a job's version when it entered it: a stale entry is a job stopped since); ``heap_*``
    completion times (min-heap of ``(t, job, version)``, stale entries dropped lazily);
    ``wake_*`` the same for policy wake-ups (Tiresias' queue crossings and promotions)."""

    wq: np.ndarray
    wkey: np.ndarray
    wrank: np.ndarray
    rq: np.ndarray
    rpos: np.ndarray
    ro: np.ndarray
    ro_ver: np.ndarray
    heap_t: np.ndarray
    heap_j: np.ndarray
    heap_v: np.ndarray
    wake_t: np.ndarray
    wake_j: np.ndarray
    wake_v: np.ndarray


class Scratch(NamedTuple):
    """Work arrays of a scheduling step (contents meaningless between steps, except ``active``
    and ``keys`` while a step waits for Python, and ``last_key``/``last_prio``)."""

    active: np.ndarray
    order: np.ndarray
    keys: np.ndarray
    prio: np.ndarray
    launched: np.ndarray
    suspended: np.ndarray
    victims: np.ndarray
    victims_pos: np.ndarray
    run_suffix: np.ndarray
    tmp: np.ndarray
    last_key: np.ndarray  # (``walk.resort``: the keys of ``q.ro``'s order, kept between steps)
    last_prio: np.ndarray


class ClusterEvents(NamedTuple):
    """Node events sorted by time: ``t`` seconds, ``node`` index, ``kind`` (``EV_FAIL``: down, the
    jobs on it killed; ``EV_RECOVER``: up with every GPU free)."""

    t: np.ndarray
    node: np.ndarray
    kind: np.ndarray


class PolicyParams(NamedTuple):
    """Parameters of the built-in policies that are arrays: ``thresholds`` Tiresias' queue limits
    in GPU-seconds (ascending; K - 1 of them for K queues); ``gittins_x``/``gittins_v`` the
    Gittins index as a step function of attained GPU-seconds (index ``gittins_v[i]`` from
    ``gittins_x[i]`` on)."""

    thresholds: np.ndarray
    gittins_x: np.ndarray
    gittins_v: np.ndarray


# ------------------------------------------------------------------------------ per-job records
#: Bytes of one job's record. The per-job fields of :class:`Jobs`, :class:`Run` and :class:`Queues`
#: that every run uses live in one 192-byte record per job (three cache lines) and the
#: NamedTuples' fields are strided views into it: a launch or a completion touches a dozen fields
#: of one job, which then share two cache lines instead of pulling in a line of each of a dozen
#: arrays. ``RECORD_OUTSIDE`` stay arrays of their own: ``status`` (1 byte a job), ``want`` and
#: ``want_type`` because steps scan them over many jobs in a row (the queue compaction, the walks:
#: 8 bytes a job in an array, a whole line a job in records), and the fields only Tiresias and
#: Gittins, node failures or checkpoints use, so that a run without them never touches their
#: (lazily zeroed) pages. Measured on 1M jobs on 2801x8 (light load): see docs/performance.md.
RECORD_BYTES = 192

#: ``(byte offset, NamedTuple, field, dtype)``. Line 0 holds what a completion and the kept running
#: order read, line 1 what a launch adds, line 2 the queue and policy fields.
RECORD_LAYOUT = (
    (0, "q", "ro_ver", np.int64), (8, "run", "version", np.int64), (16, "run", "launch_t", np.float64),
    (24, "run", "held", np.int64), (32, "run", "attained", np.float64), (40, "run", "attained_gpu", np.float64),
    (48, "run", "work_left", np.float64), (56, "run", "finish", np.float64),
    (64, "jobs", "alloc_off", np.int64), (72, "jobs", "gpus", np.int64), (80, "q", "rpos", np.int64),
    (88, "jobs", "submit", np.float64), (96, "jobs", "tracked", np.bool_), (104, "run", "held_type", np.int64),
    (112, "run", "first_start", np.float64), (120, "run", "rate", np.float64),
    (128, "run", "wait_t", np.float64), (136, "q", "wkey", np.float64), (144, "q", "wrank", np.int64),
    (152, "jobs", "cls", np.int64), (160, "jobs", "work", np.float64), (168, "jobs", "ref_rate", np.float64),
    (176, "run", "n_preempt", np.int64),
)

#: The per-job fields kept as arrays of their own (see ``RECORD_BYTES``).
RECORD_OUTSIDE = ("status", "want", "want_type", "qentry", "exec0", "pend0", "rank", "svc0", "n_fail", "lost_s")


def new_records(n: int) -> np.ndarray:
    """A zeroed ``(n + 1, RECORD_BYTES)`` byte array for ``n`` jobs, 64-byte aligned (so a record
    starts a cache line). One row more than jobs: ``Jobs.alloc_off`` has N + 1 entries.

    The memory is an anonymous ``mmap`` (page-aligned, zeroed by the OS on first touch) rather than
    a numpy allocation, which numpy advises onto transparent huge pages: faulting in 192 MB of huge
    pages took 0.03–0.66 s on the test machine depending on how much the OS had to compact first,
    4 KiB pages a steady 0.1 s, and the kernel runs as fast on either (docs/performance.md)."""
    return np.frombuffer(mmap.mmap(-1, (n + 1) * RECORD_BYTES), dtype=np.uint8).reshape(n + 1, RECORD_BYTES)


def copy_records(buf: np.ndarray) -> np.ndarray:
    out = new_records(buf.shape[0] - 1)
    out[...] = buf
    return out


def _field_len(name: str, buf: np.ndarray) -> int:
    """Entries of field ``name`` in a record buffer: one per job (N), ``alloc_off`` N + 1."""
    return buf.shape[0] if name == "alloc_off" else buf.shape[0] - 1


def record_fields(buf: np.ndarray) -> dict:
    """``{"jobs" | "run" | "q": {field: strided view}}`` of a record buffer (every field of
    length N, ``alloc_off`` N + 1)."""
    out: dict = {"jobs": {}, "run": {}, "q": {}}
    for off, group, name, dt in RECORD_LAYOUT:
        v = buf[:, off:off + np.dtype(dt).itemsize].view(dt)[:, 0]
        out[group][name] = v[:_field_len(name, buf)]
    return out


#: ``{(NamedTuple, field): (word, dtype)}``: the 8-byte word of the record each field starts in.
#: A field narrower than a word (``tracked``) has its word to itself (the bytes after it are
#: padding), so records can be filled and read a word at a time.
RECORD_WORDS = {(g, f): (off // 8, np.dtype(dt)) for off, g, f, dt in RECORD_LAYOUT}
if sys.byteorder != "little" or any(off % 8 for off, *_ in RECORD_LAYOUT):
    raise ImportError("fastblox's record layout needs a little-endian machine and 8-byte-aligned fields")


@jit(nrt=False)
def _words_in(words, cols, srcs, const_cols, const_vals, const_len):
    """``words[j, cols[c]] = srcs[c][j]`` for ``j`` below that source's length and
    ``words[j, const_cols[c]] = const_vals[c]`` for ``j`` below ``const_len[c]``: each record is
    written once, whole, while it is in cache."""
    for j in range(words.shape[0]):
        for c in range(cols.shape[0]):
            src = srcs[c]
            if j < src.shape[0]:
                words[j, cols[c]] = src[j]
        for c in range(const_cols.shape[0]):
            if j < const_len[c]:
                words[j, const_cols[c]] = const_vals[c]


@jit(nrt=False)
def _words_out(words, cols, out):
    """``out[c, j] = words[j, cols[c]]`` for the first ``out.shape[1]`` records."""
    for j in range(out.shape[1]):
        for c in range(cols.shape[0]):
            out[c, j] = words[j, cols[c]]


def _as_word(dt: np.dtype, v) -> np.ndarray:
    """``v`` (an array or a scalar) of field dtype ``dt`` as int64 words (bit patterns; a narrow
    unsigned or bool field zero-extended, which leaves its padding bytes zero)."""
    a = np.ascontiguousarray(v, dtype=dt)
    if dt.itemsize == 8:
        a = a.view(np.int64)
    elif dt.kind in "bu":
        a = a.astype(np.int64)
    else:
        raise TypeError(f"record field of dtype {dt}: only 8-byte, bool or unsigned fields are supported")
    a = a.view()
    a.flags.writeable = False  # all read-only: one tuple type (one compiled pass) whatever the inputs were
    return a


def fill_records(buf: np.ndarray, values: dict) -> None:
    """Write ``values`` (``{(group, field): array or scalar}``) into the records ``buf`` (from
    :func:`new_records`), one record at a time (a compiled pass: field by field, numpy would pull
    the whole buffer, 192 MB at 1M jobs, through the cache once per field)."""
    words = buf.view(np.int64)
    cols, srcs, ccols, cvals, clen = [], [], [], [], []
    for key, v in values.items():
        col, dt = RECORD_WORDS[key]
        n = _field_len(key[1], buf)
        if np.ndim(v) == 0:
            ccols.append(col)
            cvals.append(_as_word(dt, [v])[0])
            clen.append(n)
        else:
            if len(v) > n:
                raise ValueError(f"{key}: {len(v)} values for {n} jobs")
            cols.append(col)
            srcs.append(_as_word(dt, v))
    if not srcs:  # numba types the tuple from its first array: an empty one writes nothing
        cols, srcs = [0], [_as_word(np.dtype(np.int64), np.zeros(0, dtype=np.int64))]
    _words_in(words, np.asarray(cols, dtype=np.int64), tuple(srcs), np.asarray(ccols, dtype=np.int64),
              np.asarray(cvals, dtype=np.int64), np.asarray(clen, dtype=np.int64))


def gather_records(buf: np.ndarray, keys: list) -> list:
    """Contiguous copies of the fields ``keys`` (``(group, field)`` pairs), one entry per job,
    read one record at a time. The copies are rows of one block (in-place arithmetic on them is
    fine)."""
    n = buf.shape[0] - 1
    cols = np.asarray([RECORD_WORDS[k][0] for k in keys], dtype=np.int64)
    out = np.empty((len(keys), n), dtype=np.int64)
    _words_out(buf.view(np.int64), cols, out)
    outs = []
    for row, k in zip(out, keys):
        dt = RECORD_WORDS[k][1]
        outs.append(row.view(dt) if dt.itemsize == 8 else row.astype(dt))
    return outs


# ------------------------------------------------------------------------------ argument types
def _as_strided(a, t):
    """``t`` (numba's type of array ``a``) as strided (layout ``A``) when ``a`` is a record field."""
    if isinstance(t, types.Array) and t.layout != "A" and a.ndim == 1 and a.strides[0] == RECORD_BYTES:
        return t.copy(layout="A")
    return t


def arg_type(a):
    """numba's type of a kernel argument, except that a field of a record buffer (an array of
    stride ``RECORD_BYTES``, alone or in a NamedTuple) is typed strided whatever its length.

    numpy calls a view of zero or one element contiguous, so numba typed the fields of a one-job
    run ``C`` and compiled every kernel a second time for it (10-18 CPU-s each; a third of the
    kernels the test suite compiled). A contiguous array passes for a strided one: numba's
    unboxing of an ``A`` array takes any data, shape and strides."""
    if isinstance(a, tuple) and hasattr(a, "_fields") and all(isinstance(x, np.ndarray) for x in a):
        key = (type(a),) + tuple(map(_array_key, a))
        t = _TUPLE_TYPES.get(key)
        if t is None:
            t = _TUPLE_TYPES[key] = _tuple_type(a)
        return t
    t = numba.typeof(a)
    return _as_strided(a, t) if isinstance(a, np.ndarray) else t


def _array_key(a: np.ndarray) -> tuple:
    """What numba's type of ``a`` (and :func:`_as_strided`) depends on."""
    f = a.flags
    return a.dtype.str, a.ndim, f.c_contiguous, f.f_contiguous, f.writeable, f.aligned, a.ndim == 1 and (
        a.strides[0] == RECORD_BYTES)


def _tuple_type(a: tuple):
    t = numba.typeof(a)
    tys = [_as_strided(x, tx) for x, tx in zip(a, t.types)]
    return t if tys == list(t.types) else types.BaseTuple.from_types(tys, type(a))


#: NamedTuple types by the key of their arrays (typing ~80 arrays with numba.typeof: ~0.5 ms a call)
_TUPLE_TYPES: dict = {}


def entry(dispatcher, args):
    """The compiled function of kernel ``dispatcher`` for ``args`` (typed by :func:`arg_type`),
    compiled or loaded from the cache on first use. Calling it skips numba's dispatch, which
    types every argument at every call (for NamedTuples of arrays: tens of microseconds); call
    it with arguments of the same types."""
    sig = tuple(arg_type(a) for a in args)
    cres = dispatcher.overloads.get(sig)
    return cres.entry_point if cres is not None else dispatcher.compile(sig)


def call(dispatcher, *args):
    """``dispatcher(*args)`` through :func:`entry`: one compiled copy per argument layout."""
    return entry(dispatcher, args)(*args)
