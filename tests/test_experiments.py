"""Named experiments, their figures and the HTML report."""

import argparse
import re
from pathlib import Path

import polars as pl
import pytest

from fastblox.errors import ConfigError
from fastblox.experiments import EXPERIMENTS, Figure, Recipe, register_recipe, run_experiment
from fastblox.experiments_cli import add_experiment_commands
from fastblox.report import write_report


@pytest.fixture(scope="module")
def fig6(tmp_path_factory):
    out = tmp_path_factory.mktemp("fig6")
    return out, run_experiment("blox-fig6", out, quick=True)


def test_fig6_quick_files(fig6):
    out, files = fig6
    for stem in ("avg_jct_vs_load", "jct_cdf_load8", "avg_responsiveness_vs_load", "timeseries_load8", "preemptions_load8"):
        for ext in ("png", "pdf"):
            p = files[f"{stem}_{ext}"]
            assert p == out / f"{stem}.{ext}" and p.stat().st_size > 1000
    assert (out / "summary.csv").exists() and (out / "experiment.json").exists()


def test_fig6_quick_summary(fig6):
    out, _ = fig6
    s = pl.read_parquet(out / "summary.parquet")
    assert s.height == 18  # 3 policies x 3 loads x 2 seeds
    assert sorted(set(s["load"].to_list())) == [2.0, 5.0, 8.0] and set(s["seed"]) == {1, 2}
    # Blox's seed (1)
    at8 = {r["policy"]: r for r in s.filter((pl.col("load") == 8.0) & (pl.col("seed") == 1)).iter_rows(named=True)}
    fifo = at8["fifo"]
    # Blox's Figure 6: SRTF's average JCT is far below FIFO's at high load.
    assert at8["srtf"]["avg_jct_s"] < fifo["avg_jct_s"]
    # LAS: most jobs finish far sooner than under FIFO (median, responsiveness); its *average*
    # is above FIFO's in the Blox replay at load 8 (a few long jobs starve under LAS), see docs.
    assert at8["las"]["p50_jct_s"] < fifo["p50_jct_s"]
    assert at8["las"]["avg_responsiveness_s"] < fifo["avg_responsiveness_s"]
    assert at8["srtf"]["avg_responsiveness_s"] < fifo["avg_responsiveness_s"]


def test_report(fig6):
    out, _ = fig6
    path = write_report(out)
    text = path.read_text()
    assert path == out / "report.html"
    assert '<img src="data:image/png;base64,' in text
    assert "<table>" in text and "avg_jct_s" in text and "srtf" in text
    assert text.count("<img") == 5
    # captions say what each figure shows, from the recipe (not file names), with the seeds' spread
    caps = re.findall(r"<figcaption>(.*?) <span", text)
    assert len(caps) == 5
    fig6 = next(c for c in caps if c.startswith("Blox Fig. 6 replayed"))
    assert "mean of 2 seeds; error bars span the min-max across seeds" in fig6
    assert "not joined by lines: 3 values of load" in fig6  # quick mode: 2, 5, 8 are not a curve
    assert "Blox (published): no numeric values available, none drawn." in fig6
    assert any("pools the tracked jobs of 2 seeds" in c for c in caps)
    assert any("Shown: seed 1 (one of 2 seeds)" in c for c in caps)
    # constant columns listed once, always-empty ones left out of the table
    head = re.search(r"<thead>(.*?)</thead>", text).group(1)
    assert "<th>policy</th>" in head and "<th>load</th>" in head and "<th>seed</th>" in head
    assert "<th>workload</th>" not in head and "<b>workload</b> = blox" in text
    assert "<th>trace</th>" not in head and "Empty in every row (not shown): " in text


def test_report_finds_nested_summaries(fig6, tmp_path):
    out, _ = fig6
    import shutil

    shutil.copy(out / "summary.parquet", tmp_path / "summary_a.parquet")
    (tmp_path / "sub").mkdir()
    shutil.copy(out / "summary.parquet", tmp_path / "sub" / "summary.parquet")
    text = write_report(tmp_path).read_text()
    assert text.count("<table>") == 2


