"""docs/tutorial.md, run as a newcomer would: every ``bash`` block's commands and every ``python``
block, in order, in a fresh folder that has the clone's ``datasets/``; the files the page asks to
save (``<!-- file: NAME -->`` before a block) are written first. Then the claims the page makes
about the results are checked against what the commands wrote."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "tutorial.md"
BLOCK = re.compile(r"(?:<!-- file: (?P<file>\S+) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)


def steps(text: str) -> list:
    """(kind, payload) in page order: ("file", (name, text)), ("bash", command), ("python", code)."""
    out = []
    for m in BLOCK.finditer(text):
        if m["file"]:
            out.append(("file", (m["file"], m["body"])))
        elif m["lang"] == "bash":
            out += [("bash", line) for line in m["body"].splitlines() if line.strip() and not line.startswith("#")]
        elif m["lang"] == "python":
            out.append(("python", m["body"]))
    return out


def _fastblox_exe() -> str:
    exe = shutil.which("fastblox") or str(Path(sys.executable).with_name("fastblox"))
    assert Path(exe).exists(), "the fastblox command is not installed (pip install .)"
    return exe


def run_steps(text: str, work: Path) -> dict:
    """Run the steps of ``text`` in ``work`` (given the clone's ``datasets/``); each command's output."""
    shutil.copytree(ROOT / "datasets", work / "datasets")
    env = {**os.environ, "PATH": f"{Path(_fastblox_exe()).parent}{os.pathsep}{os.environ['PATH']}"}
    outputs = {}
    for kind, payload in steps(text):
        if kind == "file":
            (work / payload[0]).write_text(payload[1])
            continue
        cmd = ["bash", "-c", payload] if kind == "bash" else [sys.executable, "-c", payload]
        p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, f"{payload!r} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
        outputs[payload] = p.stdout + p.stderr
    return outputs


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    """Run the page; returns the folder it ran in and each command's output."""
    work = tmp_path_factory.mktemp("tutorial")
    return work, run_steps(PAGE.read_text(), work)


@pytest.mark.slow
def test_the_readme_quick_start_runs_word_for_word(tmp_path):
    """The README's quick start, in a folder that has only what a clone has (its datasets/)."""
    section = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    outputs = run_steps(section, tmp_path)
    assert len(outputs) >= 8 and (tmp_path / "out" / "fig6" / "report.html").exists()
    assert (tmp_path / "out" / "sweep" / "report.html").exists()


def test_the_page_has_the_study_in_it():
    kinds = [k for k, _ in steps(PAGE.read_text())]
    assert kinds.count("file") == 3 and kinds.count("bash") >= 9 and "python" in kinds
    commands = " ".join(c for k, c in steps(PAGE.read_text()) if k == "bash")
    for words in ("trace inspect", "--target-load", "sweep", "compare", "plot", "report"):
        assert words in commands


@pytest.mark.slow  # (the tutorial's commands end to end: ~15 s)
def test_every_command_runs_and_its_outputs_exist(tutorial):
    work, outputs = tutorial
    inspect = next(v for k, v in outputs.items() if "trace inspect" in k)
    assert "load       4.023 on 128 GPUs" in inspect
    run = next(v for k, v in outputs.items() if k.startswith("fastblox run"))
    assert "offered 0.80" in run and "2,000 finished" in run
    for study in ("policies", "load", "failures"):
        assert (work / "study" / study / "summary.parquet").exists()
        assert list((work / "study" / study).rglob("*.png")), f"fastblox plot drew nothing for {study}"
    assert (work / "study" / "failures" / "report.html").stat().st_size > 10_000


@pytest.mark.slow  # (the tutorial's commands end to end: ~15 s)
def test_the_claims_about_four_policies(tutorial):
    s = {r["policy"]: r for r in pl.read_parquet(tutorial[0] / "study/policies/summary.parquet").iter_rows(named=True)}
    assert min(s, key=lambda p: s[p]["avg_jct_s"]) == "srtf"
    assert s["las"]["avg_jct_s"] < s["fifo"]["avg_jct_s"] < 1.1 * s["las"]["avg_jct_s"]  # gains little
    assert s["las"]["p99_jct_s"] > 1.8 * s["fifo"]["p99_jct_s"]                          # doubles its p99
    assert s["tiresias"]["avg_jct_s"] < s["las"]["avg_jct_s"]
    assert s["tiresias"]["num_preemptions"] < s["las"]["num_preemptions"] / 3
    assert s["tiresias"]["p99_jct_s"] < 1.1 * s["fifo"]["p99_jct_s"]


@pytest.mark.slow  # (the tutorial's commands end to end: ~15 s)
def test_the_claims_about_load(tutorial):
    s = pl.read_parquet(tutorial[0] / "study/load/summary.parquet")
    growth = {p: g["avg_jct_s"].max() / g["avg_jct_s"].min() for (p,), g in s.group_by("policy")}
    assert max(growth, key=growth.get) == "fifo"
    for p, g in s.group_by("policy"):
        jct = g.sort("target_load")["avg_jct_s"].to_list()
        assert jct == sorted(jct), f"{p}: the average JCT should grow with the load"


@pytest.mark.slow  # (the tutorial's commands end to end: ~15 s)
def test_the_claims_about_failures(tutorial):
    s = pl.read_parquet(tutorial[0] / "study/failures/summary.parquet")
    assert s.height == 27 and s["seed"].n_unique() == 3
    mean = {(r["policy"], r["failures"]): r["avg_jct_s"]
            for r in s.group_by("policy", "failures").agg(pl.col("avg_jct_s").mean()).iter_rows(named=True)}
    rare, often = "1000.0:4.0", "60.0:4.0"
    assert mean[("fifo", often)] > 2 * mean[("fifo", rare)]
    for p in ("srtf", "tiresias"):
        assert mean[(p, often)] < 1.2 * mean[(p, rare)]
