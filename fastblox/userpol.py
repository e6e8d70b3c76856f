"""User policies compiled into the kernel (``fastblox.policy(..., per_job=True)``).

A per-job policy is ``key(job, now) -> key`` or ``-> (rank, key)``: ``job`` is a :class:`JobView`
of one job (its fields are that job's numbers), lower ``(rank, key)`` runs first, ties go to the
earlier arrival. fastblox compiles it with numba (a ``numba.njit`` function is used as it is)
into the simulation kernel, which then calls it with no Python per step:

* a function that does not read ``now`` has a key that cannot move while the job waits (a
  waiting job's fields do not change): it is keyed when it starts waiting, and running jobs when
  preemption is considered, like the built-in ``las`` (the sorted-queue path);
* a function that reads ``now`` re-keys every active job at every step (like Themis).

A policy with ``state`` columns (:func:`state_spec`) is ``key(job, now, state)``: ``state`` is
the job's record of them, which it reads and writes. It takes the sorted-queue path, and is also
called at each launch; a function returning ``(rank, key, wake_s)`` is called again for the job
at ``wake_s`` (docs/policies.md, *Policies with state*; ``fastblox.examples.tiresias_user``).

The kernel is compiled once per function (about as long as a built-in policy's path) and cached
on disk under a digest of the function's code and the values it reads (:func:`digest`):
editing the function, or a function or constant of its module that it uses, compiles it again.
"""

from __future__ import annotations

import dis
import hashlib
import types as pytypes

import numpy as np

from .errors import ConfigError
from .kernels import enums
from .kernels import userpol as kuser

_DEPTH = 3  # how deep the digest follows functions the policy calls
#: digest -> the Policy last run with that function (to compile its kernel ahead: ``engine._warm``)
POLICIES: dict = {}
#: function -> (its dispatcher typed for one job, its digest): each run of a policy compiles and
#: digests it once per process
_COMPILED: dict = {}


def _value_bytes(v, depth: int, seen: set) -> bytes:
    """Bytes standing for a value a function reads (a global or a closure cell)."""
    py = getattr(v, "py_func", v)
    if isinstance(py, pytypes.FunctionType):
        return _function_bytes(py, depth - 1, seen) if depth > 0 and id(py) not in seen else py.__qualname__.encode()
    if isinstance(v, pytypes.ModuleType):
        return b"module:" + v.__name__.encode()
    if isinstance(v, np.ndarray):
        return b"array:" + str(v.dtype).encode() + repr(v.shape).encode() + v.tobytes()
    return repr(v).encode()[:10_000]


def _code_bytes(code) -> bytes:
    """A code object's bytes without its file name and line numbers (moving a function in its
    file does not recompile it): bytecode, names, constants, nested code, recursively."""
    parts = [code.co_code, repr((code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                                 code.co_argcount, code.co_kwonlyargcount, code.co_flags)).encode()]
    for k in code.co_consts:
        parts.append(_code_bytes(k) if isinstance(k, pytypes.CodeType) else repr(k).encode())
    return b"\1".join(parts)


def _function_bytes(fn, depth: int, seen: set) -> bytes:
    seen.add(id(fn))
    code = fn.__code__
    out = [fn.__qualname__.encode(), _code_bytes(code), repr(fn.__defaults__).encode()]
    names = set()
    stack = [code]
    while stack:  # the globals read by it and by the functions nested in it
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, pytypes.CodeType))
    g = fn.__globals__
    for n in sorted(names):
        if n in g:
            out.append(n.encode() + b"=" + _value_bytes(g[n], depth, seen))
    for cell in fn.__closure__ or ():
        try:
            out.append(_value_bytes(cell.cell_contents, depth, seen))
        except ValueError:  # an empty cell
            out.append(b"<empty>")
    return b"\0".join(out)