def test_unknown_experiment():
    with pytest.raises(ConfigError, match="blox-fig6"):
        run_experiment("blox-fig7", "unused")


def test_cli(fig6, tmp_path):
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command")
    add_experiment_commands(sub)
    a = ap.parse_args(["experiment", "nope", "--out", str(tmp_path / "x")])
    with pytest.raises(ConfigError, match="philly-arrivals"):
        a.func(a)
    assert not (tmp_path / "x").exists()
    out, _ = fig6
    a = ap.parse_args(["report", str(out), "--out", str(tmp_path / "r.html")])
    assert a.func(a) == 0 and "data:image/png;base64," in (tmp_path / "r.html").read_text()
    assert set(EXPERIMENTS) == {"blox-fig6", "blox-admission", "philly-arrivals", "blox-dynamic", "blox-high-load",
                                "gavel-mix", "blox-large-cluster", "hetero-cluster", "pollux-headline",
                                "synergy-cpu"}


def test_admission_quick(tmp_path):
    files = run_experiment("blox-admission", tmp_path, quick=True)
    s = pl.read_parquet(files["summary"])
    assert s.height == 12 and set(s["admission"]) == {"accept-all", "load:1.2"} and set(s["seed"]) == {1, 2}
    assert files["avg_jct_by_admission_png"].exists()


NEW = {
    "blox-dynamic": ["avg_jct_vs_load", "policy_over_time", "policy_shares", "jct_cdf_load9"],
    "blox-high-load": ["avg_jct_vs_load", "p99_jct_vs_load", "jct_cdf_load14"],
    "gavel-mix": ["avg_jct_vs_load", "avg_queue_vs_load", "jct_by_gpus_load5", "jct_cdf_load5"],
    "blox-large-cluster": ["avg_jct_vs_load", "jct_cdf_load7"],
}


@pytest.mark.slow  # (each a whole quick study: 5-9 s)
@pytest.mark.parametrize("name", sorted(NEW))
def test_new_settings_quick(tmp_path, name):
    files = run_experiment(name, tmp_path, quick=True)
    for stem in NEW[name]:
        for ext in ("png", "pdf"):
            assert files[f"{stem}_{ext}"] == tmp_path / f"{stem}.{ext}" and files[f"{stem}_{ext}"].stat().st_size > 1000
    s = pl.read_parquet(tmp_path / "summary.parquet")
    assert set(s["policy"]) == {"fifo", "las", "srtf", "dynamic"}
    assert s["compat"].is_null().all()  # the native engine
    dyn = s.filter(pl.col("policy") == "dynamic")
    assert (dyn["candidates"] == "fifo,las,srtf").all() and (dyn["period_s"] == 3600.0).all()
    assert s.filter(pl.col("policy") != "dynamic")["candidates"].is_null().all()
    html = write_report(tmp_path).read_text()
    assert html.count("<img") == len(NEW[name])
    if name == "blox-large-cluster":
        assert set(s["cluster"]) == {"32x4", "128x4"}
        # 4x the GPUs with 4x the load: the same load per GPU
        csv = pl.read_csv(tmp_path / "summary.csv")
        assert set(csv["load_per_128_gpus"]) == {7.0}
    if name == "blox-dynamic":
        # a dynamic run at load 9 changes policy (seed 1 does; seed 2 keeps one policy throughout);
        # its periods are in points/<id>.periods.parquet
        row = dyn.filter(pl.col("load") == 9.0).sort("num_switches", "point_id", descending=True).row(0, named=True)
        per = pl.read_parquet(tmp_path / "points" / f"{row['point_id']}.periods.parquet")
        assert per.height == row["num_periods"] and row["num_switches"] >= 1


