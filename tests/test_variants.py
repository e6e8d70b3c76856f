"""Kernel variants (kernels/variants.py): a run compiles a kernel for its policy and placement only,
and that kernel gives the same bytes as the generic kernel of its path (which the rest of the suite
runs: tests/conftest.py sets FASTBLOX_KERNELS=generic)."""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from fastblox import engine, simulate
from fastblox.errors import ConfigError
from fastblox.generators import blox_paper_workload
from fastblox.kernels import engine as kengine
from fastblox.kernels import variants


@pytest.fixture
def specialized(monkeypatch):
    monkeypatch.setenv("FASTBLOX_KERNELS", "specialized")


def _ci(policy="fifo", placement="first-fit", preempt=None):
    from fastblox import parts

    pol = parts.resolve_policy(policy)
    ci = np.zeros(kengine.C_SIZE, dtype=np.int64)
    ci[kengine.C_POLICY] = pol.code
    ci[kengine.C_KIND] = pol.kind
    ci[kengine.C_PLACEMENT] = parts.PLACEMENTS.get(placement)
    ci[kengine.C_PREEMPT] = int(pol.preemptive if preempt is None else preempt)
    return ci


def test_kinds_name_the_variant(specialized):
    assert engine.kind_of("fifo") == "native:queue/fifo/first-fit"
    assert engine.kind_of("las", placement="yarn") == "native:static/las/yarn"
    assert engine.kind_of("tiresias", preempt=False, placement="topology") == "native:queue/tiresias/topology"
    # full and plan paths: the policy stays a run-time choice, the placement is fixed
    assert engine.kind_of("themis", placement="blox") == "native:full/any/blox"
    assert engine.kind_of("gavel") == "native:plan/any/first-fit"
    assert engine.describe_kind("native:queue/fifo/first-fit") == "native simulation kernel (queue path, fifo, first-fit)"
    assert engine.describe_kind("native:full/any/blox+events") == "native simulation kernel (full path, blox)"


def test_generic_kernels_on_request(monkeypatch):
    monkeypatch.setenv("FASTBLOX_KERNELS", "generic")
    assert engine.kind_of("fifo") == "native:queue"
    assert engine.kind_of("las", placement="yarn") == "native:static"
    m = kengine.path_of(_ci("las", "yarn"))
    assert (type(m).path, type(m).policy, type(m).placement) == ("static", variants.ANY, variants.ANY)
    monkeypatch.setenv("FASTBLOX_KERNELS", "fast")
    with pytest.raises(ConfigError, match="FASTBLOX_KERNELS='fast': expected one of specialized, generic"):
        kengine.path_of(_ci())


def test_compile_notice_quotes_a_measured_variant(monkeypatch):
    monkeypatch.setattr(engine, "COMPILE_CPU_S", {"native:static": 17, "native:static/las/first-fit": 13,
                                                   "native:static/tiresias/first-fit": 16, "native:queue": 11})
    assert engine.compile_expect("native:static/las/first-fit").startswith("about 13 s")
    assert engine.compile_expect("native:static/srtf/yarn").startswith("about 16 s")  # (its path's variants)
    assert engine.compile_expect("native:queue/fifo/yarn").startswith("about 11 s")  # (its path's generic kernel)
    assert engine.compile_expect("native:plan/any/yarn").startswith("about 17 s")  # (the largest)


def test_markers_are_one_per_variant_and_pickle_by_name(specialized):
    a, b = kengine.path_of(_ci("srtf", "consolidated")), kengine.path_of(_ci("srtf", "consolidated"))
    assert a is b and type(a) is not type(kengine.path_of(_ci("srtf", "topology")))
    # numba's cache index pickles the argument types: a class is found again by its name, in a
    # process that has not made it yet
    name = type(a).__name__
    code = ("import pickle, sys; from fastblox.kernels import variants; "
            "c = pickle.loads(sys.stdin.buffer.read()); print(c.__name__, c.path, c.policy, c.placement)")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(type(a)), capture_output=True, check=True)
    assert out.stdout.decode().split() == [name, "static", str(type(a).policy), str(type(a).placement)]
    assert variants.marker_named(name) is a


def _jobs_csv(w, monkeypatch, choice, **kw):
    monkeypatch.setenv("FASTBLOX_KERNELS", choice)
    return simulate(w, cluster="8x4", **kw).jobs.write_csv()


# the default run's variant in the quick suite; others (7-12 CPU-s each to compile) are slow
COMBOS = [
    pytest.param(dict(policy="fifo", placement="first-fit"), id="fifo-first-fit"),
    pytest.param(dict(policy="tiresias", placement="yarn", failures="2000:2"), id="tiresias-yarn-failures",
                 marks=pytest.mark.slow),
    pytest.param(dict(policy="las", placement="consolidated"), id="las-consolidated", marks=pytest.mark.slow),
    pytest.param(dict(policy="srtf", placement="topology", time_model="rounds"), id="srtf-topology-rounds",
                 marks=pytest.mark.slow),
    pytest.param(dict(policy="themis", placement="blox"), id="themis-blox", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("kw", COMBOS)
def test_specialized_kernel_gives_the_generic_bytes(kw, monkeypatch):
    w = blox_paper_workload(num_jobs=300, load=6.0, seed=1)
    assert _jobs_csv(w, monkeypatch, "specialized", **kw) == _jobs_csv(w, monkeypatch, "generic", **kw)


@pytest.mark.slow
def test_specialized_default_kernel_compiles_less(tmp_path):
    """The default run's kernel leaves out the other policies' keys, Tiresias' wake-ups and the
    other placements: numba's compile events name none of them (an empty cache, a fresh process)."""
    code = """
import numpy as np
from numba.core import event
import fastblox.engine as e
with event.install_recorder("numba:compile") as rec:
    e._warm_now("native:queue/fifo/first-fit")
names = {getattr(getattr(ev.data["dispatcher"], "py_func", None), "__name__", "") for _, ev in rec.buffer}
print(" ".join(sorted(n for n in names if n)))
"""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "FASTBLOX_KERNELS": "specialized"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    names = set(out.stdout.split())
    assert {"_advance", "fit_first", "key"} <= names
    left_out = {"fit_yarn", "fit_topology", "fit_consolidated", "fit_blox", "tiresias_key", "wake_time", "_wakeups",
                "run_level", "promote_job"}
    assert not names & left_out, names & left_out
