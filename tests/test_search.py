"""fastblox search: config validation, deterministic samplers, the optimum found, resume after an
interrupt (same bytes as an uninterrupted search), TPE, the missing-Optuna message, the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from fastblox.cli import main
from fastblox.errors import ConfigError
from fastblox.sweep import SearchInterrupted, load_search_config, run_search, run_sweep
from fastblox.sweep import search as search_mod
from fastblox.sweep.search_config import OBJECTIVES

ROOT = Path(__file__).resolve().parents[1]

# FIFO with a restart cost: every job runs once, so each second of restart cost delays every job
# behind it; the average JCT grows with restart_s (the best is the smallest value drawn)
FIFO_RESTART = {"base": {"workload": "blox", "load": 8, "num_jobs": 300, "policy": "fifo"},
                "search": {"objective": "avg_jct_s", "trials": 6, "batch": 3, "seed": 3,
                           "space": {"restart_s": {"low": 0, "high": 600}}}}
# LAS on Blox's workload at load 8 with Blox's load-based admission: a template variable
ADMISSION = {"seeds": [1, 2],
             "base": {"workload": "blox", "load": 8, "num_jobs": 400, "policy": "las",
                      "admission": "load:{threshold}"},
             "search": {"objective": "avg_jct_s", "trials": 8, "batch": 3, "seed": 0,
                        "space": {"threshold": {"low": 0.5, "high": 2.0, "step": 0.25}}}}


def _cfg(base: dict, **search) -> dict:
    return {**base, "search": {**base["search"], **search}}


def _trials(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "search.parquet")


# ----------------------------------------------------------------------------- config
@pytest.mark.parametrize("change, message", [
    ({"space": {"thresh": {"low": 0.5, "high": 2.0}}},
     "search config: [base] admission: {threshold} is not a knob of [search.space]"),
    ({"space": {"threshold": {"low": 0.5, "high": 2.0}, "restrt_s": [0, 30]}},
     "search config: [search.space] restrt_s: unknown knob: not a run option and not used as {restrt_s}"),
    ({"space": {"threshold": {"low": 2.0, "high": 0.5}}},
     "search config: [search.space] threshold: low (2.0) must be below high (0.5)"),
    ({"space": {"threshold": {"low": 0.0, "high": 2.0, "log": True}}},
     "search config: [search.space] threshold.log: a log range needs low > 0, got 0.0"),
    ({"space": {"threshold": {"low": 0.5, "high": 2.0, "step": 0.4}}},
     "search config: [search.space] threshold.step: high - low (1.5) is not a multiple of the step 0.4"),
    ({"space": {"threshold": {"low": 0.5, "hi": 2.0}}},
     "search config: [search.space] threshold.hi: unknown key; a range has: low, high, log, step, type"),
    ({"space": {"threshold": [1.0, 1.5], "restart_s": {"low": -5, "high": 10}}},
     "search config: [search.space] restart_s: expected zero or a positive number, got -5.0 (with threshold = 1.0, "
     "restart_s = -5.0)"),
    ({"space": {"threshold": [1.0, 1.5], "placement": {"low": 0, "high": 1}}},
     "search config: [search.space] placement: placement is not a number: give a list of choices"),
    ({"space": {"threshold": [1.0, 1.5], "placement": ["first-fit", "consolidatd"]}},
     "search config: [search.space] placement: unknown placement 'consolidatd' (did you mean 'consolidated'?)"),
    ({"space": {"threshold": [1.0, 1.5], "load": [4, 8]}},
     "search config: [search.space] load: also set in [base]"),
    ({"objective": "avg_jct"}, "search config: [search] objective: unknown figure 'avg_jct'; one of: avg_jct_s"),
    ({"sampler": "grid"}, "search config: [search] sampler: unknown sampler 'grid'; choose one of: random, tpe"),
    ({"trials": 0}, "search config: [search] trials: expected a positive integer, got 0"),
])
def test_bad_search_configs_name_the_key(change, message):
    with pytest.raises(ConfigError) as e:
        load_search_config(_cfg(ADMISSION, **change))
    assert str(e.value).startswith(message), str(e.value)


def test_bad_config_shapes():
    with pytest.raises(ConfigError, match=r"^search config: grid: unknown top-level key \(a search has no grid"):
        load_search_config({**ADMISSION, "grid": {"policy": ["las"]}})
    with pytest.raises(ConfigError, match=r"^search config: search: missing"):
        load_search_config({"base": ADMISSION["base"]})
    # a bad [base] value is worded as the sweep's checks word it, with the knob values tried
    bad = {**ADMISSION, "base": {**ADMISSION["base"], "cluster": "32y4"}}
    with pytest.raises(ConfigError, match=r"^search config: \[base\] cluster: .*\(with threshold = 0.5\)$"):
        load_search_config(bad)


def test_knob_kinds_follow_the_run_spec():
    cfg = load_search_config({"base": {"workload": "blox", "load": 8},
                              "search": {"objective": "jain_index", "space": {
                                  "restart_s": {"low": 0, "high": 60}, "num_jobs": {"low": 100, "high": 300},
                                  "placement": ["first-fit", "consolidated"]}}})
    kinds = {k.name: k.kind for k in cfg.knobs}
    assert kinds == {"restart_s": "float", "num_jobs": "int", "placement": "choice"}
    assert cfg.direction == "max"  # jain_index: higher is fairer
    assert load_search_config(_cfg(FIFO_RESTART, objective="utilisation")).direction == "max"
    assert load_search_config(_cfg(FIFO_RESTART, direction="max")).direction == "max"


def test_objectives_are_summary_figures():
    import fastblox

    res = fastblox.simulate(fastblox.blox_paper_workload(load=8, num_jobs=50), policy="las")
    assert set(OBJECTIVES) <= set(res.summary), set(OBJECTIVES) - set(res.summary)


def test_template_values_reach_the_runs():
    cfg = load_search_config(ADMISSION)
    pts = cfg.points_for({"threshold": 1.25})
    assert [p.params["admission"] for p in pts] == ["load:1.25", "load:1.25"]
    assert [p.params["seed"] for p in pts] == [1, 2]
    # a string that is exactly "{name}" takes the value itself (a number here)
    cfg = load_search_config({"base": {"workload": "blox", "num_jobs": 100, "policy": "tiresias",
                                       "policy_opts": {"promote": "{p}"}},
                              "search": {"objective": "avg_jct_s", "space": {"p": {"low": 0.5, "high": 4.0}}}})
    assert cfg.points_for({"p": 2.0})[0].params["policy_opts"] == "promote=2.0"


def test_the_docs_configs_are_valid_and_the_example_is_the_shipped_file():
    import re
    import tomllib

    text = (ROOT / "docs" / "search.md").read_text()
    blocks = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", text, re.S)]
    assert len(blocks) == 2
    for b in blocks:
        load_search_config(b, base_dir=ROOT)
    shipped = tomllib.loads((ROOT / "datasets" / "sweeps" / "search_admission.toml").read_text())
    shipped.pop("name")
    assert blocks[0] == shipped
    fixed = tomllib.loads((ROOT / "datasets" / "sweeps" / "search_admission_fixed.toml").read_text())
    # the twin differs in the arrival stream only
    assert {k: v for k, v in fixed["base"].items() if k != "num_jobs"} == {
        k: v for k, v in shipped["base"].items() if k != "track"}
    assert fixed["search"] == shipped["search"] and fixed["seeds"] == shipped["seeds"]


# ----------------------------------------------------------------------------- random search
def test_random_search_is_deterministic_and_executor_independent(tmp_path):
    a = run_search(ADMISSION, tmp_path / "a", executor="serial", progress=False)
    run_search(ADMISSION, tmp_path / "b", executor="threads", workers=2, progress=False)
    assert (tmp_path / "a" / "search.parquet").read_bytes() == (tmp_path / "b" / "search.parquet").read_bytes()
    assert (tmp_path / "a" / "best.json").read_text() == (tmp_path / "b" / "best.json").read_text()
    t = a.trials
    assert t.height == 8 and t["trial"].to_list() == list(range(8)) and t["round"].to_list() == [0, 0, 0, 1, 1, 1, 2, 2]
    assert set(t["threshold"].to_list()) <= {0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0}  # the step's grid
    assert (t["num_seeds"] == 2).all() and (t["seeds"] == "1,2").all() and (t["status"] == "ok").all()
    # the same value drawn twice is one run per seed, run once
    assert len(a.ran) == 2 * t["threshold"].n_unique()
    # another seed draws other trials
    c = run_search(_cfg(ADMISSION, seed=1), tmp_path / "c", executor="serial", progress=False)
    assert c.trials["threshold"].to_list() != t["threshold"].to_list()


def test_objective_is_the_mean_over_seeds_and_best_matches_a_sweep(tmp_path):
    res = run_search(ADMISSION, tmp_path / "s", executor="serial", progress=False)
    values = sorted(set(res.trials["threshold"].to_list()))
    sweep = run_sweep({"seeds": [1, 2], "base": {k: v for k, v in ADMISSION["base"].items() if k != "admission"},
                       "grid": {"admission": [f"load:{v}" for v in values]}}, tmp_path / "g",
                      executor="serial", progress=False)
    by = sweep.summary.group_by("admission").agg(pl.col("avg_jct_s").mean().alias("m"), pl.col("avg_jct_s").std().alias("sd"))
    grid = {float(a.removeprefix("load:")): (m, sd) for a, m, sd in by.iter_rows()}
    for th, obj, sd in res.trials.select("threshold", "objective", "objective_std").iter_rows():
        assert obj == pytest.approx(grid[th][0], rel=1e-12) and sd == pytest.approx(grid[th][1], rel=1e-9)
    best_th = min(grid, key=lambda v: (grid[v][0], res.trials["threshold"].to_list().index(v)))
    assert res.best["params"] == {"threshold": best_th}
    assert res.best["value"] == pytest.approx(grid[best_th][0], rel=1e-12)
    # best_so_far: the running minimum
    objs = res.trials["objective"].to_list()
    assert res.trials["best_so_far"].to_list() == [min(objs[:i + 1]) for i in range(len(objs))]
    doc = json.loads((tmp_path / "s" / "best.json").read_text())
    assert doc["params"] == res.best["params"] and doc["seeds"] == [1, 2] and len(doc["point_ids"]) == 2


@pytest.mark.parametrize("direction", ["min", "max"])
def test_a_monotone_knob_gives_its_end(tmp_path, direction):
    res = run_search(_cfg(FIFO_RESTART, direction=direction), tmp_path, executor="serial", progress=False)
    t = res.trials.sort("restart_s")
    assert t["objective"].to_list() == sorted(t["objective"].to_list())  # avg JCT grows with the restart cost
    drawn = t["restart_s"].to_list()
    assert res.best["params"]["restart_s"] == (min(drawn) if direction == "min" else max(drawn))


# ----------------------------------------------------------------------------- resume
def _interrupt_after(monkeypatch, runs: int):
    """Make the executor run only the first ``runs`` runs of the search, then Ctrl-C."""
    real = search_mod._Executor.run
    left = [runs]

    def run(self, todo, prog):
        if len(todo) > left[0]:
            real(self, todo[:left[0]], prog)
            raise KeyboardInterrupt
        left[0] -= len(todo)
        return real(self, todo, prog)

    monkeypatch.setattr(search_mod._Executor, "run", run)


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_interrupted_search_resumes_to_the_same_bytes(tmp_path, monkeypatch, sampler):
    if sampler == "tpe":
        pytest.importorskip("optuna")
    cfg = _cfg(ADMISSION, sampler=sampler, space={"threshold": {"low": 0.5, "high": 2.0}})
    full = run_search(cfg, tmp_path / "full", executor="serial", progress=False)
    with monkeypatch.context() as m:
        _interrupt_after(m, 9)  # 4 trials and a half: the third round stops after one of its runs
        with pytest.raises(SearchInterrupted) as e:
            run_search(cfg, tmp_path / "cut", executor="serial", progress=False)
    part = e.value.result
    assert part.num_done == 3 and "3 of 8 trials done" in str(e.value) and "run the same command again" in str(e.value)
    assert _trials(tmp_path / "cut").height == 3
    res = run_search(cfg, tmp_path / "cut", executor="serial", progress=False)
    assert res.reused == 9 and len(res.ran) == len(full.ran) - 9
    assert (tmp_path / "cut" / "search.parquet").read_bytes() == (tmp_path / "full" / "search.parquet").read_bytes()
    assert (tmp_path / "cut" / "best.json").read_text() == (tmp_path / "full" / "best.json").read_text()
    # a rerun of a finished search runs nothing; more trials extend it (the first ones unchanged)
    again = run_search(cfg, tmp_path / "cut", executor="serial", progress=False)
    assert again.ran == [] and again.trials.equals(full.trials)
    more = run_search(cfg, tmp_path / "cut", executor="serial", progress=False, trials=10)
    assert more.trials.height == 10 and more.trials.head(8).drop("best_so_far").equals(full.trials.drop("best_so_far"))
    assert len(more.ran) <= 4


def test_another_search_in_the_folder_is_refused(tmp_path):
    run_search(FIFO_RESTART, tmp_path, executor="serial", progress=False)
    with pytest.raises(ConfigError, match=r"holds another search \(its seed, space differ from this config's\)"):
        run_search(_cfg(FIFO_RESTART, seed=4, space={"restart_s": {"low": 0, "high": 60}}), tmp_path,
                   executor="serial", progress=False)
    assert _trials(tmp_path).height == 6  # untouched


def test_failed_runs_fail_their_trial_only(tmp_path, capsys):
    cfg = tmp_path / "f.toml"  # gavel-like jobs ask for up to 8 GPUs: 1x4 cannot run them
    cfg.write_text('[base]\nworkload = "gavel"\nnum_jobs = 100\n[search]\nobjective = "avg_jct_s"\ntrials = 6\n'
                   'batch = 3\n[search.space]\ncluster = ["8x4", "1x4"]\n')
    assert main(["search", str(cfg), "--out", str(tmp_path / "o"), "--executor", "serial"]) == 1
    t = _trials(tmp_path / "o")
    bad = t.filter(pl.col("cluster") == "1x4")
    assert bad.height > 0 and (bad["status"] == "failed").all() and bad["objective"].is_nan().all()
    assert bad["error"].str.contains("WorkloadError|GPUs").all(), bad["error"].to_list()
    assert (t.filter(pl.col("cluster") == "8x4")["status"] == "ok").all()
    errors = json.loads((tmp_path / "o" / "errors.json").read_text())
    assert [e["params"]["cluster"] for e in errors.values()] == ["1x4"]
    best = json.loads((tmp_path / "o" / "best.json").read_text())
    assert best["params"] == {"cluster": "8x4"} and best["num_ok"] == t.height - bad.height
    assert "best avg_jct_s (min)" in capsys.readouterr().out


def test_point_timeout_fails_the_trials_it_stops(tmp_path):
    res = run_search(_cfg(FIFO_RESTART, trials=2, batch=2), tmp_path, executor="serial", point_timeout=0.001,
                     progress=False)
    assert res.best is None and (res.trials["status"] == "failed").all()
    assert res.trials["error"].str.contains("timed out").all() and len(res.errors) == 2
    assert json.loads((tmp_path / "best.json").read_text()) is None


# ----------------------------------------------------------------------------- TPE
def test_tpe_is_deterministic_and_learns_the_feasible_region(tmp_path):
    pytest.importorskip("optuna")
    cfg = _cfg(FIFO_RESTART, sampler="tpe", trials=14, batch=2)
    a = run_search(cfg, tmp_path / "a", executor="serial", progress=False)
    run_search(cfg, tmp_path / "b", executor="threads", workers=2, progress=False)
    assert (tmp_path / "a" / "search.parquet").read_bytes() == (tmp_path / "b" / "search.parquet").read_bytes()
    t = a.trials
    assert (t["status"] == "ok").all() and t.height == 14
    # after its 10 random start-up trials, TPE proposes restart costs below the median of those
    start = t.head(10)["restart_s"].median()
    assert t.tail(4)["restart_s"].median() < start
    assert a.best["params"]["restart_s"] == t["restart_s"].min()


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_every_kind_of_knob_stays_in_its_range(tmp_path, sampler):
    if sampler == "tpe":
        pytest.importorskip("optuna")
    cfg = {"base": {"workload": "blox", "load": 8, "policy": "tiresias", "policy_opts": {"promote": "{promote}"}},
           "search": {"objective": "rho_p95", "sampler": sampler, "trials": 12, "batch": 4, "seed": 5, "space": {
               "restart_s": {"low": 0, "high": 90, "step": 30},           # float on a grid
               "num_jobs": {"low": 50, "high": 400, "log": True},         # an int option, log-uniform
               "promote": {"low": 0.5, "high": 8.0, "log": True},         # a float template variable
               "placement": ["first-fit", "consolidated"]}}}               # choices
    t = run_search(cfg, tmp_path, executor="threads", workers=2, progress=False).trials
    assert t.schema["num_jobs"] == pl.Int64 and t.schema["restart_s"] == pl.Float64 and t.schema["placement"] == pl.Utf8
    assert set(t["restart_s"]) <= {0.0, 30.0, 60.0, 90.0}
    assert t["num_jobs"].is_between(50, 400).all() and t["promote"].is_between(0.5, 8.0).all()
    assert set(t["placement"]) <= {"first-fit", "consolidated"} and (t["status"] == "ok").all()
    # what each trial ran is what the table says
    for row in t.iter_rows(named=True):
        doc = json.loads((tmp_path / "points" / f"{row['point_ids']}.json").read_text())["params"]
        assert (doc["restart_s"], doc["num_jobs"], doc["placement"]) == (row["restart_s"], row["num_jobs"], row["placement"])
        assert doc["policy_opts"] == f"promote={row['promote']!r}"


def test_tpe_without_optuna_is_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna -> ImportError
    cfg = tmp_path / "s.toml"
    cfg.write_text('[base]\nworkload = "blox"\nnum_jobs = 100\n[search]\nobjective = "avg_jct_s"\nsampler = "tpe"\n'
                   '[search.space]\nrestart_s = {low = 0, high = 60}\n')
    assert main(["search", str(cfg), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == "fastblox: error: the TPE sampler needs Optuna: pip install 'fastblox[search]'\n"
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- CLI
def _toml(tmp_path, trials=4) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(f"""seeds = [1, 2]
[base]
workload = "blox"
load = 8
num_jobs = 400
policy = "las"
admission = "load:{{threshold}}"
[search]
objective = "avg_jct_s"
trials = {trials}
batch = 2
[search.space]
threshold = {{low = 0.5, high = 2.0}}
""")
    return p


def test_cli_search_prints_the_best_and_draws_the_plot(tmp_path, capsys):
    assert main(["search", str(_toml(tmp_path)), "--out", str(tmp_path / "o"), "--executor", "local",
                 "--workers", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    best = json.loads((tmp_path / "o" / "best.json").read_text())
    assert "fastblox search: 4 trials (4 ok): 8 runs, 0 reused" in out
    assert f"best avg_jct_s (min): {best['value']:,.6g} ± " in out and f"threshold = {best['params']['threshold']!r}" in out
    png = (tmp_path / "o" / "search.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert (tmp_path / "o" / "search.toml").read_text() == (tmp_path / "s.toml").read_text()
    # --trials extends the search; the local pool's runs are the serial executor's
    assert main(["search", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--trials", "6", "--quiet"]) == 0
    assert "6 trials (6 ok): 4 runs, 8 reused" in capsys.readouterr().out
    ser = run_search(_toml(tmp_path, trials=6), tmp_path / "ser", executor="serial", progress=False)
    assert (tmp_path / "o" / "search.parquet").read_bytes() == (tmp_path / "ser" / "search.parquet").read_bytes()
    assert ser.trials.height == 6


def test_ctrl_c_stops_at_once_with_130_and_resumes(tmp_path):
    cfg = tmp_path / "s.toml"
    cfg.write_text('[base]\nworkload = "blox"\nload = 8\ntrack = "3000:4000"\npolicy = "las"\n'
                   'admission = "load:{threshold}"\n[search]\nobjective = "avg_jct_s"\ntrials = 40\nbatch = 2\n'
                   '[search.space]\nthreshold = {low = 0.5, high = 2.5}\n')
    out = tmp_path / "o"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "fastblox.cli", "search", str(cfg), "--out", str(out),
                             "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 240
    while not (out / "search.parquet").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    stopped = time.monotonic() - t0
    assert proc.returncode == 130, err
    assert stopped < 3.0, stopped  # within a second on an idle machine
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("fastblox: interrupted: ") and "trials done (written to" in line
    done = _trials(out).height
    assert 0 < done < 40
    res = run_search(cfg, out, executor="serial", progress=False, trials=done + 2)
    assert res.reused >= done and res.trials.height == done + 2
