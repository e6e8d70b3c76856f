"""The parsed-trace cache (``fastblox.traces.cache``): a second read of the same file with the same
arguments parses nothing and gives the same workload; any change to the file or the arguments
reads it again; failed and warning reads are never cached."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fastblox.errors import TraceError
from fastblox.traces import cache, read_trace

CSV = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n" + "".join(
    f"{i},{1 << (i % 3)},{10 * i},100,resnet50,{50 + 7 * i},1\n" for i in range(40))


@pytest.fixture
def folder(tmp_path, monkeypatch):
    d = tmp_path / "trace-cache"
    d.mkdir()
    monkeypatch.setattr(cache, "_folder", lambda: d)
    monkeypatch.delenv("FASTBLOX_TRACE_CACHE", raising=False)
    return d


def same(a, b):
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f.name
        elif f.name == "extra":
            assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x), f.name
        else:
            assert x == y, f.name


def stats():
    return dict(cache.STATS)


def test_a_second_read_is_a_hit_and_the_same_workload(tmp_path, folder):
    p = tmp_path / "jobs.csv"
    p.write_text(CSV)
    s0 = stats()
    a = read_trace(p)
    b = read_trace(p)
    assert stats()["miss"] == s0["miss"] + 1 and stats()["hit"] == s0["hit"] + 1
    same(a, b)
    assert len(list(folder.glob("*.pkl"))) == 1


def test_a_changed_file_or_other_arguments_are_read_again(tmp_path, folder):
    p = tmp_path / "jobs.csv"
    p.write_text(CSV)
    a = read_trace(p)
    p.write_text(CSV.replace("resnet50,50,", "resnet50,51,"))  # one duration, same size
    b = read_trace(p)
    assert b.duration_s[0] == 51 and a.duration_s[0] == 50
    c = read_trace(p, max_gpus=2, on_bad_rows="drop")  # jobs of 4 GPUs are bad rows now
    assert c.dropped and len(c) < len(b)
    d = read_trace(p, max_gpus=2, on_bad_rows="drop")
    same(c, d)  # the dropped-row counts and where they were come back too
    assert c.dropped_where == d.dropped_where and len(list(folder.glob("*.pkl"))) == 3


def test_a_failed_read_is_not_cached(tmp_path, folder):
    p = tmp_path / "jobs.csv"
    p.write_text(CSV.replace("\n3,", "\nx,").replace(",30,", ",oops,"))
    for _ in range(2):
        with pytest.raises(TraceError, match="submit"):
            read_trace(p)
    assert not list(folder.glob("*.pkl"))


def test_turned_off_by_the_environment(tmp_path, folder, monkeypatch):
    monkeypatch.setenv("FASTBLOX_TRACE_CACHE", "0")
    p = tmp_path / "jobs.csv"
    p.write_text(CSV)
    read_trace(p)
    read_trace(p)
    assert not list(folder.glob("*.pkl"))


def test_a_warm_run_of_a_trace_does_not_import_polars(tmp_path):
    """The point of it: a warm ``fastblox run --trace`` skips polars' import and the parse."""
    p = tmp_path / "jobs.csv"
    p.write_text(CSV)
    code = ("import sys; from fastblox.cli import main; main(['run', '--trace', sys.argv[1], '--cluster', '2x4', "
            "'--json']); print('POLARS', 'polars' in sys.modules, file=sys.stderr)")
    outs = [subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True)
            for _ in range(2)]
    for o in outs:
        assert o.returncode == 0, o.stderr
    assert "POLARS True" in outs[0].stderr and "POLARS False" in outs[1].stderr
    a, b = (json.loads(o.stdout) for o in outs)
    timing = {k for k in a if k.endswith(("wall_s", "compile_s", "load_s", "read_s"))}
    assert {k: v for k, v in a.items() if k not in timing} == {k: v for k, v in b.items() if k not in timing}


def test_only_the_most_recently_used_entries_are_kept(tmp_path, folder, monkeypatch):
    monkeypatch.setattr(cache._prune_entries, "__defaults__", (2,))  # (keep two)
    paths = []
    for i in range(3):
        p = tmp_path / f"jobs{i}.csv"
        p.write_text(CSV)
        paths.append(p)
    read_trace(paths[0])
    read_trace(paths[1])
    for e in folder.glob("*.pkl"):
        os.utime(e, (1, 1))  # (both long unused)
    s0 = stats()
    read_trace(paths[0])  # a hit: used now
    read_trace(paths[2])  # a third entry: the least recently used one (jobs1's) goes
    assert len(list(folder.glob("*.pkl"))) == 2
    read_trace(paths[0])
    read_trace(paths[1])
    assert stats()["hit"] - s0["hit"] == 2 and stats()["miss"] - s0["miss"] == 2
