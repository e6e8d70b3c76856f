"""Fuzzing the trace readers: corrupted files (truncation, garbage bytes, swapped columns, NaN and
other bad tokens, lost or repeated lines) must end in a Workload or a FastbloxError subclass, never
in any other exception."""

from __future__ import annotations

import gzip
import io
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastblox.errors import FastbloxError
from fastblox.traces import inspect, read_trace, write_parquet
from fastblox.workload import Workload

DATA = Path(__file__).resolve().parents[1] / "datasets"
APPS = {"cifar10": 100.0, "bert": 2000.0, "ncf": 50.0}


def _philly_head(n=30) -> bytes:
    lines = gzip.decompress((DATA / "philly_sample.csv.gz").read_bytes()).decode().splitlines()[:n]
    lines[0] += ",user,vc"
    lines[1:] = [f"{ln},u{i % 3},vc{i % 2}" for i, ln in enumerate(lines[1:])]
    return ("\n".join(lines) + "\n").encode()


def _parquet_bytes() -> bytes:
    w = Workload.from_arrays([0, 5, 9, 20], [1, 2, 4, 1], duration_s=[10, 20, 30, 5], iterations=[1, 2, np.nan, 4],
                             user=np.array(["a", None, "c", "d"], dtype=object), queue_s=[0.0, 1.0, 2.0, 3.0])
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "w.parquet"
        write_parquet(w, p)
        return p.read_bytes()


GAVEL = "".join(
    f"{jt}\tpython3 main.py --x {i}\tdir\t--steps\t{i % 2}\t{steps}\t{sf}\t1\t-1.000000\t{arr}\n"
    for i, (jt, steps, sf, arr) in enumerate([("A3C", 2000, 1, 0), ("LM (batch size 5)", 5000, 2, 30),
                                              ("A3C", 1000, 1, 31), ("CycleGAN", 300, 1, 90)])
)
GAVEL_NEUTRAL = "job_id,submit_time,num_gpu,duration,job_type,total_steps\n" + "".join(
    f"{i},{arr},{sf},{steps / 10},{jt},{steps}\n"
    for i, (jt, steps, sf, arr) in enumerate([("A3C", 2000, 1, 0), ("LM (batch size 5)", 5000, 2, 30),
                                              ("A3C", 1000, 1, 31), ("CycleGAN", 300, 1, 90)])
)

# (file name, bytes, format, reader options, sibling files)
BASES = [
    ("jobs.csv", _philly_head(), "normalized", {}, {}),
    ("jobs.csv.gz", gzip.compress(_philly_head(), mtime=0), "normalized", {}, {}),
    ("w.parquet", _parquet_bytes(), "parquet", {}, {}),
    ("cluster_job_log.json", (DATA / "philly_cluster_job_log_sample.json").read_bytes(), "philly-log", {}, {}),
    ("helios.csv", (DATA / "helios_sample.csv").read_bytes(), "helios", {}, {}),
    ("pai_job_table.csv", (DATA / "pai_job_table_sample.csv").read_bytes(), "pai-2020", {},
     {"pai_task_table.csv": (DATA / "pai_task_table_sample.csv").read_bytes()}),
    ("pai_task_table.csv", (DATA / "pai_task_table_sample.csv").read_bytes(), "pai-2020", {}, {}),
    ("log.swf", (DATA / "hpc_sample.swf").read_bytes(), "swf", {}, {}),
    ("g.trace", GAVEL.encode(), "gavel", {}, {"g.neutral.csv": GAVEL_NEUTRAL.encode()}),
    ("g2.trace", GAVEL.encode(), "gavel", {"steps_per_s": {"A3C": 10.0, "LM (batch size 5)": {"2": 5.0}, "CycleGAN": 1.0}}, {}),
    ("g.neutral.csv", GAVEL_NEUTRAL.encode(), "neutral", {}, {}),
    ("t.csv", b"job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,606,vgg19,164,30\n"
              b"1,8,30,133,vgg11,147,23\n2,2,53,157,inception4,127,26\n3,4,79,100,resnet50,90,0\n", "tiresias", {}, {}),
    ("pollux.csv", b"name,time,application,num_replicas,batch_size\ncifar10-0,107,cifar10,6,2048\nbert-1,110,bert,4,32\n"
                   b"ncf-2,135,ncf,1,32768\n", "pollux", {"app_duration_s": APPS}, {}),
    ("mix.csv", b"name,time,application,num_replicas,batch_size,duration\ncifar10-0,107,cifar10,2,2048,\n"
                b"rigid-1,110,,4,,3600\nbert-2,135,bert,1,32,\n", "elastic-mix", {}, {}),
    ("philly.csv", b"timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
                   b"2017-10-09 06:13:03,2951.0,1,2951.0,6214e9\n2017-09-29 07:58:32,860662.0,2,1721324.0,6c71a0\n\n",
     "pollux", {}, {}),
    ("pods.csv", b"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
                 b"openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
                 b"openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061\n"
                 b"openb-pod-0002,8000,32768,8,1000,V100M16|V100M32,BE,Failed,427100,430000,427200\n"
                 b"openb-pod-0003,8000,32768,0,0,,BE,Failed,427200,430000,\n", "alibaba-2023", {}, {}),
    ("rfold.csv", b"#job id,arrival time (sec),topology,shape,size,duration (sec)\n0,0.0,CLOS,1,1,3613033.0\n"
                  b"1,266563.0,CLOS,8+8,16,3222990.0\n", "rfold", {}, {}),
]
BAD_TOKENS = ["NaN", "", "-1", "inf", "-inf", "1e400", "-0", "0", "1.5", "abc", "\"", "nan,nan", "9" * 30, "\x00", "é"]


