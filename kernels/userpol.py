"""User policies compiled into the kernel: a per-job key function, called with no Python per step.

A user writes ``key(job, now) -> key`` or ``-> (rank, key)`` over one job's ``JobView`` (its
fields are that job's scalars; ``fastblox.policy(..., per_job=True)``). The run's policy
parameters are then a :class:`UserParams` (not ``PolicyParams``) whose ``fn`` field is a
:class:`UserFn` marker: numba types it as ``UserFnType(digest)``, so the engine kernel is compiled
(and cached on disk) once per user function, keyed on the digest of its code, while every
built-in run keeps its own types and kernels. ``policy_key`` (``kernels/engine.py``) gains the
user branch when it is compiled for a ``UserParams``: :func:`user_key`.

A policy with state gets the job's record of its ``UserParams.state`` (a structured array) as a
third argument; one with state or wake-ups is also called at launches and at the wake-up times
it returns (``user_wake``, armed where the built-in Tiresias arms its own: ``kernels/engine.py``,
``next_wake``). A Python policy of all active jobs runs with :class:`PyParams`, whose ``JobView``
buffers the kernel fills when it asks for keys (``py_view``).

Errors never leave the kernel as an exception: the key function's exceptions are caught there,
a non-finite key is caught there, and both are written into ``pp.err`` (``ERR_*``, the job, the
time; the first error is kept) while the kernel goes on with a neutral key ``(0, 0.0)``. The
driver (``NativeState.drive``) reads ``pp.err`` each time the kernel returns, at the end of a
slice at the latest (``fastblox.slices``: ~0.15 s), and stops the run with one line naming the
policy (no check in the event loop: a built-in policy's kernel is not changed at all). A key of
the wrong type (an array, text) is refused before the run, when the function is typed for one
job (``fastblox.userpol``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np
from numba.core import types
from numba.extending import NativeValue, models, overload, register_model, typeof_impl, unbox

from .enums import RUNNING


ERR_NONE = 0
ERR_RAISED = 1  # the key function raised
ERR_NONFINITE = 2  # it returned NaN or an infinity
ERR_NAN_WAKE = 3  # it returned NaN as its wake-up time
ERR_SIZE = 4  # slots of ``UserParams.err``: code, job index, time, the bad key (or wake-up time)

#: digest -> ``(the user's numba dispatcher, how many numbers it returns: 1 key, 2 (rank, key), 3
#: (rank, key, wake-up time), whether it takes a state record)`` (filled by ``fastblox.userpol``
#: before a kernel compiles)
REGISTRY: dict = {}


class UserFnType(types.Type):
    """The numba type of a :class:`UserFn`: one type per user function (its digest)."""

    def __init__(self, digest: str):
        self.digest = digest
        super().__init__(name=f"UserFn({digest})")


register_model(UserFnType)(models.OpaqueModel)


class UserFn:
    """Marks the user function of a run (the value carries nothing to the kernel: its type does)."""

    def __init__(self, digest: str):
        self.digest = digest


@typeof_impl.register(UserFn)
def _typeof_user_fn(val, c):
    return UserFnType(val.digest)


@unbox(UserFnType)
def _unbox_user_fn(typ, obj, c):
    return NativeValue(c.context.get_dummy_value())


class UserParams(NamedTuple):
    """``PolicyParams`` of a run with a compiled user policy: the built-in ones' fields, the
    columns a ``JobView`` has that the kernel's state does not (``job_id``, ``duration_s``), the
    error record ``err`` (float64, ``ERR_SIZE``), the policy's per-job ``state`` (a structured
    array, one record per job; one unused record for a policy without state), ``wake_at`` (per
    job, the wake-up time its last call returned; ``inf``: none) and the marker ``fn``."""

    thresholds: np.ndarray
    gittins_x: np.ndarray
    gittins_v: np.ndarray
    job_id: np.ndarray
    duration_s: np.ndarray
    err: np.ndarray
    state: np.ndarray
    wake_at: np.ndarray
    fn: UserFn


class PyParams(NamedTuple):
    """``PolicyParams`` of a run whose keys come from a Python function of all active jobs
    (``fastblox.policy`` without ``per_job``): the built-in ones' fields, the ``JobView`` columns
    the kernel's state does not have (``job_id``, ``duration_s``) and ``columns``, a ``JobView`` of
    per-job buffers that the kernel fills for the active jobs (first A entries) before it calls
    back into Python for their keys (:func:`ask_python`): the policy gets views of them, with no
    copy. ``need`` (one int64) says which columns (bit k: the ``JobView``'s k-th field) the kernel
    fills: those the policy has read so far (``fastblox.engine.lazy_view_class``); ``token`` (one
    int64) names the run in :data:`PY_RUNS`, whose callback writes the keys."""

    thresholds: np.ndarray
    gittins_x: np.ndarray
    gittins_v: np.ndarray
    job_id: np.ndarray
    duration_s: np.ndarray
    columns: tuple  # (not ``view``: numba refuses that attribute name outside arrays)
    need: np.ndarray
    token: np.ndarray


class PyRowParams(NamedTuple):
    """``PolicyParams`` of a Python policy declared row-wise (``fastblox.policy(rowwise=True)``:
    a job's key depends on its own row only, not on the other jobs, and the function does not
    read ``now``): a waiting job's key then cannot move while it waits, so the run takes the
    sorted-queue path of the built-in ``las``/``srtf``, and Python keys only the jobs that need
    it, once per scheduling step: those that started waiting since the
    last step (arrivals, suspended and failed jobs, ``marks[:n_marks[0]]``, queued at the tail
    with a provisional rank until then) and the running ones. :class:`PyParams`' fields, then
    ``rank_of``/``key_of`` (per job, its last key: what ``policy_key`` answers), ``marks``,
    ``n_marks``."""

    thresholds: np.ndarray
    gittins_x: np.ndarray
    gittins_v: np.ndarray
    job_id: np.ndarray
    duration_s: np.ndarray
    columns: tuple
    need: np.ndarray
    token: np.ndarray
    rank_of: np.ndarray
    key_of: np.ndarray
    marks: np.ndarray
    n_marks: np.ndarray
    check: np.ndarray
    check_key: np.ndarray


#: the provisional rank of a job waiting for its key from a row-wise Python policy: after every
#: keyed job (a Python policy's ranks are 0)
UNKEYED = 1


def _is(pp, cls) -> bool:
    return isinstance(pp, types.BaseNamedTuple) and getattr(pp, "instance_class", None) is cls


def is_py(pp) -> bool:
    """Whether the numba type ``pp`` is a Python policy's (:class:`PyParams`, :class:`PyRowParams`)."""
    return _is(pp, PyParams) or _is(pp, PyRowParams)


def is_py_row(pp) -> bool:
    """Whether the numba type ``pp`` is a row-wise Python policy's :class:`PyRowParams`."""
    return _is(pp, PyRowParams)


def is_user(pp) -> bool:
    """Whether the numba type ``pp`` is a :class:`UserParams`."""
    return _is(pp, UserParams)


def user_dispatcher(pp):
    """``(dispatcher, numbers returned, takes a state record)`` of the user function of a
    ``UserParams`` numba type."""
    return REGISTRY[pp.types[UserParams._fields.index("fn")].digest]


def wakes(pp) -> bool:
    """Whether the numba type ``pp`` is a user policy's that is told of launches and may ask for
    wake-ups: one that returns three numbers or keeps per-job state."""
    return is_user(pp) and (user_dispatcher(pp)[1] == 3 or user_dispatcher(pp)[2])


def user_key(policy, j, t, running, el, jobs, run, pp, restart_s):
    """``(rank, key)`` of job ``j`` from the user's function (compiled: the overload below)."""
    raise NotImplementedError("compiled only")


_OV = dict(nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True, forceinline=True, _nrt=False)


@overload(user_key, jit_options=_OV)
def _ov_user_key(policy, j, t, running, el, jobs, run, pp, restart_s):
    from fastblox.parts import JobView

    fn, nret, stateful = user_dispatcher(pp)

    def impl(policy, j, t, running, el, jobs, run, pp, restart_s):
        left = run.work_left[j] - (max(0.0, el - restart_s) * run.rate[j] if running else 0.0)
        job = JobView(pp.job_id[j], jobs.submit[j], jobs.gpus[j], pp.duration_s[j], run.attained[j] + el,
                      run.attained_gpu[j] + el * run.held[j], left / jobs.ref_rate[j], np.int8(1 if running else 0),
                      run.n_preempt[j], run.launch_t[j] if running else run.wait_t[j])
        r = np.int64(0)
        k = 0.0
        w = math.inf
        ok = True
        try:
            if stateful:
                out = fn(job, t, pp.state[j])
            else:
                out = fn(job, t)
            if nret == 1:
                k = np.float64(out)
            else:
                r = np.int64(out[0])
                k = np.float64(out[1])
                if nret == 3:
                    w = np.float64(out[2])
        except Exception:  # noqa: BLE001 - the user's code: any error is theirs, reported by the driver
            ok = False
        if not ok:
            _fail(pp.err, ERR_RAISED, j, t, 0.0)
            return np.int64(0), 0.0
        if not math.isfinite(k):
            _fail(pp.err, ERR_NONFINITE, j, t, k)
            return np.int64(0), 0.0
        if nret == 3:
            if math.isnan(w):
                _fail(pp.err, ERR_NAN_WAKE, j, t, w)
                w = math.inf
            pp.wake_at[j] = max(w, t)  # (a time already passed: now)
        return r, k

    return impl


def py_view(pp, s, na, t, jobs, run, restart_s):
    """Fill ``pp.columns`` with the ``JobView`` of the ``na`` active jobs ``s.active`` at ``t`` when
    ``pp`` is a :class:`PyParams` (else nothing; compiled: the overload below)."""
    raise NotImplementedError("compiled only")


@overload(py_view, jit_options=_OV)
def _ov_py_view(pp, s, na, t, jobs, run, restart_s):
    if not is_py(pp):
        return lambda pp, s, na, t, jobs, run, restart_s: None

    def impl(pp, s, na, t, jobs, run, restart_s):
        v = pp.columns
        view_into(s.active[:na], pp.need[0], t, restart_s, pp.job_id, jobs.submit, jobs.gpus, pp.duration_s,
                  run.status, run.launch_t, run.wait_t, run.attained, run.attained_gpu, run.held, run.work_left,
                  run.rate, jobs.ref_rate, run.n_preempt, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9])

    return impl


