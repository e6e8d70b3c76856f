"""Trace readers: each format on a real file from ../shared, bad-row errors and drop counts,
Parquet round trip, format detection, inspect, and the `fastblox trace` commands."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import need_shared

from fastblox.errors import ConfigError, FastbloxError, TraceError
from fastblox.traces import (
    FORMATS, SCHEMA, detect_format, format_inspect, inspect, read_parquet, read_trace, register_format, to_arrow,
    write_parquet,
)
from fastblox.workload import Workload

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[2] / "shared"
DATA = REPO / "datasets"


@pytest.fixture
def traces():
    return need_shared(SHARED / "traces")


@pytest.fixture
def peer():
    return need_shared(SHARED / "peer-traces")


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def by_source(w):
    order = np.argsort(w.extra["source_id"].astype(str))
    return w.take(order)


# ============================================================================ registry
def test_registry_has_the_formats_and_duplicates_raise():
    for name in ("normalized", "parquet", "philly-log", "gavel", "tiresias", "neutral", "pollux", "alibaba-2023",
                 "helios", "pai-2020", "swf", "rfold"):
        assert name in FORMATS
    with pytest.raises(ConfigError, match="already registered"):
        register_format("normalized", description="again")(lambda path, **kw: None)
    with pytest.raises(ConfigError, match="unknown trace format"):
        read_trace(DATA / "philly_sample.csv.gz", format="no-such-format")


def test_options_and_modes_are_checked():
    with pytest.raises(ConfigError, match="no option 'bogus'"):
        read_trace(DATA / "philly_sample.csv.gz", bogus=1)
    with pytest.raises(ConfigError, match="on_bad_rows"):
        read_trace(DATA / "philly_sample.csv.gz", on_bad_rows="skip")
    with pytest.raises(ConfigError, match="max_gpus"):
        read_trace(DATA / "philly_sample.csv.gz", max_gpus=0)
    with pytest.raises(ConfigError, match="duration"):
        read_trace(DATA / "philly_cluster_job_log_sample.json", duration="mean")


# ============================================================================ normalized CSV
def test_normalized_philly_rfold(traces):
    path = traces / "philly-rfold" / "jobs.csv.gz"
    with pytest.raises(TraceError) as e:
        read_trace(path)
    msg = str(e.value)
    assert str(path) in msg and "column 'duration_s'" in msg and "10 row(s)" in msg
    assert "lines 23208" in msg and "on_bad_rows='drop'" in msg and "'duration_s<=0'" in msg
    w = read_trace(path, on_bad_rows="drop")
    assert len(w) == 111_539 and w.dropped == {"duration_s<=0": 10}
    assert w.job_id.dtype == np.int64 and w.num_gpus.dtype == np.int64 and w.submit_s.dtype == np.float64
    assert np.all(np.diff(w.submit_s) >= 0) and w.submit_s[0] == 0
    assert (w.duration_s > 0).all() and (w.num_gpus >= 1).all()
    assert int(w.num_gpus.max()) == 128 and int((w.num_gpus == 1).sum()) == 96_652


def test_normalized_censored_and_cpu_only_rows_ask_for_drop(traces):
    path = traces / "alibaba-gpu-v2023-fgd" / "jobs_default.csv.gz"
    with pytest.raises(TraceError) as e:
        read_trace(path)
    msg = str(e.value)
    assert "duration_s" in msg and "NaN" in msg and "897 row(s)" in msg and "on_bad_rows='drop'" in msg
    assert "num_gpus<=0" in msg  # the other reason is named too
    w = read_trace(path, on_bad_rows="drop")
    # 897 never scheduled, 1,088 CPU-only of which 36 also never scheduled (a row counts once, first reason)
    assert w.dropped == {"duration_s=NaN": 897, "num_gpus<=0": 1052}
    assert len(w) + sum(w.dropped.values()) == 8152
    assert w.extra["source_id"][0] == "openb-pod-0000" and "gpu_milli" in w.extra and "status" in w.extra


def test_normalized_chronus_zero_gpu_rows(traces):
    path = traces / "philly-chronus" / "jobs_MIX1.csv.gz"
    with pytest.raises(TraceError, match=r"184 row\(s\).*CPU-only.*on_bad_rows='drop'"):
        read_trace(path)
    w = read_trace(path, on_bad_rows="drop")
    assert len(w) == 30_940 - 184 and w.dropped == {"num_gpus<=0": 184}
    assert set(w.extra) >= {"vc", "model", "job_type", "best_effort"}
    assert np.isfinite(w.iterations).all()  # the iterations column becomes Workload.iterations


def test_normalized_dlrm_nan_submit_times(traces):
    w = read_trace(traces / "alibaba-gpu-v2025-dlrm" / "jobs.csv.gz", on_bad_rows="drop")
    assert w.dropped["submit_time_s=NaN"] == 7280
    assert len(w) + sum(w.dropped.values()) == 23_871


# ============================================================================ philly-log
def test_philly_log_dre_sample_matches_its_normalized_csv(traces):
    path = traces / "philly-dre-sample" / "sampled_jobs.json.gz"
    w = read_trace(path)  # rows out of submit order are not bad: sorted stably and counted in either mode
    assert len(w) == 4206 and set(w.dropped) == {"resorted"}
    assert read_trace(path, on_bad_rows="drop").dropped == w.dropped
    ref = read_trace(traces / "philly-dre-sample" / "jobs.csv.gz")
    a, b = by_source(w), by_source(ref)
    assert (a.extra["source_id"] == b.extra["source_id"]).all()
    np.testing.assert_array_equal(a.submit_s, b.submit_s)
    np.testing.assert_array_equal(a.duration_s, b.duration_s)
    np.testing.assert_array_equal(a.num_gpus, b.num_gpus)
    np.testing.assert_allclose(a.extra["queue_s"], b.extra["queue_s"])
    assert (a.extra["status"] == b.extra["status"]).all() and (a.extra["vc"] == b.extra["vc"]).all()
    # Blox's duration window
    wb = read_trace(path, on_bad_rows="drop", blox_filter=True)
    keep = (w.duration_s > 10**1.5 * 60) & (w.duration_s < 10**4 * 60)
    assert len(wb) == int(keep.sum()) and wb.dropped["blox duration filter"] == int((~keep).sum())


def test_philly_log_attempts_layout():
    path = DATA / "philly_cluster_job_log_sample.json"
    with pytest.raises(TraceError, match=r"no attempt.*jobs 39, 40.*'no valid attempt'"):
        read_trace(path)
    raw = json.loads(path.read_text())
    got = {}
    for mode in ("sum", "last", "span"):
        w = read_trace(path, on_bad_rows="drop", duration=mode)
        assert w.dropped["no valid attempt"] == 2 and len(w) == 38
        got[mode] = dict(zip(w.extra["source_id"].tolist(), w.duration_s.tolist()))
        nat = dict(zip(w.extra["source_id"].tolist(), w.extra["num_attempts"].tolist()))
    split = raw[36]["jobid"]  # two attempts around a 10-minute gap
    assert nat[split] == 2 and got["span"][split] - got["sum"][split] == 600
    assert got["last"][split] < got["sum"][split]
    running = raw[37]["jobid"]  # its 'None' attempt is ignored
    assert nat[running] == 1 and got["sum"][running] == got["last"][running] == got["span"][running]
    w = read_trace(path, on_bad_rows="drop")
    assert w.submit_s.min() == 0 and set(w.extra) >= {"user", "vc", "status", "queue_s", "num_machines"}


def test_philly_log_blox_filter_pins_both_bounds_in_minutes(tmp_path):
    """Blox keeps 10^1.5 min < duration < 10^4 min (1,897.4 s and 600,000 s), bounds excluded. The
    DRE sample's shortest job runs 3,614 s, so only a hand-made log tells minutes from seconds:
    40 s and 1,000 s would survive a lower bound of 10^1.5 s, 10,001 s would be dropped by an upper
    bound of 10^4 s."""
    durations = [40, 1000, 1897, 1898, 10001, 599999, 600000, 600001]
    jobs = []
    for i, d in enumerate(durations):
        start = np.datetime64("2017-10-03T00:00:00") + np.timedelta64(i, "m")
        stamp = lambda x: str(x).replace("T", " ")  # noqa: E731
        jobs.append({"jobid": f"application_{i}", "user": "u", "vc": "vc", "status": "Pass",
                     "submitted_time": stamp(start),
                     "attempts": [{"start_time": stamp(start), "end_time": stamp(start + np.timedelta64(d, "s")),
                                   "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]})
    path = write(tmp_path, "log.json", json.dumps(jobs))
    assert read_trace(path).duration_s.tolist() == durations
    w = read_trace(path, blox_filter=True, on_bad_rows="drop")
    assert w.duration_s.tolist() == [1898, 10001, 599999]
    assert w.dropped["blox duration filter"] == 5


def test_philly_log_rejects_non_lists(tmp_path):
    with pytest.raises(TraceError, match="JSON list"):
        read_trace(write(tmp_path, "x.json", '{"jobid": 1}'))
    with pytest.raises(TraceError, match="cannot read"):
        read_trace(write(tmp_path, "y.json", '[{"jobid": "a", "attempts": [1, 2]}]'))


# ============================================================================ gavel / neutral / tiresias
def test_gavel_trace_takes_the_neutral_durations(peer):
    w = read_trace(peer / "gavel_n2000_lam400_s0.trace", neutral=peer / "gavel_n2000_lam400_s0.neutral.csv")
    ref = read_trace(peer / "gavel_n2000_lam400_s0.neutral.csv")
    assert len(w) == 2000
    np.testing.assert_array_equal(w.duration_s, ref.duration_s)
    np.testing.assert_array_equal(w.num_gpus, ref.num_gpus)
    np.testing.assert_array_equal(w.iterations, ref.iterations)
    assert (w.extra["model"] == ref.extra["model"]).all()
    assert w.offered_load(48) == pytest.approx(0.70, abs=0.005) and w.offered_load(36) == pytest.approx(0.94, abs=0.005)
    w2 = read_trace(peer / "gavel_n100_lam400_s0.trace", neutral=peer / "gavel_n100_lam400_s0.neutral.csv")
    assert len(w2) == 100


def test_gavel_steps_per_s_tables(peer, tmp_path):
    ref = read_trace(peer / "gavel_n2000_lam400_s0.neutral.csv")
    sps = ref.iterations / ref.duration_s  # Gavel's V100 oracle throughput per (job type, GPUs)
    table = {}
    for jt, g, v in zip(ref.extra["model"].tolist(), ref.num_gpus.tolist(), sps.tolist()):
        table.setdefault(jt, {})[str(g)] = v
    one = read_trace(peer / "gavel_n2000_lam400_s0_1gpu.trace", steps_per_s=table)
    assert (one.num_gpus == 1).all()
    lut = {jt: d["1"] for jt, d in table.items()}
    np.testing.assert_allclose(one.duration_s, one.iterations / np.array([lut[m] for m in one.extra["model"]]))
    # the same numbers in Gavel's own throughputs layout, from a JSON file
    native = {"v100": {str((jt, int(g))): {"null": v} for jt, d in table.items() for g, v in d.items()}}
    f = tmp_path / "thr.json"
    f.write_text(json.dumps(native))
    multi = read_trace(peer / "gavel_n2000_lam400_s0.trace", steps_per_s=str(f))
    np.testing.assert_allclose(multi.duration_s, ref.duration_s, rtol=1e-12)
    with pytest.raises(ConfigError, match="worker type 'k80'"):
        read_trace(peer / "gavel_n2000_lam400_s0.trace", steps_per_s=str(f), worker_type="k80")
    with pytest.raises(ConfigError, match="no throughput"):
        read_trace(peer / "gavel_n2000_lam400_s0.trace", steps_per_s={"A3C": 1.0})


def test_gavel_trace_alone_runs_on_the_builtin_table_and_names_a_neutral_file_it_does_not_read(peer, tmp_path):
    """A Gavel trace needs nothing beside it: run times come from the built-in table (V100). A
    .neutral.csv beside it is not read, even a stale one, and a warning says so."""
    import shutil
    import warnings

    from fastblox.errors import FastbloxWarning

    alone = tmp_path / "g.trace"
    shutil.copy(peer / "gavel_n2000_lam400_s0.trace", alone)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w = read_trace(alone)
    ref = read_trace(peer / "gavel_n2000_lam400_s0.neutral.csv")
    np.testing.assert_array_equal(w.duration_s, ref.duration_s)  # Gavel made the neutral file from this table
    import polars as pl

    stale = pl.read_csv(peer / "gavel_n2000_lam400_s0.neutral.csv").with_columns(pl.col("duration") * 2)
    stale.write_csv(tmp_path / "g.neutral.csv")  # a stale neighbour: twice the run times
    with pytest.warns(FastbloxWarning, match=r"g.neutral.csv beside it is not read .*-o neutral=.*g.neutral.csv"):
        again = read_trace(alone)
    np.testing.assert_array_equal(again.duration_s, w.duration_s)
    assert read_trace(alone, neutral=tmp_path / "g.neutral.csv").duration_s.sum() == 2 * w.duration_s.sum()


def test_gavel_with_the_wrong_neutral(peer):
    with pytest.raises(TraceError, match="not the matching neutral"):
        read_trace(peer / "gavel_n2000_lam400_s0_1gpu.trace", neutral=peer / "gavel_n100_lam400_s0.neutral.csv")
    with pytest.raises(TraceError, match="does not match"):
        read_trace(peer / "gavel_n2000_lam400_s0_1gpu.trace", neutral=peer / "gavel_n2000_lam400_s0.neutral.csv")


def test_neutral_and_tiresias_peer_files(peer):
    n = read_trace(peer / "gavel_n2000_lam400_s0.neutral.csv")
    t = read_trace(peer / "gavel_n2000_lam400_s0.tiresias.csv")
    assert len(n) == len(t) == 2000
    np.testing.assert_array_equal(n.num_gpus, t.num_gpus)
    assert np.abs(n.duration_s - t.duration_s).max() <= 0.5  # Tiresias' file rounds to whole seconds
    np.testing.assert_array_equal(n.iterations, t.iterations)
    assert n.extra["model"][0] == "Transformer (batch size 128)" and t.extra["model"][0] == "resnet50"


def test_tiresias_60_jobs_and_chronus_raw(traces):
    w = read_trace(traces / "sched-paper-workloads" / "tiresias" / "60_job.csv")
    assert len(w) == 60 and w.extra["model"][0] == "vgg19" and w.iterations[0] == 606
    chronus = traces / "philly-chronus" / "trace_job_Philly_MIX1.csv.gz"
    assert detect_format(chronus) == "tiresias"
    c = read_trace(chronus, on_bad_rows="drop")
    assert c.dropped["num_gpus<=0"] == 184 and c.dropped["resorted"] > 0
    norm = read_trace(traces / "philly-chronus" / "jobs_MIX1.csv.gz", on_bad_rows="drop")
    assert len(c) == len(norm)
    np.testing.assert_array_equal(np.sort(c.job_id), np.sort(norm.job_id))


# ============================================================================ pollux / rfold
def test_pollux_philly_csv_equals_its_normalized_version(traces):
    raw = traces / "philly-pollux" / "philly.csv.gz"
    w = read_trace(raw)
    ref = read_trace(traces / "philly-pollux" / "jobs.csv.gz")
    assert len(w) == 82_247 and set(w.dropped) == {"resorted"}  # the trailing blank line is not a row
    for a in ("job_id", "submit_s", "duration_s", "num_gpus"):
        np.testing.assert_array_equal(getattr(w, a), getattr(ref, a))
    assert (w.extra["vc"] == ref.extra["vc"]).all()


def test_pollux_and_sia_workloads(traces):
    path = traces / "sched-paper-workloads" / "pollux-osdi21" / "simulator" / "workloads" / "workload-6.csv"
    with pytest.raises(TraceError, match="app_duration_s=.*cifar10"):
        read_trace(path)
    apps = {"cifar10": 1800, "ncf": 900, "deepspeech2": 7200, "bert": 5400, "yolov3": 36000, "imagenet": 172800}
    w = read_trace(path, app_duration_s=apps)
    assert len(w) == 160 and set(w.extra["model"]) <= set(apps)
    np.testing.assert_array_equal(w.duration_s, [apps[m] for m in w.extra["model"]])
    assert w.extra["source_id"][0].startswith(w.extra["model"][0])
    with pytest.raises(ConfigError, match="no run time for application"):
        read_trace(path, app_duration_s={"cifar10": 1})
    sia = read_trace(traces / "sched-paper-workloads" / "sia-sosp23" / "phoebe_workload.csv", app_duration_s=apps)
    assert len(sia) == 30 and sia.submit_s[0] == pytest.approx(9.661784)


def test_rfold_raw_files(traces):
    w = read_trace(traces / "philly-rfold" / "philly_trace.csv.gz", on_bad_rows="drop")
    ref = read_trace(traces / "philly-rfold" / "jobs.csv.gz", on_bad_rows="drop")
    np.testing.assert_array_equal(w.job_id, ref.job_id)
    np.testing.assert_allclose(w.duration_s, ref.duration_s, rtol=1e-9)
    crux = read_trace(traces / "crux-2024-rfold" / "crux.csv.gz", on_bad_rows="drop")
    assert crux.dropped == {"duration_s<=0": 241} and int(crux.num_gpus.max()) == 744


# ============================================================================ alibaba 2023
def test_alibaba_2023_pods(traces):
    path = traces / "alibaba-gpu-v2023-fgd" / "csv" / "openb_pod_list_default.csv.gz"
    w = read_trace(path, on_bad_rows="drop")
    ref = read_trace(traces / "alibaba-gpu-v2023-fgd" / "jobs_default.csv.gz", on_bad_rows="drop")
    assert w.dropped == ref.dropped and len(w) == 6203
    np.testing.assert_array_equal(w.duration_s, ref.duration_s)
    np.testing.assert_allclose(w.extra["gpu_fraction"], ref.extra["gpu_milli"] / 1000)
    frac = int((w.extra["gpu_fraction"] < 1).sum())
    assert frac == 2573 and (w.num_gpus[w.extra["gpu_fraction"] < 1] == 1).all()
    assert inspect(w)["fractional_gpu_jobs"] == frac
    np.testing.assert_allclose(w.extra["cpu_per_gpu"][0], 12.0)
    d = read_trace(path, on_bad_rows="drop", fractional="drop")
    assert d.dropped["fractional GPU"] == frac and len(d) == len(w) - frac
    with pytest.raises(TraceError, match="missing column"):
        read_trace(traces / "alibaba-gpu-v2023-fgd" / "csv" / "openb_pod_list_multigpu50.csv.gz")
    cpu = read_trace(traces / "alibaba-gpu-v2023-fgd" / "csv" / "openb_pod_list_cpu300.csv.gz", on_bad_rows="drop")
    assert cpu.dropped["num_gpus<=0"] > 0 and np.all(np.diff(cpu.submit_s) >= 0)


# ============================================================================ helios / pai / swf (bundled samples)
def test_helios_sample():
    path = DATA / "helios_sample.csv"
    assert detect_format(path) == "helios"
    with pytest.raises(TraceError, match=r"column 'gpu_num'.*line 4"):
        read_trace(path)
    w = read_trace(path, on_bad_rows="drop")
    assert len(w) == 11 and w.dropped == {"num_gpus<=0": 1}
    i = int(np.flatnonzero(w.job_id == 6)[0])
    assert w.duration_s[i] == 7200  # empty duration: end - start
    assert w.submit_s[0] == 0 and w.extra["status"][1] == "COMPLETED" and w.extra["vc"][0] == "vcEwI"
    np.testing.assert_allclose(w.extra["cpu_per_gpu"], 6.0)


def test_pai_2020_samples():
    path = DATA / "pai_job_table_sample.csv"
    assert detect_format(path) == "pai-2020"
    w = read_trace(path, on_bad_rows="drop")
    assert w.dropped == {"no task rows": 1, "duration_s=NaN": 1, "num_gpus<=0": 1} and len(w) == 5
    req = dict(zip(w.extra["source_id"].tolist(), zip(w.extra["gpu_request"].tolist(), w.num_gpus.tolist(),
                                                         w.extra["gpu_fraction"].tolist())))
    assert req["2a7d9c4e1b3f5a6c8d0e2f22"] == (0.5, 1, 0.5)     # half a GPU -> 1 GPU, share kept
    assert req["9e4b2d6f8a0c1e3b5d7f9a33"] == (4.0, 4, 1.0)     # ps without GPU + 4 workers
    assert req["3d7f1b5a9e2c4d6f8a0b2c77"] == (1.5, 2, 0.75)    # 3 x 50% -> 2 GPUs
    assert inspect(w)["fractional_gpu_jobs"] == 2
    d = read_trace(path, on_bad_rows="drop", fractional="drop")
    assert d.dropped["fractional GPU"] == 2
    tasks_only = read_trace(DATA / "pai_task_table_sample.csv", on_bad_rows="drop")
    assert len(tasks_only) == 5 and "no task rows" not in tasks_only.dropped


def test_swf_sample(tmp_path):
    path = DATA / "hpc_sample.swf"
    w = read_trace(path)
    assert len(w) == 10 and list(w.job_id) == list(range(1, 11))
    assert w.num_gpus[3] == 16  # allocated -1: falls back to requested
    assert w.extra["status"][2] == "failed" and w.extra["status"][4] == "cancelled"
    w4 = read_trace(path, procs_per_gpu=4)
    np.testing.assert_array_equal(w4.num_gpus, np.ceil(w.num_gpus / 4))
    bad = path.read_text().replace("    7     1500       2      90", "    7     1500       2      xx")
    bad = bad.replace("   10     3600      45   43200", "   10     3600      45")
    p = write(tmp_path, "bad.swf", bad)
    with pytest.raises(TraceError, match=r"2 row\(s\).*lines 18, 21.*'malformed line'"):
        read_trace(p)
    assert read_trace(p, on_bad_rows="drop").dropped == {"malformed line": 2}


# ============================================================================ bad rows (generic)
HEADER = "job_id,submit_time_s,duration_s,num_gpus,user\n"


def test_each_kind_of_bad_row_is_named_then_dropped_and_counted(tmp_path):
    rows = [
        "1,0,100,1,a",      # ok                                 line 2
        "2,10,,1,a",        # duration missing                   line 3
        "3,20,NaN,1,a",     # duration NaN                       line 4
        "4,30,-5,1,a",      # negative duration                  line 5
        "5,40,100,0,a",     # zero GPUs                          line 6
        "6,50,100,1.5,a",   # not a whole number of GPUs         line 7
        "7,60,100,64,a",    # larger than max_gpus=32            line 8
        "8,abc,100,1,a",    # submit not a number                line 9
        "1,70,100,1,b",     # duplicate id                       line 10
        "11,75,100,1,b",    # ok                                 line 11
        "9,65,100,2,b",     # out of order (before line 11)      line 12
        "10,80,100,2,b",    # ok                                 line 13
    ]
    p = write(tmp_path, "jobs.csv", HEADER + "\n".join(rows) + "\n")
    with pytest.raises(TraceError) as e:
        read_trace(p, max_gpus=32)
    msg = str(e.value)
    assert msg.startswith(f"{p}, column 'submit_time_s'") and "line 9" in msg
    assert "'duration_s=NaN'" in msg and "on_bad_rows='drop'" in msg
    w = read_trace(p, on_bad_rows="drop", max_gpus=32)
    assert w.dropped == {"submit_time_s=NaN": 1, "duration_s=NaN": 2, "duration_s<=0": 1, "num_gpus<=0": 1,
                         "num_gpus not integer": 1, "num_gpus>max_gpus": 1, "duplicate job_id": 1, "resorted": 1}
    assert list(w.job_id) == [1, 9, 11, 10] and list(w.submit_s) == [0, 65, 75, 80]
    # nothing vanishes: every data row is kept or counted (resorted rows are kept, not dropped)
    assert len(w) + sum(v for k, v in w.dropped.items() if k != "resorted") == len(rows)


@pytest.mark.parametrize("body,column,where", [
    ("1,0,,1\n", "duration_s", "line 2"),
    ("1,0,100,0\n2,1,100,0\n", "num_gpus", "lines 2, 3"),
    ("1,0,100,2.5\n", "num_gpus", "line 2"),
    ("1,0,100,1\n1,5,100,1\n", "job_id", "line 3"),
    ("1,-5,100,1\n", "submit_time_s", "line 2"),
    ("1,0,100,1e30\n", "num_gpus", "line 2"),
    ("x1,0,100,1\ny,1,100,1\nx1,2,100,1\n", "job_id", "line 4"),
])
def test_error_names_file_column_and_line(tmp_path, body, column, where):
    p = write(tmp_path, "t.csv", HEADER.replace(",user", "") + body)
    with pytest.raises(TraceError) as e:
        read_trace(p)
    msg = str(e.value)
    assert str(p) in msg and f"column {column!r}" in msg and where in msg and "--on-bad-rows drop" in msg


def test_max_gpus(tmp_path):
    p = write(tmp_path, "t.csv", HEADER + "1,0,10,4,a\n2,1,10,8,a\n3,2,10,16,a\n")
    with pytest.raises(TraceError, match="more GPUs than the cluster's 8"):
        read_trace(p, max_gpus=8)
    assert read_trace(p, max_gpus=8, on_bad_rows="drop").dropped == {"num_gpus>max_gpus": 1}
    assert len(read_trace(p)) == 3


def test_missing_or_misnamed_columns(tmp_path):
    p = write(tmp_path, "t.csv", "job_id,submit_time_s,duraton_s,num_gpus\n1,0,1,1\n")
    with pytest.raises(TraceError, match="missing column.*'duration_s'.*did you mean 'duraton_s'"):
        read_trace(p, format="normalized")
    with pytest.raises(TraceError, match="cannot tell the trace format.*format="):
        read_trace(p)


def test_string_ids_become_row_numbers_with_source_id(tmp_path):
    p = write(tmp_path, "t.csv", HEADER + "a,0,10,1,u\nb,1,10,1,u\na,2,10,1,u\n")
    with pytest.raises(TraceError, match="repeats an id"):
        read_trace(p)
    w = read_trace(p, on_bad_rows="drop")
    assert list(w.job_id) == [0, 1] and list(w.extra["source_id"]) == ["a", "b"]


def test_empty_and_header_only_files(tmp_path):
    with pytest.raises(TraceError, match="empty"):
        read_trace(write(tmp_path, "e.csv", ""), format="normalized")
    with pytest.raises(TraceError, match="no usable job rows"):
        read_trace(write(tmp_path, "h.csv", HEADER), format="normalized")
    with pytest.raises(TraceError, match="no such file"):
        read_trace(tmp_path / "absent.csv")


# ============================================================================ Parquet
def test_parquet_round_trip_keeps_columns_name_and_drop_counts(tmp_path, traces):
    w = read_trace(traces / "philly-dre-sample" / "sampled_jobs.json.gz", on_bad_rows="drop", blox_filter=True)
    t = to_arrow(w)
    assert t.schema.field("job_id").type == pa.int64() and t.schema.field("num_gpus").type == pa.int64()
    assert t.schema.field("user").type == pa.string() and t.schema.field("submit_time_s").type == pa.float64()
    assert t.column_names[:4] == ["job_id", "submit_time_s", "duration_s", "num_gpus"]
    for f in t.schema:
        if f.name in SCHEMA.names:
            assert f.type == SCHEMA.field(f.name).type
    out = tmp_path / "w.parquet"
    write_parquet(w, out)
    r = read_parquet(out)
    assert r.name == w.name and r.dropped == w.dropped
    for a in ("job_id", "submit_s", "duration_s", "num_gpus"):
        np.testing.assert_array_equal(getattr(r, a), getattr(w, a))
    assert set(r.extra) == set(w.extra)
    for k in w.extra:
        assert list(r.extra[k]) == list(w.extra[k]) or np.allclose(r.extra[k], w.extra[k], equal_nan=True)
    assert detect_format(out) == "parquet" and len(read_trace(out)) == len(w)


def test_parquet_with_iterations_and_bad_rows(tmp_path):
    w = Workload.from_arrays([0, 1, 2], [1, 2, 4], duration_s=[10, 20, 30], iterations=[5, np.nan, 7], model=np.array(["a", "b", None], dtype=object))
    out = tmp_path / "i.parquet"
    write_parquet(w, out)
    r = read_trace(out)
    np.testing.assert_array_equal(r.iterations, w.iterations)
    assert list(r.extra["model"]) == ["a", "b", None]
    bad = pa.table({"job_id": [1, 2], "submit_time_s": [0.0, 1.0], "duration_s": [5.0, float("nan")], "num_gpus": [1, 1]})
    pq.write_table(bad, tmp_path / "b.parquet")
    with pytest.raises(TraceError, match=r"data row 2.*on_bad_rows='drop'"):
        read_trace(tmp_path / "b.parquet")
    assert read_trace(tmp_path / "b.parquet", on_bad_rows="drop").dropped == {"duration_s=NaN": 1}
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(TraceError, match="Parquet"):
        read_trace(tmp_path / "junk.parquet")


# ============================================================================ detection
def test_detection_on_real_files(traces, peer):
    expect = {
        traces / "philly-rfold" / "jobs.csv.gz": "normalized",
        traces / "philly-rfold" / "philly_trace.csv.gz": "rfold",
        traces / "philly-pollux" / "philly.csv.gz": "pollux",
        traces / "philly-dre-sample" / "sampled_jobs.json.gz": "philly-log",
        traces / "alibaba-gpu-v2023-fgd" / "csv" / "openb_pod_list_default.csv.gz": "alibaba-2023",
        traces / "sched-paper-workloads" / "sia-sosp23" / "workloads" / "saturn" / "workload-1.csv": "pollux",
        traces / "sched-paper-workloads" / "tiresias" / "60_job.csv": "tiresias",
        peer / "gavel_n100_lam400_s0.trace": "gavel",
        peer / "gavel_n100_lam400_s0.neutral.csv": "neutral",
        peer / "gavel_n100_lam400_s0.tiresias.csv": "tiresias",
        DATA / "hpc_sample.swf": "swf",
        DATA / "philly_cluster_job_log_sample.json": "philly-log",
        DATA / "pai_task_table_sample.csv": "pai-2020",
    }
    for path, fmt in expect.items():
        assert detect_format(path) == fmt, path
    for path in (peer / "n12g4.csv", peer / "gavel_n100_lam400_s0.alibaba.csv", traces / "README.md"):
        with pytest.raises(TraceError, match="pass format="):
            read_trace(path)


def test_gzip_is_detected_by_content(tmp_path):
    body = (HEADER + "1,0,10,1,a\n2,5,10,2,b\n").encode()
    p = tmp_path / "jobs.csv"  # gzip bytes under a plain name
    p.write_bytes(gzip.compress(body))
    assert len(read_trace(p)) == 2
    (tmp_path / "cut.csv.gz").write_bytes(gzip.compress(body)[:-12])
    with pytest.raises(TraceError, match="gzip"):
        read_trace(tmp_path / "cut.csv.gz")


# ============================================================================ inspect
def test_inspect_numbers():
    w = Workload.from_arrays([0, 3600, 7200, 7200 + 86400], [1, 2, 2, 8], duration_s=[100, 200, 300, 400],
                             status=np.array(["Pass", "Failed", "Pass", None], dtype=object))
    d = inspect(w, total_gpus=4)
    assert d["jobs"] == 4 and d["span_s"] == 7200 + 86400
    assert d["gpu_mix"] == {1: 1, 2: 2, 8: 1} and d["jobs_larger_than_cluster"] == 1
    assert d["duration_s"]["p50"] == 250 and d["duration_s"]["p100"] == 400
    assert d["hour_of_day"][0] == 1 and d["hour_of_day"][1] == 1 and d["hour_of_day"][2] == 2
    gaps = np.diff(w.submit_s)
    assert d["interarrival"]["cv"] == pytest.approx(gaps.std() / gaps.mean())
    assert d["offered_load"] == pytest.approx(w.offered_load(4)) and d["status"]["Pass"] == 2
    text = format_inspect(d)
    assert "4 jobs" in text and "load" in text and "CV" in text and "1 job(s) larger than the cluster" in text
    json.dumps(d)


def test_inspect_real_trace(traces):
    w = read_trace(traces / "philly-pollux" / "jobs.csv.gz")
    d = inspect(w, total_gpus=1024)
    assert d["jobs"] == 82_247 and d["gpu_mix"][1] == 76_627 and sum(d["hour_of_day"]) == 82_247
    assert d["gpu_hours"] == pytest.approx(978_000, rel=0.01)
    assert "82,247 jobs" in format_inspect(d)


# ============================================================================ CLI
def test_cli_trace_commands(tmp_path, capsys, traces):
    from fastblox.cli import main

    src = traces / "philly-rfold" / "jobs.csv.gz"
    assert main(["trace", "inspect", str(src), "--on-bad-rows", "error"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "on_bad_rows='drop'" in err and "--on-bad-rows drop" in err
    assert main(["trace", "inspect", str(src)]) == 0  # inspecting counts the bad rows by reason instead
    out = capsys.readouterr().out  # with where the first ones are (checked against the file with polars)
    assert "dropped    10 row(s) while reading, by reason (line numbers count the header as line 1):" in out
    assert "duration_s<=0: 10 (lines 23208, 39365, 39370, 46818, 49267 and 5 more)" in out
    assert main(["trace", "inspect", str(src), "--on-bad-rows", "drop", "--cluster", "32x4"]) == 0
    out = capsys.readouterr().out
    assert "111,539 jobs" in out and "on 128 GPUs" in out and "duration_s<=0: 10" in out
    dst = tmp_path / "p.parquet"
    assert main(["trace", "convert", str(src), str(dst), "--on-bad-rows", "drop"]) == 0
    assert "wrote 111,539 jobs" in capsys.readouterr().out and len(read_parquet(dst)) == 111_539
    assert main(["trace", "inspect", str(dst), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dropped"] == {"duration_s<=0": 10}
    assert main(["trace", "convert", str(src), str(tmp_path / "p.csv")]) == 2
    assert "must end in .parquet" in capsys.readouterr().err
    log = traces / "philly-dre-sample" / "sampled_jobs.json.gz"
    assert main(["trace", "inspect", str(log), "--on-bad-rows", "drop", "-o", "duration=last", "-o", "blox_filter=true"]) == 0
    assert "blox duration filter" in capsys.readouterr().out
    assert main(["trace", "inspect", str(log), "--cluster", "banana"]) == 2
    assert main(["trace", "formats"]) == 0 and "philly-log" in capsys.readouterr().out


def test_load_sample():
    from fastblox.datasets import load_sample, sample_path

    w = load_sample()
    assert len(w) == 2000 and (w.duration_s > 0).all() and (w.num_gpus >= 1).all() and not w.dropped
    assert sample_path("swf").name == "hpc_sample.swf"
    with pytest.raises(FastbloxError):
        sample_path("nope")
