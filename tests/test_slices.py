"""A run in slices (issue 13, part 2): slicing changes no result; Ctrl-C, the run limits and the
bound on Blox's endless stream end a run with a clear message and an incomplete summary."""

import json
import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import polars as pl
import pytest

import fastblox
from fastblox import engine, slices
from fastblox.cli import EXIT_INCOMPLETE, EXIT_INTERRUPTED, main
from fastblox.kernels import engine as kengine

TIMING = ("sim_wall_s", "compile_s")


def _same(a, b):
    assert a.jobs.equals(b.jobs)
    sa = {k: v for k, v in a.summary.items() if k not in TIMING}
    sb = {k: v for k, v in b.summary.items() if k not in TIMING}
    assert json.dumps(sa, sort_keys=True) == json.dumps(sb, sort_keys=True)


def _sliced(w, **kw):
    """``w`` run with every kernel pass a slice of its own; returns (result, number of slices)."""
    run = engine.prepare_native(w, **kw)
    slicer = slices.Slicer(slice_s=0.0, budget=1)  # slice_s 0: the budget stays at one pass
    code = run.state.drive(np.inf, slicer)
    assert code == kengine.FINISHED
    return run.result(0.0), slicer.n_slices


W = fastblox.blox_paper_workload(7, 1200)


@pytest.mark.parametrize("kw", [
    dict(policy="las"),
    dict(policy="fifo", time_model="rounds"),
    dict(policy="tiresias", restart_s=30.0, checkpoint_s=600.0),
    dict(policy="srtf", time_model="rounds", round_s=360.0, admission="load:1.2"),
    dict(policy=lambda jobs, now: -jobs.num_gpus * 1e7 + jobs.submit_s),
])
def test_many_tiny_slices_give_the_same_run(kw):
    whole = fastblox.simulate(W, cluster="6x4", **kw)
    sliced, n = _sliced(W, cluster="6x4", **kw)
    _same(whole, sliced)
    assert whole.summary["complete"] is True
    if not callable(kw["policy"]):  # a Python policy returns every step anyway: no budget to end
        assert n >= whole.summary["num_steps"]


def test_slices_grow_to_the_target_time():
    s = slices.Slicer(slice_s=0.15, budget=100)
    s.mark -= 0.001  # a slice of 1 ms: grow, by at most GROWTH
    s.between(lambda: (0.0, 0, 0, 0, 0))
    assert s.budget == 100 * slices.GROWTH == 200
    s.mark -= 0.3  # a slice of 0.3 s: halve
    s.between(lambda: (0.0, 0, 0, 0, 0))
    assert 95 <= s.budget <= 100


def test_compat_run_is_unchanged_by_its_control_array():
    """The compat kernel runs in a thread watched between slices: same result as Blox's reference
    (tests/test_blox_compat.py); here the limits and the completeness flag."""
    w = fastblox.blox_paper_workload(9, 1500)
    full = fastblox.simulate(w, cluster="4x4", policy="las", blox_compat=True)
    assert full.summary["complete"] is True
    cut = fastblox.simulate(w, cluster="4x4", policy="las", blox_compat=True, max_sim_time=200_000)
    s = cut.summary
    assert s["complete"] is False and s["stopped_by"] == "max_sim_time"
    assert s["end_s"] == 200_100.0  # the first round after the stop time, which only credits progress
    # what finished before the stop finished when it did in the whole run
    a, b = full.jobs, cut.jobs
    done = b["finish_s"].is_not_nan().to_numpy()
    assert done.sum() > 0 and (b["finish_s"].to_numpy()[done] <= 200_100).all()
    assert np.array_equal(a["finish_s"].to_numpy()[done], b["finish_s"].to_numpy()[done])


# ---------------------------------------------------------------------------------------- limits
def test_max_sim_time_stops_a_run_marked_incomplete():
    full = fastblox.simulate(W, cluster="6x4", policy="las")
    t = 0.5 * full.summary["end_s"]
    cut = fastblox.simulate(W, cluster="6x4", policy="las", max_sim_time=t)
    s = cut.summary
    assert s["complete"] is False and s["stopped_by"] == "max_sim_time"
    assert "--max-sim-time" in s["stop_reason"] and "unfinished" in s["stop_reason"]
    assert s["end_s"] <= t
    fin = cut.jobs["finish_s"].to_numpy()
    done = ~np.isnan(fin)
    assert 0 < done.sum() < len(W) and s["num_finished"] == done.sum()
    # the run up to t is the whole run's; its statistics cover the tracked jobs that finished
    assert np.array_equal(fin[done], full.jobs["finish_s"].to_numpy()[done])
    assert math.isclose(s["avg_jct_s"], float(cut.jobs.filter(pl.col("finish_s").is_not_nan())["jct_s"].mean()))
    # a limit the run does not reach changes nothing
    _same(full, fastblox.simulate(W, cluster="6x4", policy="las", max_sim_time=10 * full.summary["end_s"]))