def _split_tokens(line: str) -> tuple[list[str], str]:
    for sep in (",", "\t"):
        if sep in line:
            return line.split(sep), sep
    return line.split(" "), " "


@st.composite
def corrupted(draw):
    name, data, fmt, opts, siblings = draw(st.sampled_from(BASES))
    target = draw(st.sampled_from(["main"] + list(siblings)))
    buf = data if target == "main" else siblings[target]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "garbage", "flip", "swap", "token", "lines", "header"]))
        if kind == "truncate":
            buf = buf[: draw(st.integers(0, max(len(buf) - 1, 0)))]
        elif kind == "garbage":
            at = draw(st.integers(0, len(buf)))
            buf = buf[:at] + draw(st.binary(min_size=1, max_size=24)) + buf[at:]
        elif kind == "flip" and buf:
            at = draw(st.integers(0, len(buf) - 1))
            buf = buf[:at] + bytes([draw(st.integers(0, 255))]) + buf[at + 1:]
        else:
            try:
                text = buf.decode("utf-8")
            except UnicodeDecodeError:
                continue  # binary (gzip, Parquet) or already garbled: text edits do not apply
            lines = text.split("\n")
            if not lines:
                continue
            if kind in ("swap", "header"):
                i = 0 if kind == "header" else draw(st.integers(0, len(lines) - 1))
                rows = range(len(lines)) if kind == "swap" and draw(st.booleans()) else [i]
                toks0, sep = _split_tokens(lines[i])
                if len(toks0) >= 2:
                    a = draw(st.integers(0, len(toks0) - 1))
                    b = draw(st.integers(0, len(toks0) - 1))
                    for r in rows:
                        toks, sep = _split_tokens(lines[r])
                        if max(a, b) < len(toks):
                            toks[a], toks[b] = toks[b], toks[a]
                            lines[r] = sep.join(toks)
            elif kind == "token":
                i = draw(st.integers(0, len(lines) - 1))
                toks, sep = _split_tokens(lines[i])
                j = draw(st.integers(0, len(toks) - 1))
                toks[j] = draw(st.sampled_from(BAD_TOKENS))
                lines[i] = sep.join(toks)
            elif kind == "lines" and len(lines) > 1:
                i = draw(st.integers(0, len(lines) - 1))
                op = draw(st.sampled_from(["drop", "dup", "swap", "blank"]))
                if op == "drop":
                    del lines[i]
                elif op == "dup":
                    lines.insert(i, lines[i])
                elif op == "blank":
                    lines.insert(i, "")
                else:
                    j = draw(st.integers(0, len(lines) - 1))
                    lines[i], lines[j] = lines[j], lines[i]
            buf = "\n".join(lines).encode("utf-8")
    files = dict(siblings)
    if target == "main":
        data = buf
    else:
        files[target] = buf
    use_fmt = draw(st.sampled_from([None, fmt]))
    mode = draw(st.sampled_from(["error", "drop"]))
    max_gpus = draw(st.sampled_from([None, 8, 64]))
    return name, data, files, use_fmt, opts, mode, max_gpus


def _check(w: Workload) -> None:
    assert isinstance(w, Workload)
    n = len(w)
    assert n >= 1
    assert np.all(np.isfinite(w.submit_s)) and np.all(w.submit_s >= 0) and np.all(np.diff(w.submit_s) >= 0)
    assert np.all(np.isfinite(w.duration_s)) and np.all(w.duration_s > 0)
    assert w.num_gpus.dtype == np.int64 and np.all(w.num_gpus >= 1)
    assert len(np.unique(w.job_id)) == n
    for v in w.extra.values():
        assert len(v) == n
    inspect(w, total_gpus=64)