def py_keys(pp, na, t):
    """Python's keys for the ``na`` active jobs at ``t`` into ``s.keys[:na]``, by a call back
    into the interpreter from the running kernel when ``pp`` is a :class:`PyParams` (the
    kernel need not return, and be called again with its ~80 arrays, at every step: ~20 µs
    a step saved); returns whether the keys are there (else the kernel stops with
    ``PY_FAILED``). Compiled: the overload below; for other parameters, False."""
    raise NotImplementedError("compiled only")


@overload(py_keys, jit_options=_OV)
def _ov_py_keys(pp, na, t):
    if not is_py(pp):
        return lambda pp, na, t: False
    return lambda pp, na, t: ask_python(pp.token[0], na, t) == 0


def py_mark(pp, j):
    """Job ``j`` starts waiting: a row-wise Python policy gives it the provisional rank
    :data:`UNKEYED` (it joins the tail of the queue) and a mark, to be keyed at the next
    scheduling step; nothing for other policies. Compiled: the overload below."""
    raise NotImplementedError("compiled only")


@overload(py_mark, jit_options=_OV)
def _ov_py_mark(pp, j):
    if not is_py_row(pp):
        return lambda pp, j: None

    def impl(pp, j):
        pp.rank_of[j] = UNKEYED
        pp.key_of[j] = 0.0
        pp.marks[pp.n_marks[0]] = j
        pp.n_marks[0] += 1

    return impl


