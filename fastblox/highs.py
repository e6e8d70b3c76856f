"""HiGHS (scipy's ``milp``) without its stray debugging lines.

scipy 1.17's bundled HiGHS prints ``HighsMipSolverData::transformNewIntegerFeasibleSolution
tmpSolver.run();`` from C++ straight to file descriptor 1 during some MILPs, whatever the
``disp`` option says. :func:`quiet` sends descriptor 1 to a temporary file for the call and writes
back everything else that reached it (another thread's output is delayed, never lost).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile

#: the start of the lines HiGHS prints on its own
NOISE = b"HighsMipSolverData::"


@contextlib.contextmanager
def quiet():
    """Run the block with file descriptor 1 captured; write back what was not HiGHS's noise."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # (no descriptor 1, or a closed stdout: nothing to protect)
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
            tmp.seek(0)
            kept = b"".join(line for line in tmp.read().splitlines(keepends=True) if not line.startswith(NOISE))
            if kept:
                os.write(1, kept)