@pytest.mark.filterwarnings("ignore::fastblox.errors.FastbloxWarning")  # g.trace has a .neutral.csv beside it
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(corrupted())
def test_corrupted_files_raise_only_fastblox_errors(case):
    name, data, files, fmt, opts, mode, max_gpus = case
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        p.write_bytes(data)
        for fname, content in files.items():
            (Path(d) / fname).write_bytes(content)
        try:
            w = read_trace(p, format=fmt, on_bad_rows=mode, max_gpus=max_gpus, **(opts if fmt else {}))
        except FastbloxError:
            return
        _check(w)
        if max_gpus is not None:
            assert np.all(w.num_gpus <= max_gpus)


@pytest.mark.filterwarnings("ignore::fastblox.errors.FastbloxWarning")  # g.trace has a .neutral.csv beside it
@settings(max_examples=60, deadline=None)
@given(st.sampled_from(BASES))
def test_uncorrupted_bases_read(base):
    name, data, fmt, opts, siblings = base
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        p.write_bytes(data)
        for fname, content in siblings.items():
            (Path(d) / fname).write_bytes(content)
        w = read_trace(p, format=fmt, on_bad_rows="drop", **opts)
        _check(w)


def test_fuzz_inputs_cover_every_format():
    from fastblox.traces import FORMATS

    assert {b[2] for b in BASES} == set(FORMATS.names())
    assert io is not None


# ---------------------------------------------------------------------------- the bad-row rules, against a reference
SUBMITS = st.sampled_from(["0", "5", "10", "10", "20", "35.5", "-1", "", "NaN", "x"])
DURATIONS = st.sampled_from(["10", "0.5", "3600", "0", "-3", "", "NaN", "inf"])
GPUS = st.sampled_from(["1", "2", "4", "16", "0", "1.5", "", "NaN", "-2"])


def _reference(rows, max_gpus):
    """Plain-Python statement of docs/traces.md: first failing reason per row, then duplicates, then order."""
    def f(x):
        try:
            return float(x)
        except ValueError:
            return float("nan")

    dropped, alive = {}, []
    for jid, s, d, g in rows:
        s, d, g = f(s), f(d), f(g)
        reason = None
        if not np.isfinite(s):
            reason = "submit_time_s=NaN"
        elif s < 0:
            reason = "submit_time_s<0"
        elif not np.isfinite(d):
            reason = "duration_s=NaN"
        elif d <= 0:
            reason = "duration_s<=0"
        elif not np.isfinite(g):
            reason = "num_gpus=NaN"
        elif g <= 0:
            reason = "num_gpus<=0"
        elif g != round(g):
            reason = "num_gpus not integer"
        elif max_gpus is not None and g > max_gpus:
            reason = "num_gpus>max_gpus"
        if reason:
            dropped[reason] = dropped.get(reason, 0) + 1
        else:
            alive.append((jid, s))
    seen, kept = set(), []
    for jid, s in alive:
        if jid in seen:
            dropped["duplicate job_id"] = dropped.get("duplicate job_id", 0) + 1
        else:
            seen.add(jid)
            kept.append((jid, s))
    late, top = 0, -np.inf
    for _, s in kept:
        late += s < top
        top = max(top, s)
    if late:
        dropped["resorted"] = late
    return [j for j, _ in sorted(kept, key=lambda t: t[1])], dropped


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), SUBMITS, DURATIONS, GPUS), min_size=1, max_size=25),
       st.sampled_from([None, 2, 8]))
def test_drop_rules_match_the_reference(rows, max_gpus):
    text = "job_id,submit_time_s,duration_s,num_gpus\n" + "".join(f"{j},{s},{d},{g}\n" for j, s, d, g in rows)
    ids, dropped = _reference(rows, max_gpus)
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "jobs.csv"
        p.write_text(text)
        try:
            w = read_trace(p, on_bad_rows="drop", max_gpus=max_gpus)
        except FastbloxError as e:
            assert not ids and "no usable job rows" in str(e)
            return
        assert w.job_id.tolist() == ids and w.dropped == dropped
        assert len(w) + sum(v for k, v in dropped.items() if k != "resorted") == len(rows)
        bad = {k for k in dropped if k != "resorted"}
        if bad:
            try:
                read_trace(p, max_gpus=max_gpus)
            except FastbloxError as e:
                assert "on_bad_rows='drop'" in str(e)
            else:
                raise AssertionError("error mode accepted a trace with bad rows")
        else:  # rows out of submit order only: sorted and counted in error mode too
            strict = read_trace(p, max_gpus=max_gpus)
            assert strict.job_id.tolist() == ids and strict.dropped == dropped