def digest(fn) -> str:
    """A digest of what the compiled kernel of ``fn`` depends on: its code and name, the values of
    the globals and closure cells it reads (of the functions it calls: their code and values, a
    few levels deep), numba's jit options. Imported modules count by name only (an edit inside
    an imported module of your own does not recompile: give the policy a new name, or clear the
    cache)."""
    py = getattr(fn, "py_func", fn)
    h = hashlib.sha256(_function_bytes(py, _DEPTH, set()))
    h.update(repr(sorted(getattr(fn, "targetoptions", {}).items())).encode())
    return h.hexdigest()[:20]


def reads_now(fn) -> bool:
    """Whether ``fn(job, now)`` reads its second argument (conservatively: any load of it)."""
    py = getattr(fn, "py_func", fn)
    code = py.__code__
    if code.co_argcount < 2:
        return False
    name = code.co_varnames[1]
    if name in code.co_cellvars:
        return True  # a nested function reads it
    return any(ins.argval == name and ins.opname.startswith("LOAD_") for ins in dis.get_instructions(code))


def row_type():
    """The numba type of one job's :class:`JobView` as the kernel builds it."""
    from numba.core import types

    from .parts import JobView

    f8, i8 = types.float64, types.int64
    return types.NamedTuple([i8, f8, i8, f8, f8, f8, f8, types.int8, i8, f8], JobView)


def _check_return(name: str, ret) -> int:
    """How many numbers a per-job policy returns: 1 (a key), 2 (``(rank, key)``) or 3 (``(rank,
    key, wake-up time)``); raises :class:`ConfigError` for anything else."""
    from numba.core import types

    real = (types.Integer, types.Float, types.Boolean)
    if isinstance(ret, real):
        return 1
    if isinstance(ret, types.BaseTuple) and len(ret) in (2, 3) and isinstance(ret[0], (types.Integer, types.Boolean)) \
            and all(isinstance(x, real) for x in ret[1:]):
        return len(ret)
    raise ConfigError(f"policy {name!r} must return one real number per job, or a (rank, key) pair of an integer and a "
                      f"real number (or a (rank, key, wake_s) triple); it returns {ret}")


#: the dtypes a state column may have
STATE_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")


def state_spec(name: str, state) -> tuple:
    """A per-job policy's state columns ``{"col": (dtype, initial)}`` checked and normalised to
    ``((col, numpy dtype, initial), ...)``. Raises :class:`ConfigError` in one line naming the
    policy and the column: not a name, a name of a ``JobView`` field or of a per-job result
    column, a dtype other than :data:`STATE_DTYPES`, an initial value the dtype cannot hold."""
    from .parts import JobView
    from .results import JOB_COLUMNS

    if not state:
        return ()
    if not isinstance(state, dict):
        raise ConfigError(f"policy {name!r}: state= must be a dict {{column: (dtype, initial value)}}, got {state!r}")
    out = []
    for col, spec in state.items():
        where = f"policy {name!r}: state column {col!r}"
        if not isinstance(col, str) or not col.isidentifier() or col.startswith("_"):
            raise ConfigError(f"{where} must be a Python name (not starting with _)")
        if col in JobView._fields or col in JOB_COLUMNS:
            raise ConfigError(f"{where} clashes with a {'JobView field' if col in JobView._fields else 'per-job result column'}"
                              "; choose another name")
        if not (isinstance(spec, tuple) and len(spec) == 2):
            raise ConfigError(f"{where} must be given as (dtype, initial value), got {spec!r}")
        try:
            dt = np.dtype(spec[0])
        except TypeError:
            dt = None
        if dt is None or dt.name not in STATE_DTYPES:
            raise ConfigError(f"{where} has dtype {spec[0]!r}; choose one of: {', '.join(STATE_DTYPES)}")
        try:
            init = np.array(spec[1]).astype(dt, casting="same_kind" if dt.kind != "b" else "unsafe")
            if init.shape != () or (np.array(spec[1]) != init):
                raise ValueError
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: initial value {spec[1]!r} is not a {dt.name}") from None
        out.append((col, dt, init.item()))
    return tuple(out)