def test_max_jobs_stops_at_that_arrival():
    cut = fastblox.simulate(W, cluster="6x4", policy="fifo", max_jobs=500)
    s = cut.summary
    assert s["complete"] is False and s["stopped_by"] == "max_jobs" and "--max-jobs" in s["stop_reason"]
    assert s["end_s"] == W.submit_s[499]
    assert cut.jobs["first_start_s"].slice(500).is_nan().all()  # nothing after the 500th arrival ran


def test_max_wall_stops_a_long_run():
    w = fastblox.gavel_like_workload(30_000, seed=1)
    res = fastblox.simulate(w, cluster="4x4", policy="las", max_wall=0.3)
    s = res.summary
    assert s["complete"] is False and s["stopped_by"] == "max_wall" and "--max-wall" in s["stop_reason"]
    assert s["sim_wall_s"] < 2.0
    assert 0 < s["num_finished"] < len(w)


@pytest.mark.parametrize("kw, needle", [
    (dict(max_sim_time=-1), "--max-sim-time: expected a positive number"),
    (dict(max_sim_time=0), "--max-sim-time"),
    (dict(max_sim_time=float("nan")), "--max-sim-time"),
    (dict(max_sim_time="abc"), "--max-sim-time"),
    (dict(max_jobs=1.5), "--max-jobs: expected an integer"),
    (dict(max_jobs=0), "--max-jobs"),
    (dict(max_jobs=True), "--max-jobs"),
    (dict(max_wall=float("inf")), "--max-wall"),
])
def test_bad_limits_are_rejected(kw, needle):
    with pytest.raises(fastblox.ConfigError, match=needle):
        fastblox.simulate(W, cluster="6x4", **kw)


