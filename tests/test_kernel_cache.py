"""The on-disk kernel cache is keyed on the kernel sources as a whole: editing a helper that a
kernel inlines recompiles the kernel, with nothing cleared by hand (numba alone keys a kernel on
its own file, and a warm cache then ran the old helper)."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest

from fastblox.kernels import _jit, compat, engine, placement, planners, rates, state, walk  # noqa: F401
from pkgcopy import installed_copy, run_json

HELPER = '''from ._jit import jit


@jit(nrt=False, inline=True)
def bump(x):
    return x + {step}
'''
KERNEL = '''from ._jit import jit
from ._probe_helper import bump


@jit(nrt=False)
def probe(x):
    return bump(x) * 2
'''
RUN = '''import json
from fastblox.kernels._probe import probe
from fastblox.kernels import _jit
v = probe(1)
print(json.dumps({"value": int(v), "hits": sum(probe.stats.cache_hits.values()),
                  "misses": sum(probe.stats.cache_misses.values()), "dir": str(_jit.cache_dir())}))
'''


def _run(root: Path, cache: Path) -> dict:
    return run_json(root, cache, RUN, timeout=300)


def test_editing_an_inlined_helper_recompiles_the_kernel(tmp_path):
    pkg = installed_copy(tmp_path / "src")
    (pkg / "kernels" / "_probe_helper.py").write_text(HELPER.format(step=1))
    (pkg / "kernels" / "_probe.py").write_text(KERNEL)
    cache = tmp_path / "cache"

    first = _run(tmp_path / "src", cache)
    assert first["value"] == 4 and first["misses"] == 1
    again = _run(tmp_path / "src", cache)
    assert again["value"] == 4 and again["hits"] == 1 and again["misses"] == 0  # the cache works at all

    (pkg / "kernels" / "_probe_helper.py").write_text(HELPER.format(step=2))  # only the helper's file
    edited = _run(tmp_path / "src", cache)
    assert edited["value"] == 6, "a warm cache ran the helper as it was before the edit"
    assert edited["misses"] == 1 and edited["dir"] != first["dir"]
    assert Path(edited["dir"]).parent == cache


def test_every_compiled_function_is_covered_by_the_cache_key():
    """The digest covers the files of the kernels package and of the built-in policies: a jitted
    function elsewhere would be cached on its own file only."""
    import fastblox.policies  # noqa: F401  (the built-in policies' key functions)

    assert len(_jit.COMPILED) > 20
    files = {Path(inspect.getfile(fn)).resolve() for fn in _jit.COMPILED}
    assert any(f.parent == _jit.POLICY_DIR for f in files)
    for f in files:
        assert _jit.is_source(f), f"{f} is compiled into kernels but not covered by the cache digest"


def test_cache_folder_is_named_by_the_source_digest():
    path = engine._advance._cache._cache_path
    assert f"kernels-{_jit.source_digest()}" in path
    assert len(_jit.source_digest()) == 16


def test_stale_folders_of_other_sources_are_pruned(tmp_path):
    old = tmp_path / "kernels-0123456789abcdef"
    recent = tmp_path / "kernels-fedcba9876543210"
    other = tmp_path / "not-ours"
    for d in (old, recent, other):
        d.mkdir()
    past = 1_000_000.0
    os.utime(old, (past, past))
    os.utime(other, (past, past))
    _jit._prune(tmp_path)
    assert not old.exists() and recent.exists() and other.exists()


def test_processes_compile_a_kernel_one_at_a_time(tmp_path):
    """A second process loading the same kernel waits for the first one's compile (then loads it
    from the cache) instead of compiling it too on the same cores."""
    import subprocess
    import sys
    import time

    from fastblox import engine as fengine

    child = ("import time; from fastblox.engine import _compile_lock\n"
             "with _compile_lock('native:probe'):\n    print(time.time())\n")
    with fengine._compile_lock("native:probe"):
        p = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
        time.sleep(1.5)
        released = time.time()
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0
    assert float(out.strip()) >= released, "the second process went ahead while the first held the lock"
    with fengine._compile_lock("native:other"):  # another kernel's lock is independent
        pass


def test_linked_only_kernels_get_no_machine_code_of_their_own():
    """A kernel only other kernels call (no wrappers) is optimized and compiled to machine code
    inside its callers only (kernels/_lazy.py), is cached as bitcode, and still yields an address
    when one is asked for."""
    import numba

    from fastblox.kernels import _lazy

    @numba.njit(no_cpython_wrapper=True, no_cfunc_wrapper=True)
    def inner(x):
        return x * 3 + 1

    @numba.njit
    def outer(x):
        return inner(x) + inner(x + 1)

    assert outer(2) == 7 + 10
    if not _lazy.ENABLED:
        pytest.skip("FASTBLOX_EAGER_HELPERS=1: numba's own finalization")
    lib = inner.overloads[inner.signatures[0]].library
    name = inner.overloads[inner.signatures[0]].fndesc.llvm_func_name
    assert _lazy._linked_only(lib)
    assert not lib._codegen._engine.is_symbol_defined(name), "the helper was compiled to machine code on its own"
    assert lib.serialize_using_object_code()[1] == "bitcode"
    assert lib.get_pointer_to_function(name) != 0  # finalized on demand
    assert not _lazy._linked_only(lib)
    assert not _lazy._linked_only(outer.overloads[outer.signatures[0]].library)  # (it has its wrappers)


def test_a_run_of_one_job_uses_the_kernels_compiled_for_many():
    """numpy calls a view of one element contiguous: typed by numba's dispatch, a one-job run's
    record fields made a second copy of each kernel (10-18 CPU-s each). ``state.arg_type`` types
    them strided whatever their length; the run must also give the right result."""
    from fastblox import Workload, simulate
    from fastblox.kernels import userpol

    def py_las(jobs, now):
        return jobs.attained_s

    two = dict(submit_s=[0.0, 1.0], num_gpus=[1, 2], duration_s=[10.0, 20.0])
    one = dict(submit_s=[0.5], num_gpus=[3], duration_s=[7.0])
    for policy in ("fifo", "las", py_las):
        simulate(Workload.from_arrays(**two), cluster="2x2", policy=policy)
        before = {k: len(d.overloads) for k, d in (("_advance", engine._advance), ("view_into", userpol.view_into))}
        r = simulate(Workload.from_arrays(**one), cluster="2x2", policy=policy)
        after = {k: len(d.overloads) for k, d in (("_advance", engine._advance), ("view_into", userpol.view_into))}
        assert after == before, policy
        assert r.jobs["finish_s"].to_list() == [7.5]
    one_view = state.record_fields(state.new_records(1))["run"]["attained"]
    assert one_view.flags.c_contiguous and str(state.arg_type(one_view)) == "array(float64, 1d, A)"


def test_a_run_looks_its_kernel_up_once_not_at_every_return_to_python(monkeypatch):
    """A planner or a Python policy returns to Python at every step; typing the kernel's ~80 array
    arguments to find its compiled code costs ~0.1-0.5 ms, so a run looks it up once per path
    (without this, Optimus on 2,000 jobs took 1.8 s instead of 0.17 s)."""
    import fastblox
    from fastblox import engine as fengine

    calls = []
    real = fengine.kengine.entry
    monkeypatch.setattr(fengine.kengine, "entry", lambda *a: calls.append(1) or real(*a))
    r = fastblox.simulate(fastblox.gavel_like_workload(150, seed=2), cluster="2x4", policy="optimus")
    assert r.summary["num_steps"] > 100 and len(calls) <= 2  # (the kernel's first load, and the run's lookup)