def state_dtype(spec: tuple) -> np.dtype:
    """The record dtype of state columns :func:`state_spec` (one unused byte when there are none)."""
    return np.dtype([(c, dt) for c, dt, _ in spec] or [("_", np.int8)])


def new_state(spec: tuple, n: int) -> np.ndarray:
    """``n`` state records, each column at its initial value."""
    a = np.zeros(n if spec else 1, dtype=state_dtype(spec))
    for c, _, init in spec:
        a[c] = init
    return a


def compile_for_job(name: str, fn, state: tuple = ()):
    """Compile ``fn`` for one job (numba; a plain function is jitted here), with a state record
    of columns ``state`` (:func:`state_spec`) if any, and register it for the kernel. Returns
    ``(dispatcher, digest)``. Raises :class:`ConfigError` in one line when it does not compile
    for one job or returns something other than numbers."""
    import numba
    from numba.core.errors import NumbaError

    if (fn, state) in _COMPILED:
        return _COMPILED[fn, state]
    disp = fn if isinstance(fn, numba.core.dispatcher.Dispatcher) else numba.njit(fn)
    sig = (row_type(), numba.types.float64) + ((numba.from_dtype(state_dtype(state)),) if state else ())
    try:
        disp.compile(sig)
    except NumbaError as e:
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip() and not ln.startswith("\x1b")), "")
        raise ConfigError(f"policy {name!r} does not compile for one job (a per-job policy gets one job's numbers, "
                          f"not arrays): {first}") from None
    ret = disp.overloads[sig].signature.return_type
    nret = _check_return(name, ret)
    d = digest(fn)
    if state:  # (the same function with other state columns is another kernel)
        d = hashlib.sha256((d + repr(state)).encode()).hexdigest()[:20]
    kuser.REGISTRY[d] = (disp, nret, bool(state))
    _COMPILED[fn, state] = disp, d
    return disp, d


def make_policy(name: str, fn, preemptive: bool = True, description: str = "", reads_time: bool | None = None,
                state: dict | None = None):
    """A :class:`~fastblox.parts.Policy` running per-job key function ``fn`` inside the kernel
    (``reads_time``: whether its key reads ``now``; None: :func:`reads_now` decides; ``state``:
    its per-job state columns, :func:`state_spec`). A policy with state keys a job when it starts
    waiting and at the wake-ups it asks for, whether it reads ``now`` or not (its state says
    what happened since)."""
    from .parts import Policy

    spec = state_spec(name, state)
    if not spec and (reads_now(fn) if reads_time is None else reads_time):
        return Policy(name, enums.POL_CUSTOM_FULL, preemptive, True, description, kind=enums.KIND_FULL, job_fn=fn)
    return Policy(name, enums.POL_CUSTOM, preemptive, True, description, job_fn=fn, state=spec)


def params(policy, base, w):
    """The kernel's policy parameters for ``policy`` compiled per job (``base``: its
    ``PolicyParams``; ``w``: the workload)."""
    _, d = compile_for_job(policy.name, policy.job_fn, policy.state)
    POLICIES[d] = policy
    return kuser.UserParams(base.thresholds, base.gittins_x, base.gittins_v,
                            np.ascontiguousarray(w.job_id, dtype=np.int64),
                            np.ascontiguousarray(w.duration_s, dtype=np.float64),
                            np.zeros(kuser.ERR_SIZE), new_state(policy.state, len(w)), np.full(len(w), np.inf),
                            kuser.UserFn(d))


def error_message(policy, pp, w) -> str:
    """The one-line error of a run whose compiled policy failed (``pp.err``)."""
    code, j, t, k = int(pp.err[0]), int(pp.err[1]), float(pp.err[2]), float(pp.err[3])
    job = f"job {int(w.job_id[j])}"
    if code == kuser.ERR_RAISED:
        return f"policy {policy.name!r} raised an exception at t = {t:g} s keying {job} (compiled per job)"
    if code == kuser.ERR_NAN_WAKE:
        return f"policy {policy.name!r} returned a NaN wake-up time at t = {t:g} s for {job} (inf: none)"
    return f"policy {policy.name!r} must return finite priorities: it returned {k!r} at t = {t:g} s for {job}"


