"""The reference comparisons again, with numba's bounds checking on (issue 19).

An index one past the end of an array in a kernel reads whatever lies there: the run may go on
with a wrong value, or the process may crash, and either way no test names the bug. With
``NUMBA_BOUNDSCHECK=1`` (numba's own switch, global) every such access raises ``IndexError``
and the comparison fails with it. The kernels compiled that way are a different build: numba's
cache does not key on the flag, so the run gets a cache directory of its own, in a subprocess
(the flag is read when numba is imported). A cold compile plus the comparisons at the ``dev``
profile: a few minutes on 2 cores, hence ``slow`` (CI runs it).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COMPARISONS = ("tests/test_engine_reference.py", "tests/test_engine_reference_queues.py",
               "tests/test_engine_reference_realism.py")


@pytest.mark.slow
@pytest.mark.timeout(2400)  # a cold compile of every kernel with the checks in, then the comparisons
def test_reference_comparisons_pass_with_bounds_checking(tmp_path):
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "numba-boundscheck"),
               HYPOTHESIS_PROFILE="dev",
               PYTHONPATH=os.pathsep.join([str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    probe = "import numba.core.config as c, fastblox; print(c.BOUNDSCHECK, fastblox.__file__)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", str(REPO / "fastblox" / "__init__.py")], out.stdout
    # the first test compiles every kernel cold, with the checks in: ~3 min on an idle 2-core machine,
    # over 10 on a busy one (hence the inner time limit above the suite's 600 s)
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow", "-o", "timeout=2000",
           "--hypothesis-seed=0", *COMPARISONS]
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=2300)
    assert p.returncode == 0, "with bounds checking:\n" + (p.stdout + p.stderr)[-3000:]
