"""`fastblox plot` / `fastblox compare` on run and sweep folders, the figures' captions and the
report of a plain sweep folder."""

import re

import numpy as np
import polars as pl
import pytest

from fastblox.cli import main
from fastblox.folder_plots import folder_kind, read_run, run_labels
from fastblox.plots import _joinable, avg_jct_vs_load, caption_of
from fastblox.report import split_columns, write_report
from fastblox.sweep import run_sweep

RUN = ["--workload", "sample", "--num-jobs", "200", "--cluster", "16x8", "--record-series"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    out = []
    for pol in ("las", "fifo"):
        d = root / pol
        assert main(["run", *RUN, "--policy", pol, "--out", str(d)]) == 0
        out.append(d)
    return out


def _sweep(root, grid, seeds=None, **base):
    base = {"workload": "gavel", "num_jobs": 120, "cluster": "4x4", **base}
    cfg = {"name": "small", "base": {k: v for k, v in base.items() if k not in grid}, "grid": grid}
    if seeds:
        cfg["seeds"] = seeds
    res = run_sweep(cfg, root, executor="serial", progress=False)
    assert res.ok
    return root


@pytest.fixture(scope="module")
def load_sweep(tmp_path_factory):
    """policy x load, 2 seeds, series recorded."""
    return _sweep(tmp_path_factory.mktemp("sw") / "loads", {"policy": ["fifo", "srtf"], "load": [3, 6]},
                  seeds=[0, 1], record_series=True)


@pytest.fixture(scope="module")
def cat_sweep(tmp_path_factory):
    """policy x cluster at one load, one seed."""
    return _sweep(tmp_path_factory.mktemp("sw") / "cats", {"policy": ["fifo", "srtf"], "cluster": ["4x4", "8x4"]})


def _pngs(folder):
    return {p.stem for p in folder.glob("*.png")}


def test_plot_run_folder(runs, capsys, tmp_path):
    assert main(["plot", str(runs[0]), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.split()
    assert _pngs(tmp_path) == {"jct_cdf", "timeseries", "preemptions"}
    assert {p for p in printed} == {str(tmp_path / f"{s}.{e}") for s in _pngs(tmp_path) for e in ("png", "pdf")}
    cap = caption_of(tmp_path / "jct_cdf.png")
    assert cap.startswith("Cumulative distribution of the job completion times") and "the run" in cap


def test_figures_are_deterministic(runs, tmp_path):
    for d in ("a", "b"):
        assert main(["plot", str(runs[0]), "--out", str(tmp_path / d)]) == 0
    for f in ("jct_cdf.png", "jct_cdf.pdf", "timeseries.pdf"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_plot_runs_overlaid_labels(runs, tmp_path):
    # the options that differ: the policy (preempt follows from it and is left out of the label)
    assert run_labels([read_run(p) for p in runs]) == ["LAS", "FIFO"]
    assert main(["plot", *map(str, runs), "--out", str(tmp_path)]) == 0
    assert "2 runs" in caption_of(tmp_path / "jct_cdf.png")
    # same options: the folder names tell the runs apart
    assert run_labels([read_run(runs[0]), read_run(runs[0])]) == ["las", "las"]


def test_compare(runs, capsys, tmp_path):
    assert main(["compare", *map(str, runs), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["run", "avg", "JCT", "(h)", "p50", "JCT", "(h)", "p99", "JCT", "(h)", "makespan", "(h)",
                              "util", "(%)", "preemptions"]
    las, fifo = out[2], out[3]
    assert las.startswith("LAS ") and fifo.startswith("FIFO ")
    assert las.count("(x1.00)") == 5  # the baseline against itself
    s_las, s_fifo = (read_run(p).summary for p in runs)
    ratio = s_fifo["avg_jct_s"] / s_las["avg_jct_s"]
    assert f"{s_fifo['avg_jct_s'] / 3600:,.2f} (x{ratio:.2f})" in fifo
    assert out[-2:] == [str(tmp_path / "compare_jct_cdf.png"), str(tmp_path / "compare_jct_cdf.pdf")]
    assert "LAS, FIFO" in caption_of(tmp_path / "compare_jct_cdf.png")


def test_plot_sweep_vs_load(load_sweep, capsys):
    assert main(["plot", str(load_sweep)]) == 0
    assert _pngs(load_sweep) == {"avg_jct_vs_load", "p99_jct_vs_load", "jct_cdf_load3", "jct_cdf_load6",
                                 "timeseries_load6"}
    cap = caption_of(load_sweep / "avg_jct_vs_load.png")
    assert "one line per policy" in cap and "mean of 2 seeds; error bars span the min-max across seeds" in cap
    assert "not joined by lines: 2 values of load" in cap
    assert "pools the tracked jobs of 2 seeds" in caption_of(load_sweep / "jct_cdf_load3.png")
    assert "(seed 0)" in caption_of(load_sweep / "timeseries_load6.png")


def test_plot_sweep_categorical(cat_sweep):
    assert main(["plot", str(cat_sweep)]) == 0
    assert _pngs(cat_sweep) == {"avg_jct_by_policy", "p99_jct_by_policy", "jct_cdf"}
    assert "by policy and cluster" in caption_of(cat_sweep / "avg_jct_by_policy.png")
    assert "One run per point" in caption_of(cat_sweep / "avg_jct_by_policy.png")


def test_plot_errors(tmp_path, runs, load_sweep, capsys):
    cases = {
        str(tmp_path / "nope"): f"{tmp_path / 'nope'}: no such folder; expected a run folder (jobs.parquet and "
                                "summary.json",
        str(tmp_path): f"{tmp_path} is neither a run nor a sweep folder: expected a run folder",
    }
    (tmp_path / "f.txt").write_text("x")
    cases[str(tmp_path / "f.txt")] = "is a file, not a folder"
    for path, msg in cases.items():
        assert main(["plot", path]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("fastblox: error: ") and msg in err, err
    assert main(["plot", str(runs[0]), str(load_sweep)]) == 2
    assert "give run folders or sweep folders, not both" in capsys.readouterr().err
    assert main(["compare", str(runs[0])]) == 2
    assert "at least two runs (run folders, or a sweep folder of several points)" in capsys.readouterr().err
    assert folder_kind(runs[0]) == "run" and folder_kind(load_sweep) == "sweep"


def test_joinable():
    assert not _joinable([2, 5, 8])  # quick mode: three far-apart loads are not a curve
    assert not _joinable([2, 5])
    assert _joinable(range(1, 10))
    assert _joinable([6, 7, 7.5, 8, 8.5, 9])
    assert not _joinable([1, 2, 3, 9])


def test_reference_points(tmp_path):
    s = pl.DataFrame({"policy": ["fifo", "fifo", "fifo", "fifo"], "load": [1.0, 2.0, 1.0, 2.0], "seed": [0, 0, 1, 1],
                      "avg_jct_s": [3600.0, 7200.0, 5400.0, 9000.0]})
    ref = pl.DataFrame({"policy": ["fifo"], "load": [2.0], "avg_jct_s": [8000.0]})
    png, _ = avg_jct_vs_load(s, tmp_path / "f", reference=ref, reference_label="Paper")
    cap = caption_of(png)
    assert "Black hollow markers: Paper (1 points)." in cap and "mean of 2 seeds" in cap
    png, _ = avg_jct_vs_load(s, tmp_path / "g", reference=ref.clear(), reference_label="Paper")
    assert "Paper: no numeric values available, none drawn." in caption_of(png)


def test_report_of_plain_sweep(cat_sweep, tmp_path):
    import shutil

    d = tmp_path / "plain"
    shutil.copytree(cat_sweep, d, ignore=shutil.ignore_patterns("*.png", "*.pdf"))
    text = write_report(d).read_text()
    assert "No PNG figures found" not in text
    assert text.count("<img") == 3 == len(list(d.glob("*.png")))
    caps = re.findall(r"<figcaption>(.*?) <span", text)
    assert caps[0].startswith("average JCT of the tracked jobs by policy and cluster")  # summaries first
    assert all(not c.endswith(".png") for c in caps)
    head = re.search(r"<thead>(.*?)</thead>", text).group(1)
    assert "<th>policy</th>" in head and "<th>cluster</th>" in head
    assert "<th>workload</th>" not in head and "<b>workload</b> = gavel" in text
    assert "<th>trace</th>" not in head and re.search(r"Empty in every row \(not shown\): [^<]*\btrace\b", text)


def test_split_columns():
    df = pl.DataFrame({"point_id": ["a", "b"], "x": [1, 2], "c": ["k", "k"], "e": [None, None],
                       "n": [float("nan"), float("nan")], "s": ["", ""]})
    assert split_columns(df) == (["point_id", "x"], {"c": "k"}, ["e", "n", "s"])
    one = df.head(1)
    assert split_columns(one)[1] == {} and "c" in split_columns(one)[0]


def test_report_of_run_folder(runs, tmp_path):
    import shutil

    d = tmp_path / "run"
    shutil.copytree(runs[1], d)
    text = write_report(d).read_text()
    assert text.count("<img") == 3 and "<th>avg_jct_s</th>" in text and "<th>policy</th>" in text
    assert np.isfinite(read_run(d).summary["avg_jct_s"])


def test_compare_a_sweep_folder_compares_its_points(load_sweep, tmp_path, capsys):
    """A sweep's points are runs too: one row each, labelled by what varies, relative to the first."""
    import polars as pl

    assert main(["compare", str(load_sweep), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    s = pl.read_parquet(load_sweep / "summary.parquet")
    rows = [ln for ln in out.splitlines() if ln.startswith(("FIFO", "SRTF"))]
    assert len(rows) == s.height == 8
    assert [r.split("  ")[0] for r in rows[:3]] == ["FIFO load 3 seed=0", "FIFO load 3 seed=1", "FIFO load 6 seed=0"]
    assert "(x1.00)" in rows[0] and "(x1.00)" not in rows[1]
    assert (tmp_path / "compare_jct_cdf.png").exists()


def test_target_load_is_the_x_axis_of_a_trace_sweep(tmp_path):
    """A trace swept over --target-load is drawn against the offered load it was rescaled to."""
    from fastblox.folder_plots import sweep_axes

    root = _sweep(tmp_path / "tl", {"policy": ["fifo", "las"], "target_load": [0.5, 0.7, 0.9, 1.1]},
                  workload="sample", num_jobs=200, cluster="4x8")
    assert main(["plot", str(root)]) == 0
    assert {"avg_jct_vs_load", "p99_jct_vs_load"} <= _pngs(root)
    assert "jct_cdf_load0.5" in {p.stem for p in root.glob("*.png")}
    params = [{"policy": p, "target_load": x} for p in ("fifo", "las") for x in (0.5, 1.0)]
    assert sweep_axes(params) == (["policy"], "target_load", False)