#: token -> the callback ``fn(na, t) -> status`` of a run with a Python policy (0: its keys are
#: in ``s.keys[:na]``; anything else: it failed and holds why). Filled and emptied by
#: ``fastblox.engine.NativeState``.
PY_RUNS: dict = {}


def call_python(token, na, t):
    """The object-mode side of :func:`ask_python`: the run's callback, which catches its own
    errors (a run that is not registered, a bug, answers 2)."""
    cb = PY_RUNS.get(token)
    return 2 if cb is None else cb(na, t)


def user_wakes(pp):
    """Whether ``pp`` is a user policy's that asks for wake-ups (a constant of the compiled kernel)."""
    raise NotImplementedError("compiled only")


@overload(user_wakes, jit_options=_OV)
def _ov_user_wakes(pp):
    yes = wakes(pp)
    return lambda pp: yes


def user_wake(j, t, jobs, run, pp, restart_s):
    """The wake-up time (``inf``: none) a waking user policy asked for job ``j``: a running job's
    function is called now (its launch, or a wake-up it asked for), a waiting job's answer is the
    one of the call that keyed it when it started waiting."""
    raise NotImplementedError("compiled only")


@overload(user_wake, jit_options=_OV)
def _ov_user_wake(j, t, jobs, run, pp, restart_s):
    if not wakes(pp):
        return lambda j, t, jobs, run, pp, restart_s: math.inf

    def impl(j, t, jobs, run, pp, restart_s):
        if run.status[j] == RUNNING:
            user_key(0, j, t, True, t - run.launch_t[j], jobs, run, pp, restart_s)
        return pp.wake_at[j]

    return impl


