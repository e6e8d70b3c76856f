"""A hang is a named failure: the event loop's no-progress guard (issue 19).

The bug planted to find it: Tiresias' crossing test ``<= t`` written ``< t`` in ``run_level``. A
running job's wake-up at the instant it crosses a queue threshold is then re-armed for that same
instant, and ``advance`` looped forever inside one step. These tests plant it (and the twin's
equivalent) and ask for :class:`fastblox.NoProgressError` / the twin's ``RuntimeError`` instead.
"""

import inspect
import os
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from fastblox.reference import native as ref_native

REPO = Path(__file__).resolve().parents[1]
CROSSING = "run.launch_t[j] + (thr[k] - ag) / g <= t"

# one 1-GPU job of 5,000 s under Tiresias (first threshold 3,250 GPU-s): it crosses into queue 1
# at t = 3,250 s while it runs alone (a wake-up of events mode)
ONE_JOB = dict(submit_s=[0.0], num_gpus=[1], duration_s=[5000.0])


def test_the_reference_twin_stops_with_a_named_error(monkeypatch):
    """The twin's own loop at one instant: completions written ``< t`` leave a finish time at the
    current instant forever; its guard raises instead."""
    src = inspect.getsource(ref_native)
    old = "while self.live_top() <= t:"
    assert src.count(old) == 1
    mod = types.ModuleType("mutant_reference")
    monkeypatch.setitem(sys.modules, mod.__name__, mod)  # (its dataclasses look their module up)
    exec(compile(src.replace(old, "while self.live_top() < t:"), "<mutant reference>", "exec"), mod.__dict__)
    args = ([0.0, 10.0], [1, 1], [100.0, 100.0], [1])
    assert ref_native.simulate_native_reference(*args)["finish"] == [100.0, 200.0]
    with pytest.raises(RuntimeError, match=r"no progress: more than 72 passes at t=100\.0"):
        mod.simulate_native_reference(*args)


def _copy_package(dst: Path) -> Path:
    """The package's sources laid out as a wheel installs them (``fastblox/kernels``,
    ``fastblox/datasets``) in ``dst``; returns ``dst``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "fastblox", dst / "fastblox", ignore=ignore)
    for name in ("kernels", "datasets"):
        shutil.copytree(REPO / name, dst / "fastblox" / name, ignore=ignore)
    return dst


@pytest.mark.slow
@pytest.mark.timeout(900)  # a cold compile on a busy machine, then the run (the subprocess has 840 s)
def test_the_compiled_kernel_stops_with_a_named_error_not_a_hang(tmp_path):
    """The planted bug in a copy of the package, compiled (its own numba cache) and run in a
    subprocess: the nogil kernel returns ``NO_PROGRESS`` and the run raises ``NoProgressError``
    within the subprocess's time limit. A cold compile of the kernel: ~2-5 minutes."""
    pkg = _copy_package(tmp_path / "src")
    eng = pkg / "fastblox" / "kernels" / "engine.py"
    text = eng.read_text()
    assert text.count(CROSSING) == 1
    eng.write_text(text.replace(CROSSING, CROSSING.replace("<= t", "< t")))
    script = textwrap.dedent(f"""
        import numpy as np, fastblox
        assert fastblox.__file__.startswith({str(pkg)!r}), fastblox.__file__
        w = fastblox.Workload.from_arrays(**{{k: np.asarray(v) for k, v in {ONE_JOB!r}.items()}})
        try:
            fastblox.simulate(w, cluster="1x1", policy="tiresias", time_model="events")
        except fastblox.NoProgressError as e:
            print("NAMED:", e)
    """)
    env = dict(os.environ, PYTHONPATH=str(pkg), NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    try:
        out = subprocess.run([sys.executable, "-c", script], cwd=pkg, env=env, capture_output=True, text=True,
                             timeout=840)
    except subprocess.TimeoutExpired:
        pytest.fail("the mutated kernel hung: the no-progress guard did not stop it")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "NAMED: the replay stopped making progress at t=3250.0 s" in out.stdout, out.stdout + out.stderr[-2000:]