def test_recipe_registry_errors():
    with pytest.raises(ConfigError, match="already registered"):
        register_recipe(EXPERIMENTS["blox-fig6"])
    with pytest.raises(ConfigError, match="unknown figure kind 'pie'"):
        register_recipe(Recipe("x-pie", "d", {"workload": "gavel"}, {}, figures=(Figure("pie", "p", "t"),)))
    assert "x-pie" not in EXPERIMENTS
    quick = EXPERIMENTS["blox-dynamic"].config(quick=True)
    full = EXPERIMENTS["blox-dynamic"].config()
    assert quick["base"]["num_jobs"] < full["base"]["num_jobs"] and quick["name"] == "blox-dynamic-quick"


@pytest.mark.slow  # (each a whole quick study: 5-9 s)
def test_hetero_cluster_quick(tmp_path):
    files = run_experiment("hetero-cluster", tmp_path, quick=True)
    for stem in ("avg_jct_vs_load", "rho_p95_vs_load", "jct_cdf_load3", "jct_by_gpus_load3"):
        assert files[f"{stem}_png"].stat().st_size > 1000
    s = pl.read_parquet(tmp_path / "summary.parquet")
    assert set(s["policy"]) == {"fifo", "tiresias", "gavel", "gavel-las-agnostic"}
    assert (s["throughput_table"] == "gavel").all() and (s["jobs_with_known_model"] == 120).all()
    assert set(s["seed"]) == {0, 1}
    by = {r["policy"]: r for r in s.group_by("policy").agg(pl.col("avg_jct_s").mean()).iter_rows(named=True)}
    # Gavel's heterogeneity-aware allocation beats its agnostic twin on the mixed cluster
    assert by["gavel"]["avg_jct_s"] < by["gavel-las-agnostic"]["avg_jct_s"]
    by = {r["policy"]: r for r in s.iter_rows(named=True)}
    assert by["gavel"]["time_model"] == "rounds" and by["fifo"]["time_model"] == "events"


@pytest.mark.slow
def test_pollux_headline_recipe_runs_from_the_clone(tmp_path):
    """Pollux vs Optimus vs Tiresias on workload-6, shipped in datasets/pollux: Tiresias and Optimus
    give the Pollux simulator's README numbers, Pollux beats both (as in the paper)."""
    import polars as pl

    files = run_experiment("pollux-headline", tmp_path / "p")
    s = pl.read_parquet(tmp_path / "p" / "summary.parquet")
    jct = dict(zip(s["policy"].to_list(), s["avg_jct_s"].to_list()))
    assert jct["tiresias"] == pytest.approx(3469.69375) and jct["optimus"] == pytest.approx(5301.875)
    assert jct["pollux"] < jct["tiresias"] < jct["optimus"]
    assert {"avg_jct_by_policy", "jct_cdf"} <= {Path(str(p)).stem for p in files.values()}


@pytest.mark.slow
def test_synergy_cpu_recipe_synergy_beats_proportional_where_cpus_are_scarce(tmp_path):
    """Synergy's claim: with few CPUs per GPU, giving jobs the CPUs their profile asks for (Greedy,
    Tune) beats the GPU-proportional share, and the gap closes as CPUs grow; the figure is drawn."""
    import polars as pl

    files = run_experiment("synergy-cpu", tmp_path / "s")
    s = pl.read_parquet(tmp_path / "s" / "summary.parquet").with_columns(
        pl.col("policy_opts").str.extract(r"cpus=(\d+)").cast(pl.Int64).alias("cpus"))
    jct = {(p, c): v for p, c, v in zip(s["policy"], s["cpus"], s["avg_jct_s"])}
    assert len(jct) == 20 and set(s["num_finished"]) == {200}
    gap = {}
    for order in ("srtf", "fifo"):
        for c in (24, 32, 40, 48):
            assert jct[order + "+tune", c] < jct[order + "+fair", c]
        gap[order] = [jct[order + "+fair", c] / jct[order + "+tune", c] for c in (24, 48)]
        assert gap[order][0] > 1.2 and gap[order][1] < gap[order][0]  # 3 CPUs/GPU: > 20 %; less at 6
    assert jct["srtf", 24] < jct["srtf+fair", 24]  # Synergy-Greedy too
    png = Path(str(files["avg_jct_vs_cpus_png"]))
    assert png.is_file() and png.stat().st_size > 10_000