@pytest.mark.parametrize("argv, needle", [
    (["--max-sim-time", "-5"], "fastblox: error: --max-sim-time: expected a positive number, got -5.0"),
    (["--max-jobs", "ten"], "fastblox: error: --max-jobs: expected an integer, got 'ten'"),
    (["--max-wall", "nan"], "fastblox: error: --max-wall: expected a number, got nan"),
    (["--max-wall", "0"], "fastblox: error: --max-wall"),
])
def test_cli_bad_limit_is_one_line(capsys, argv, needle):
    assert main(["run", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(needle) and err.count("\n") == 1


def test_cli_incomplete_run_exit_code_and_summary(capsys, tmp_path):
    assert main(["run", "--policy", "las", "--max-sim-time", "200000", "--out", str(tmp_path)]) == EXIT_INCOMPLETE
    cap = capsys.readouterr()
    assert "INCOMPLETE" in cap.out and cap.err.startswith("fastblox: warning: incomplete run: stopped at the --max-sim-time")
    s = json.loads((tmp_path / "summary.json").read_text())["summary"]
    assert s["complete"] is False and s["stopped_by"] == "max_sim_time"


# ---------------------------------------------------------------------------------- endless streams
def test_endless_stream_that_starves_is_bounded():
    """LAS at load 8 on 128 GPUs: Blox's stream never lets the long tracked jobs finish."""
    res = fastblox.simulate_blox_workload(8, policy="las", track=(300, 400))
    s = res.summary
    assert s["complete"] is False and s["stopped_by"] == "endless_stream"
    assert s["num_generated_jobs"] == slices.stream_bound(400) == 6416
    for words in ("load 8 jobs/h", "have not finished", "lower --load", "--max-jobs"):
        assert words in s["stop_reason"]
    mine = fastblox.simulate_blox_workload(8, policy="las", track=(300, 400), max_jobs=3000)
    assert mine.summary["stopped_by"] == "max_jobs" and mine.summary["num_generated_jobs"] == 3000


def test_endless_stream_that_ends_is_unchanged():
    """A stream whose tracked jobs finish: the run of the shortest prefix that reaches past them
    (the stream doubled from 2000 jobs), as before the bound."""
    res = fastblox.simulate_blox_workload(6, policy="las", track=(300, 400))
    n = res.summary["num_generated_jobs"]
    assert res.summary["complete"] is True and n >= 2000
    w = fastblox.blox_paper_workload(6, n)
    _same(res, _with_generated(fastblox.simulate(w, policy="las", track=(300, 400)), n))
    if n > 2000:  # the prefix half as long did not reach past the end
        half = fastblox.simulate(fastblox.blox_paper_workload(6, n // 2), policy="las", track=(300, 400))
        assert half.summary["end_s"] >= fastblox.blox_paper_workload(6, n // 2).submit_s[-1]


def _with_generated(res, n):
    res.summary["num_generated_jobs"] = n
    return res


def test_sweep_point_of_a_starving_stream_ends(tmp_path):
    from fastblox.sweep.config import load_config
    from fastblox.sweep.points import compute_point

    cfg = load_config({"base": {"workload": "blox", "policy": "las", "track": "300:400"}, "grid": {"load": [8.0]}})
    pid, files, err, _ = compute_point(cfg.points[0])
    assert err is None
    doc = json.loads(files[-1][1])
    assert doc["summary"]["complete"] is False and doc["summary"]["stopped_by"] == "endless_stream"


# ------------------------------------------------------------------------------------------ Ctrl-C
@pytest.mark.parametrize("compat", [False, True])
def test_ctrl_c_between_slices_raises_run_interrupted(compat, monkeypatch):
    w = fastblox.gavel_like_workload(40_000, seed=2, multi_gpu=False) if compat else fastblox.gavel_like_workload(
        60_000, seed=2)
    sent = []

    def ctrl_c_once(*progress):  # at the first slice boundary: the run is under way
        if not sent:
            sent.append(time.perf_counter())
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(slices, "PROGRESS", ctrl_c_once)
    with pytest.raises(slices.RunInterrupted, match=r"interrupted at simulated time [\d,]+ s \(\d+ of \d+ jobs finished\)"):
        fastblox.simulate(w, cluster="2x4", policy="las", blox_compat=compat)
    assert time.perf_counter() - sent[0] < 1.0
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is put back


def test_cli_ctrl_c_exits_130_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen([sys.executable, "-m", "fastblox.cli", "run", "--workload", "gavel", "--num-jobs", "100000",
                          "--cluster", "2x4", "--policy", "las", "--progress", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stderr.readline()  # the first progress line: the run is 2 s in
        # (a cold cache: the kernel is compiled first; 100,000 jobs on 8 GPUs: the offered load warning)
        while line.startswith(("fastblox: compiling", "fastblox: warning: the offered load")):
            line = p.stderr.readline()
        assert line.startswith("fastblox: simulated"), line
        t0 = time.perf_counter()
        p.send_signal(signal.SIGINT)
        rc = p.wait(timeout=10)
        took = time.perf_counter() - t0
    finally:
        p.kill()
    err = p.stderr.read()
    assert rc == EXIT_INTERRUPTED
    assert took < 1.0
    lines = [x for x in err.splitlines() if not x.startswith(("fastblox: simulated", "fastblox: compiling"))]
    assert len(lines) == 1 and lines[0].startswith("fastblox: interrupted at simulated time") and lines[0].endswith(
        "jobs finished); nothing written"), err
    assert "Traceback" not in err and p.stdout.read() == ""
    assert not out.exists() or not any(out.iterdir())


def test_progress_line_on_a_terminal_only_after_two_seconds():
    import io

    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    line = slices.ProgressLine(out)
    line(3600.0, 5, 2, 7, 100.0, 1.0)
    assert out.getvalue() == ""  # a short run shows nothing
    line(7200.0, 10, 3, 4, 120.0, 2.5)
    assert out.getvalue() == ("\r\033[Kfastblox: simulated 2.0 h | 10 jobs finished, 3 running, 4 waiting | "
                              "120 jobs/s | 2 s")
    line.close()
    assert out.getvalue().endswith("\r\033[K")
    pipe = io.StringIO()
    slices.ProgressLine(pipe)(7200.0, 10, 3, 4, 120.0, 2.5)
    assert pipe.getvalue().endswith(" s\n")  # not a terminal (--progress): whole lines


def test_progress_is_off_unless_a_terminal_or_asked(capsys):
    assert main(["run", "--num-jobs", "300", "--max-wall", "60"]) == 0
    assert slices.PROGRESS is None and "fastblox: simulated" not in capsys.readouterr().err
    assert main(["run", "--num-jobs", "300", "--progress"]) == 0
    assert slices.PROGRESS is None  # put back after the run


def test_drive_says_how_it_stopped():
    """``NativeState.drive`` returns a ``fastblox.DriveCode`` (an int enum, equal to the kernel's codes)."""
    from fastblox.kernels import engine as kengine

    w = fastblox.gavel_like_workload(300, seed=1)
    run = fastblox.prepare_native(w, cluster="8x4", policy="las")
    code = run.state.drive(stop_t=24 * 3600)
    assert code is fastblox.DriveCode.PAUSED and code == kengine.PAUSED and run.state.now <= 24 * 3600
    assert run.state.drive() is fastblox.DriveCode.FINISHED
