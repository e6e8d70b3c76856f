"""Hostile input and a hostile machine, as a user meets them: every error path of every
subcommand ends in one line and exit code 2 (no traceback), output locations are checked before
any simulation, and what fastblox writes as JSON is always valid JSON."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fastblox
from fastblox.cli import main
from fastblox.outputs import json_text, prepare_dir


def _bad_files(tmp: Path) -> dict:
    f = {
        "file": tmp / "a-file",
        "toml_bad": tmp / "bad.toml",
        "toml_utf": tmp / "latin1.toml",
        "toml_key": tmp / "key.toml",
        "csv_bad": tmp / "bad.csv",
        "rep_bad": tmp / "rep",
        "gavel": tmp / "g.trace",
        "huge": tmp / "huge.csv",
        "far": tmp / "far.csv",
    }
    f["huge"].write_text("job_id,submit_time_s,duration_s,num_gpus\n0,0,100,1\n1,10,50,1000000000\n")
    f["far"].write_text("job_id,submit_time_s,duration_s,num_gpus\n0,1e300,100,1\n1,1e300,50,1\n")
    f["file"].write_text("x")
    f["toml_bad"].write_text("[base\n")
    f["toml_utf"].write_bytes(b'name = "caf\xe9"\n')
    f["toml_key"].write_text('[base]\nworkload = "gavel"\nnum_jobs = 10\nrestart_s = -1\n')
    f["csv_bad"].write_text("job_id,submit_time_s,duration_s,num_gpus\n0,0,100,1\n1,10,abc,1\n")
    f["rep_bad"].mkdir()
    (f["rep_bad"] / "summary.parquet").write_text("not parquet")
    f["gavel"].write_text("NoSuchModel\tpython3 main.py\trl\t--max-steps\t0\t25832\t1\t1\t-1.000000\t57\n")  # not in the table
    return {k: str(v) for k, v in f.items()}


ERROR_PATHS = [
    # run: flags, values, combinations, inputs, outputs
    (["run", "--bogus"], "unrecognized arguments"),
    (["run", "--target-lod", "1"], "unrecognized arguments: --target-lod 1 (did you mean --target-load?)"),
    (["sweep", "x.toml", "--out", "o", "--exector", "ray"], "(did you mean --executor?)"),
    (["run", "--restart-s", "-1"], "--restart-s"),
    (["run", "--restart-s", "abc"], "--restart-s: expected a number"),
    (["run", "--round-s", "0"], "--round-s"),
    (["run", "--num-jobs", "0"], "--num-jobs"),
    (["run", "--num-jobs", "1e20"], "--num-jobs: expected an integer"),
    (["run", "--seed", "-7"], "--seed"),
    (["run", "--track=-5:3"], "--track: job ids are not negative"),
    (["run", "--track", "9:1"], "after the last id"),
    (["run", "--policy", "lass"], "did you mean 'las'"),
    (["run", "--time-model", "rnds"], "--time-model"),
    (["run", "--load", "nan"], "--load"),
    (["run", "--workload", "nope"], "--workload"),
    (["run", "--policy-opt", "f"], "NAME=VALUE"),
    (["run", "--policy", "las", "--policy-opt", "bogus=1"], "has no option 'bogus'"),
    (["run", "--blox-compat", "--restart-s", "5"], "drop --restart-s"),
    (["run", "--failures", "1:1"], "--num-jobs N with --workload blox"),
    (["run", "--trace", "{csv_bad}"], "bad.csv"),
    (["run", "--trace", "{gavel}"], "no v100 throughput for 1 (job_type, GPUs) pair(s)"),
    (["run", "--trace", "/no/such/file.csv"], "/no/such/file.csv"),
    # sizes and floats that would exhaust memory or time, or lose the answer
    (["run", "--trace", "{huge}"], "asks for 1000000000 GPUs"),
    (["run", "--trace", "{far}"], "shift the submit times to start near 0"),
    (["run", "--cluster", "1000000000x8"], "is too large"),
    (["run", "--workload", "gavel", "--num-jobs", "3000000000"], "more than the 50,000,000"),
    (["run", "--time-model", "rounds", "--round-s", "1e-14"], "below the smallest supported value"),
    (["run", "--load", "1e-308"], "below the smallest supported value"),
    (["run", "--workload", "sample", "--out", "{file}"], "exists and is not a folder"),
    (["run", "--workload", "sample", "--out", "{file}/sub"], "a file is in the way"),
    (["run", "--workload", "sample", "--out", "/dev/full"], "exists and is not a folder"),
    # the other subcommands
    (["parts", "--bogus"], "unrecognized arguments"),
    (["trace", "inspect", "/no/such.csv"], "/no/such.csv"),
    (["trace", "inspect", "{csv_bad}", "--on-bad-rows", "error"], "bad.csv"),  # (inspect counts them by default)
    (["trace", "convert", "{csv_bad}", "-o", "{file}/x.parquet"], ""),
    (["sweep", "{toml_bad}", "--out", "{file}.d"], "not valid TOML"),
    (["sweep", "{toml_utf}", "--out", "{file}.d"], "not UTF-8"),
    (["sweep", "{toml_key}", "--out", "{file}.d"], "[base] restart_s"),
    (["sweep", "/no/such.toml", "--out", "{file}.d"], "cannot read"),
    (["sweep", "{toml_key}", "--out", "{file}"], ""),
    (["experiment", "no-such-experiment", "--out", "{file}.e"], "no-such-experiment"),
    (["experiment", "blox-fig6", "--out", "{file}"], "exists and is not a folder"),
    (["report", "/no/such/dir"], "not a folder"),
    (["report", "{rep_bad}"], "summary.parquet"),
]


@pytest.mark.parametrize("argv,needle", ERROR_PATHS, ids=[" ".join(a) for a, _ in ERROR_PATHS])
def test_every_error_path_is_one_line_and_exit_2(argv, needle, tmp_path, capsys):
    files = _bad_files(tmp_path)
    argv = [a.format(**files) for a in argv]
    assert main(argv) == 2
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert err.startswith("fastblox: error: ") and "\n" not in err, err
    assert needle in err
    assert "simulated in" not in cap.out  # nothing ran before the error


def test_a_traceback_never_reaches_the_user(tmp_path):
    """The same, through the installed command in a subprocess (what a user sees)."""
    files = _bad_files(tmp_path)
    for argv in (["run", "--out", files["file"]], ["sweep", files["toml_utf"], "--out", str(tmp_path / "s")],
                 ["report", files["rep_bad"]]):
        out = subprocess.run([sys.executable, "-m", "fastblox.cli", *argv], capture_output=True, text=True, timeout=120)
        err = _without_compile_notice(out.stderr)
        assert out.returncode == 2 and "Traceback" not in err and err.count("\n") == 1, out.stderr


def _without_compile_notice(err: str) -> str:
    """stderr without the compile notice (``fastblox: compiling the ... kernel``), which a run on an
    empty kernel cache prints after 3 s, e.g. while another test worker compiles the kernel."""
    return "".join(line for line in err.splitlines(keepends=True) if not line.startswith("fastblox: compiling the "))


def _mount(path: Path, opts: str) -> bool:
    path.mkdir()
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True).returncode == 0


@pytest.mark.parametrize("opts,needle", [("ro,size=1m", "read-only file system"),
                                         ("size=16k", "no space left on the device")])
def test_unwritable_filesystems_are_refused_before_the_run(tmp_path, opts, needle, capsys):
    mnt = tmp_path / "mnt"
    if not _mount(mnt, opts):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        assert main(["run", "--workload", "sample", "--out", str(mnt / "out")]) == 2
        err = _without_compile_notice(capsys.readouterr().err)
        assert needle in err and err.count("\n") == 1
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_prepare_dir_leaves_nothing_behind(tmp_path):
    d = prepare_dir(tmp_path / "a" / "b")
    assert d.is_dir() and list(d.iterdir()) == []


def test_json_is_always_valid():
    text = json_text({"a": float("nan"), "b": [1.0, float("inf")], "c": {"d": -math.inf}, "e": 2.5})
    assert json.loads(text) == {"a": None, "b": [1.0, None], "c": {"d": None}, "e": 2.5}


def test_summary_json_has_no_nan(tmp_path):
    """A run whose fairness index is undefined (no tracked job's JCT is positive...) still writes
    JSON that parses strictly."""
    w = fastblox.Workload.from_arrays(submit_s=[0.0, 1.0], num_gpus=[1, 1], duration_s=[10.0, 10.0])
    res = fastblox.simulate(w, cluster="1x2")
    res.summary["jain_index"] = float("nan")  # as a degenerate workload gives it
    res.write(tmp_path)
    doc = json.loads((tmp_path / "summary.json").read_text(), parse_constant=lambda c: pytest.fail(f"JSON has {c}"))
    assert doc["summary"]["jain_index"] is None


@pytest.mark.parametrize("fn,needle", [
    (lambda jobs, now: 1 / 0, "raised ZeroDivisionError"),
    (lambda jobs, now: jobs.submit_s + 1j, "must return real numbers, got complex128"),
    (lambda jobs, now: ["a"] * len(jobs.job_id), "must return real numbers"),
    (lambda jobs, now: jobs.submit_s[:1], "one finite priority per active job"),
    (lambda jobs, now: jobs.submit_s * np.nan, "with NaN or infinity"),
])
def test_a_bad_user_policy_is_named(fn, needle):
    w = fastblox.gavel_like_workload(30, seed=0)
    with pytest.raises(fastblox.ConfigError, match="policy '<lambda>'") as e:
        fastblox.simulate(w, policy=fn, cluster="2x4")
    assert needle in str(e.value)


def test_track_is_never_clipped_silently():
    w = fastblox.gavel_like_workload(50, seed=0)
    with pytest.raises(fastblox.ConfigError, match="job ids run from 0 to 49; give a range within them"):
        fastblox.simulate(w, track=(40, 200))
    assert fastblox.simulate(w, track=(40, 49)).summary["num_tracked"] == 10