def _fail(err, code, j, t, k):
    raise NotImplementedError("compiled only")


@overload(_fail, jit_options=_OV)
def _ov_fail(err, code, j, t, k):
    def impl(err, code, j, t, k):
        if err[0] == ERR_NONE:  # the first error is the one reported
            err[0] = code
            err[1] = j
            err[2] = t
            err[3] = k

    return impl


# ----------------------------------------------------------------- the view of the Python form
from ._jit import jit  # noqa: E402


@jit(nogil=False)  # (its object-mode block takes the GIL: numba warns about a nogil function with one)
def ask_python(token, na, t):
    """:func:`call_python` from compiled code: the one place a kernel enters the interpreter
    (numba's object mode: the GIL is taken for the call, ~1 µs)."""
    with numba.objmode(status="int64"):
        status = call_python(token, na, t)
    return status


#: ``view_into``'s ``mask`` for every column (a ``JobView`` has ten)
ALL_COLUMNS = (1 << 10) - 1


@jit(nrt=False)
def view_into(idx, mask, t, restart_s, job_id, submit, num_gpus, duration, status, launch_t, wait_t, attained,
              attained_gpu, held, work_left, rate, ref_rate, n_preempt, ids, sub, gpus, dur, att, att_gpu, rem, running,
              npre, since):
    """The columns of a ``JobView`` of jobs ``idx`` at ``t`` into the first ``len(idx)`` entries
    of the arrays ``ids`` to ``since`` (its field order), each element computed as
    ``NativeState.job_view`` computed it with numpy (the same operations in the same order: the
    same bits), in one pass instead of a dozen. Only the columns whose bit is set in ``mask``
    (bit k: the k-th field; :data:`ALL_COLUMNS`) are written."""
    for a in range(idx.shape[0]):
        j = idx[a]
        if mask & 1:
            ids[a] = job_id[j]
        if mask & 2:
            sub[a] = submit[j]
        if mask & 4:
            gpus[a] = num_gpus[j]
        if mask & 8:
            dur[a] = duration[j]
        if mask & 0b1011110000:
            r = status[j] == RUNNING
            el = t - launch_t[j] if r else 0.0
            if mask & 16:
                att[a] = attained[j] + el
            if mask & 32:
                att_gpu[a] = attained_gpu[j] + el * held[j]
            if mask & 64:
                rem[a] = (work_left[j] - max(0.0, el - restart_s) * rate[j] * (1.0 if r else 0.0)) / ref_rate[j]
            if mask & 128:
                running[a] = 1 if r else 0
            if mask & 512:
                since[a] = launch_t[j] if r else wait_t[j]
        if mask & 256:
            npre[a] = n_preempt[j]
