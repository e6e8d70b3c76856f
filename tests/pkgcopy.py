"""A copy of the installed package, for tests that edit its sources (the kernel cache, a policy
added as a file) and run it in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import fastblox
import fastblox.datasets as datasets_pkg
import fastblox.kernels as kernels_pkg


def installed_copy(root: Path) -> Path:
    """The package laid out as a wheel installs it (``fastblox/kernels`` inside ``fastblox``)
    under ``root``; returns the ``fastblox`` folder."""
    pkg = root / "fastblox"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(Path(fastblox.__file__).parent, pkg, ignore=ignore)  # (installed: kernels/ is in it)
    shutil.copytree(Path(kernels_pkg.__file__).parent, pkg / "kernels", ignore=ignore, dirs_exist_ok=True)
    shutil.copytree(Path(datasets_pkg.__file__).parent, pkg / "datasets", ignore=ignore, dirs_exist_ok=True)
    return pkg


def run_json(root: Path, cache: Path, code: str, timeout: float = 600) -> dict:
    """Run ``code`` with the copy under ``root`` first on the path and numba's cache in
    ``cache``; its last stdout line is JSON."""
    env = dict(os.environ, PYTHONPATH=str(root), NUMBA_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])
