"""Helpers shared by the benchmarks: medians of repeats, machine info, README tables."""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"


def timed(fn, repeats: int = 5):
    """Run ``fn`` ``repeats`` times; returns (median seconds, all times, last result)."""
    times, res = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, res


def machine() -> str:
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def save(name: str, data: dict) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    p = OUT / f"{name}.json"
    p.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return p


def update_section(path: Path, section: str, text: str) -> None:
    """Replace the block between ``<!-- bench:SECTION:start -->`` and ``...:end -->`` of a file."""
    s = Path(path).read_text()
    start, end = f"<!-- bench:{section}:start -->", f"<!-- bench:{section}:end -->"
    if start not in s:
        raise SystemExit(f"{Path(path).name} has no {start} marker")
    pat = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    Path(path).write_text(pat.sub(lambda _: f"{start}\n{text.rstrip()}\n{end}", s))


def update_readme(section: str, text: str) -> None:
    """Replace the README block between ``<!-- bench:SECTION:start -->`` and ``...:end -->``."""
    update_section(ROOT / "README.md", section, text)
