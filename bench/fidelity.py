"""Fidelity: regenerate the table of docs/fidelity.md (``fastblox fidelity`` prints the same rows).

The comparisons, the peer data and how it was produced: ``fastblox/fidelity.py`` and
``datasets/peer/README.md``. This script only writes the table into the docs::

    python bench/fidelity.py [--write]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import fastblox  # noqa: E402
from fastblox import fidelity  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the table into docs/fidelity.md")
    a = ap.parse_args(argv)
    fastblox.simulate(fastblox.gavel_like_workload(20), cluster="4x4")  # compile outside the timings
    rows = fidelity.run_all()
    text = fidelity.markdown(rows)
    print(text)
    if a.write:
        from _util import update_section

        stamp = f"Measured by `python bench/fidelity.py --write` ({time.strftime('%Y-%m-%d')})."
        update_section(ROOT / "docs" / "fidelity.md", "fidelity", stamp + "\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