# ------------------------------------------------------------------------------- composition
def _fifo(job, now):
    return job.submit_s


def _las(job, now):
    return job.attained_s


def _las_gpu(job, now):
    return job.attained_gpu_s


def _srtf(job, now):
    return job.remaining_s


def _sjf(job, now):
    return job.duration_s


def _fewest_gpus(job, now):
    return job.num_gpus


def _most_gpus(job, now):
    return -job.num_gpus


def _fewest_preemptions(job, now):
    return job.num_preemptions


def _running_first(job, now):
    return 1 - job.running


#: the named parts :func:`compose` takes: name -> (per-job function, its meaning). Keys (any
#: number) and ranks (integers: usable as the first part)
PARTS = {
    "fifo": (_fifo, "submit time (FIFO's key)"),
    "las": (_las, "wall-seconds attained (LAS's key)"),
    "las-gpu": (_las_gpu, "GPU-seconds attained (LAS-GPU's key)"),
    "srtf": (_srtf, "remaining seconds (SRTF's key)"),
    "sjf": (_sjf, "duration (SJF's key)"),
    "fewest-gpus": (_fewest_gpus, "GPUs asked for (rank)"),
    "most-gpus": (_most_gpus, "minus the GPUs asked for (rank)"),
    "fewest-preemptions": (_fewest_preemptions, "times suspended (rank)"),
    "running-first": (_running_first, "0 for running jobs, 1 for waiting ones (rank)"),
}
_JITTED: dict = {}


def _part(p, what: str):
    """A named part's (or a per-job function's) numba dispatcher."""
    import numba

    if isinstance(p, str):
        if p not in PARTS:
            raise ConfigError(f"compose: unknown {what} part {p!r}; choose one of: {', '.join(sorted(PARTS))}, "
                              "or give a per-job function")
        if p not in _JITTED:
            _JITTED[p] = numba.njit(PARTS[p][0])
        return _JITTED[p]
    if not callable(p):
        raise ConfigError(f"compose: the {what} part must be a name or a per-job function, got {p!r}")
    return p if isinstance(p, numba.core.dispatcher.Dispatcher) else numba.njit(p)


def tiresias_queue(thresholds):
    """A rank part: Tiresias' queue of a job, the number of ``thresholds`` (GPU-seconds) at or
    below the GPU-seconds it has attained (queue 0 first). Without Tiresias' starvation
    promotion; the built-in ``tiresias`` has it."""
    import numba

    thr = tuple(float(x) for x in np.atleast_1d(np.asarray(thresholds, dtype=np.float64)))
    if not thr or list(thr) != sorted(thr):
        raise ConfigError(f"tiresias_queue: give one or more ascending thresholds in GPU-seconds, got {thresholds!r}")

    def tiresias_queue(job, now):
        k = 0
        for x in thr:
            if job.attained_gpu_s >= x:
                k += 1
        return k

    return numba.njit(tiresias_queue)


def compose(rank, key, name: str | None = None, preemptive: bool = True, description: str = ""):
    """A per-job policy ordering by ``rank`` (an integer-valued part), then by ``key`` among equal
    ranks: each a name of :data:`PARTS` or a per-job function ``fn(job, now)``. Returns the
    :class:`~fastblox.parts.Policy` (run it, or register it with ``fastblox.POLICIES.register``)."""
    r, k = _part(rank, "rank"), _part(key, "key")

    def composed(job, now):
        return r(job, now), k(job, now)

    label = f"{getattr(rank, '__name__', rank)}+{getattr(key, '__name__', key)}"
    return make_policy(name or label, composed, preemptive, description or f"{label} (composed)",
                       reads_time=reads_now(r) or reads_now(k))
