"""The on-disk kernel cache is keyed on the kernel sources as a whole: editing a helper that a
kernel inlines recompiles the kernel, with nothing cleared by hand (numba alone keys a kernel on
its own file, and a warm cache then ran the old helper)."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import fastblox
import fastblox.kernels as kernels_pkg
from fastblox.kernels import _jit, compat, engine, placement, planners, rates, state, walk  # noqa: F401

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


def _installed_copy(root: Path) -> Path:
    """The package laid out as a wheel installs it (``fastblox/kernels`` inside ``fastblox``)."""
    pkg = root / "fastblox"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(Path(fastblox.__file__).parent, pkg, ignore=ignore)  # (installed: kernels/ is in it)
    shutil.copytree(Path(kernels_pkg.__file__).parent, pkg / "kernels", ignore=ignore, dirs_exist_ok=True)
    import fastblox.datasets as datasets_pkg

    shutil.copytree(Path(datasets_pkg.__file__).parent, pkg / "datasets", ignore=ignore, dirs_exist_ok=True)
    return pkg


def _run(root: Path, cache: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(root), NUMBA_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", RUN], env=env, cwd=root, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_editing_an_inlined_helper_recompiles_the_kernel(tmp_path):
    pkg = _installed_copy(tmp_path / "src")
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
    """The digest covers the files of the kernels package: a jitted function elsewhere would be
    cached on its own file only."""
    assert len(_jit.COMPILED) > 20
    for fn in _jit.COMPILED:
        Path(inspect.getfile(fn)).resolve().relative_to(_jit.KERNEL_DIR)


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
