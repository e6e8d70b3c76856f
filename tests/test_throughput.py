"""Throughput model: the built-in Gavel table (values, units, the neutral trace's durations), CSV and
Gavel-JSON round trips, malformed files, and the invariants of rates / multi_node_rates / type_speed."""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastblox.cluster import Cluster
from fastblox.errors import ConfigError
from fastblox.throughput import BUILTIN_FILE, GAVEL_COMMIT, ThroughputTable

REPO = Path(__file__).resolve().parents[1]
GAVEL_MIRROR = Path("/work/.mirror/stanford-futuredata+gavel/repo")
HEADER = "model,gpu_type,num_gpus,iters_per_s\n"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


# ============================================================================ the built-in table
def test_builtin_loads_with_gavel_shape_and_citation():
    tab = ThroughputTable.builtin()
    assert ThroughputTable.builtin() is tab  # cached
    assert tab.gpu_types == ("v100", "p100", "k80")
    assert tab.sizes == (1, 2, 4, 8)
    assert len(tab.models) == 26 and tab.iters_per_s.shape == (26, 3, 4)
    assert tab.multi_node_iters_per_s.shape == (26, 3, 4) and tab.multi_node_factor.shape == (26,)
    assert tab.iters_per_s.dtype == np.float64
    assert "stanford-futuredata/gavel" in tab.source and GAVEL_COMMIT in tab.source and "MIT" in tab.source
    assert tab.name == "gavel"
    # 26 job types x 3 GPU types measured on 1 GPU; 19 distributed ones on 2, 4, 8; Gavel's three 0.0
    # entries (ResNet-50 bs 128 on 2/4/8 K80s) are "not measured"
    assert np.isfinite(tab.iters_per_s).sum() == 26 * 3 + 19 * 3 * 3 - 3
    assert np.isfinite(tab.iters_per_s[:, :, 0]).all()
    assert np.isnan(tab.multi_node_factor).all()  # no per-model factor is published (docs/throughput.md)
    with pytest.raises(ValueError):
        tab.iters_per_s[0, 0, 0] = 1.0  # the cached table cannot be changed by a caller


# values read from scheduler/simulation_throughputs.json at GAVEL_COMMIT ("null" = isolated)
SPOT = [
    ("ResNet-18 (batch size 32)", "v100", 1, 29.947157347732464),
    ("ResNet-18 (batch size 16)", "k80", 1, 4.795294551566172),
    ("ResNet-18 (batch size 16)", "p100", 1, 35.869203207990005),
    ("LM (batch size 10)", "v100", 8, 615.0934647748222),
    ("Transformer (batch size 64)", "p100", 4, 13.313004543426457),
    ("CycleGAN", "k80", 1, 0.5047705689725351),
    ("A3C", "v100", 1, 7.175767179667988),
    ("ResNet-50 (batch size 128)", "k80", 1, 0.3472236920519382),
]


@pytest.mark.parametrize("model,gtype,n,value", SPOT)
def test_builtin_values_match_gavel(model, gtype, n, value):
    tab = ThroughputTable.builtin()
    m = tab.model_codes([model])[0]
    assert tab.iters_per_s[m, tab.gpu_types.index(gtype), tab.sizes.index(n)] == value
    assert tab.rates([gtype], 8)[m, 0, n] == value


def test_builtin_not_measured_and_multi_node_values():
    tab = ThroughputTable.builtin()
    m = tab.model_codes(["ResNet-50 (batch size 128)"])[0]
    assert np.isnan(tab.iters_per_s[m, 2, 1:]).all()  # Gavel: 0.0 on 2/4/8 K80s
    r16 = tab.model_codes(["ResNet-18 (batch size 16)"])[0]
    assert tab.multi_node_iters_per_s[r16, 0, 3] == 64.40995361172301  # v100_unconsolidated, 8 GPUs
    a3c = tab.model_codes(["A3C"])[0]
    assert np.isnan(tab.iters_per_s[a3c, :, 1:]).all()  # not distributed in Gavel: 1 GPU only


def test_builtin_file_is_reproducible_from_gavel(tmp_path):
    """The shipped file is exactly what the recipe in datasets/README.md writes (needs Gavel's repo)."""
    env = os.environ.get("GAVEL_THROUGHPUTS_JSON")
    if env:
        src = Path(env)
    elif GAVEL_MIRROR.exists():
        src = tmp_path / "simulation_throughputs.json"
        src.write_bytes(subprocess.run(
            ["git", f"--git-dir={GAVEL_MIRROR}", "show", f"{GAVEL_COMMIT}:scheduler/simulation_throughputs.json"],
            check=True, capture_output=True).stdout)
    else:
        pytest.skip("Gavel's simulation_throughputs.json is not available (set GAVEL_THROUGHPUTS_JSON)")
    tab = ThroughputTable.read(src).subset(gpu_types=("v100", "p100", "k80"))
    assert tab.equals(ThroughputTable.builtin())
    out = tab.write_csv(tmp_path / "gavel.csv.gz")
    assert out.read_bytes() == (REPO / "datasets" / BUILTIN_FILE).read_bytes()
    raw = json.loads(src.read_text())  # every isolated figure, exactly
    for wtype in ("v100", "p100", "k80"):
        for key, val in raw[wtype].items():
            model, n = eval(key)  # noqa: S307  (Gavel's own key format, a test fixture)
            got = tab.iters_per_s[tab.model_codes([model])[0], tab.gpu_types.index(wtype), tab.sizes.index(n)]
            assert got == val["null"] or (val["null"] == 0.0 and np.isnan(got))


def test_neutral_durations_reproduced_exactly(shared):
    """Units: Gavel's throughputs are steps/s of the whole job on scale_factor GPUs. The peer trace's
    durations are total_steps / V100 throughput for (job_type, num_gpu), with no factor for the GPUs."""
    from fastblox.traces import read_trace

    peer = shared / "peer-traces"
    ref = read_trace(peer / "gavel_n2000_lam400_s0.neutral.csv")
    tab = ThroughputTable.builtin()
    codes = tab.model_codes(ref.extra["model"])
    assert (codes >= 0).all()
    assert set(ref.num_gpus.tolist()) == {1, 2, 4}
    dur = ref.iterations / tab.rates_at(codes, ref.num_gpus, "v100")
    np.testing.assert_array_equal(dur, ref.duration_s)
    dense = tab.rates(["v100"], 4)[codes, 0, ref.num_gpus]
    np.testing.assert_array_equal(ref.iterations / dense, ref.duration_s)
    # and through the Gavel reader (no neutral file needed)
    w = read_trace(peer / "gavel_n2000_lam400_s0.trace", steps_per_s="builtin")
    np.testing.assert_array_equal(w.duration_s, ref.duration_s)
    # Gavel never measured ResNet-50 (batch size 128) on 2 or 4 K80s (0.0 in its file): no run time is made up
    rn50 = r"\('ResNet-50 \(batch size 128\)', "
    with pytest.raises(ConfigError, match=rf"no k80 throughput for 2 .*: {rn50}2\), {rn50}4\)$"):
        read_trace(peer / "gavel_n2000_lam400_s0.trace", steps_per_s="builtin", worker_type="K80")
    v100 = read_trace(peer / "gavel_n2000_lam400_s0_1gpu.trace", steps_per_s="builtin")
    k80 = read_trace(peer / "gavel_n2000_lam400_s0_1gpu.trace", steps_per_s="builtin", worker_type="K80")
    rec = np.char.startswith(k80.extra["model"].astype(str), "Recommendation")
    assert rec.any() and (k80.duration_s[~rec] > v100.duration_s[~rec]).all()
    assert (k80.duration_s[rec] < v100.duration_s[rec]).any()  # in Gavel's simulation table K80 wins some


def test_gavel_reader_with_a_table_or_a_csv(shared, tmp_path):
    from fastblox.traces import read_trace

    peer = shared / "peer-traces"
    trace = peer / "gavel_n100_lam400_s0_1gpu.trace"
    tab = ThroughputTable.builtin()
    np.testing.assert_array_equal(read_trace(trace).duration_s, read_trace(trace, steps_per_s=tab).duration_s)
    a = read_trace(trace, steps_per_s=tab, worker_type="p100")
    b = read_trace(trace, steps_per_s=str(tab.write_csv(tmp_path / "t.csv")), worker_type="p100")
    np.testing.assert_array_equal(a.duration_s, b.duration_s)
    with pytest.raises(ConfigError, match="worker_type='a100'.*v100, p100, k80"):
        read_trace(trace, steps_per_s="builtin", worker_type="a100")
    small = tab.subset(models=["A3C"])
    with pytest.raises(ConfigError, match="no v100 throughput for .* pair"):
        read_trace(trace, steps_per_s=small)


# ============================================================================ round trips
def test_csv_round_trip(tmp_path):
    tab = ThroughputTable.builtin()
    for name in ("t.csv", "t.csv.gz"):
        back = ThroughputTable.read(tab.write_csv(tmp_path / name))
        assert back.equals(tab)
        assert back.source.startswith("file ")
    assert (tmp_path / "t.csv.gz").read_bytes()[:2] == b"\x1f\x8b"
    assert ThroughputTable.read(tmp_path / "t.csv").to_csv_text() == tab.to_csv_text()  # deterministic


def test_csv_round_trip_with_factor_and_quoted_names(tmp_path):
    tab = ThroughputTable(
        models=("net, large", 'say "hi"'), gpu_types=("a100", "t4"), sizes=(1, 3),
        iters_per_s=np.array([[[10.0, 25.0], [2.0, np.nan]], [[0.1, np.nan], [np.nan, 0.7]]]),
        multi_node_factor=np.array([0.8, np.nan]), source="test",
        multi_node_iters_per_s=np.array([[[np.nan, 20.0], [np.nan, np.nan]], [[np.nan] * 2, [np.nan] * 2]]),
    )
    back = ThroughputTable.read(tab.write_csv(tmp_path / "q.csv"))
    assert back.equals(tab)


def test_gavel_json_round_trip(tmp_path):
    tab = ThroughputTable.builtin()
    f = write(tmp_path, "thr.json", json.dumps(tab.to_gavel_dict()))
    assert ThroughputTable.read(f).equals(tab)
    # Gavel's 0.0 = cannot run: read as not measured
    doc = {"v100": {"('A', 1)": {"null": 3.0}, "('A', 2)": {"null": 0.0, "('A', 2)": [1.0, 1.0]}}}
    t = ThroughputTable.read(write(tmp_path, "z.json", json.dumps(doc)))
    assert t.sizes == (1,) and t.iters_per_s.tolist() == [[[3.0]]]


def test_user_csv_layout_blank_lines_spaces_and_case(tmp_path):
    f = write(tmp_path, "u.csv", "model,gpu_type,num_gpus,iters_per_s\n  My Net ,V100,2,4.5\n\nmy  net,v100,1,3\n"
                                 "My Net,T4,1,1.0\n")
    t = ThroughputTable.read(f)
    assert t.models == ("My Net",) and t.gpu_types == ("v100", "t4") and t.sizes == (1, 2)
    assert t.iters_per_s[0, 0].tolist() == [3.0, 4.5]
    assert np.isnan(t.multi_node_factor).all() and np.isnan(t.multi_node_iters_per_s).all()


# ============================================================================ malformed files
BAD_CSV = [
    ("", "is empty"),
    ("   \n\n", "is empty"),
    (HEADER, "has a header but no rows"),
    ("model,gpu_type,num_gpus,iters\nA,v100,1,2\n",
     r"line 1: unknown column\(s\) 'iters' \(did you mean 'iters_per_s'\?\)"),
    ("model,gpu_type,num_gpus,iters_per_s,speed\nA,v100,1,2,3\n", r"unknown column\(s\) 'speed'"),
    ("model,gpu_type,iters_per_s\nA,v100,2\n", r"line 1: missing column\(s\) 'num_gpus'"),
    ("model,gpu_type,num_gpus,iters_per_s,model\nA,v100,1,2,A\n", "line 1, column 'model': appears twice"),
    (HEADER + "A,v100,1,2\nA,v100,2,-1\n", r"line 3, column 'iters_per_s': must be > 0 .*\('-1'\)"),
    (HEADER + "A,v100,1,0\n", r"line 2, column 'iters_per_s': must be > 0 .*\('0'\)"),
    (HEADER + "A,v100,1,2\nA,p100,1,nan\n", r"line 3, column 'iters_per_s': must be a number .*\('nan'\)"),
    (HEADER + "A,v100,1,\n", r"line 2, column 'iters_per_s': must be a number .*\(empty\)"),
    (HEADER + "A,v100,1,fast\nB,v100,1,x\n", r"line 2, column 'iters_per_s': .*\('fast'\); 1 more row"),
    (HEADER + "A,v100,1,inf\n", r"line 2, column 'iters_per_s': must be a number"),
    (HEADER + "A,v100,1.5,2\n", r"line 2, column 'num_gpus': must be a whole number of GPUs >= 1 \('1.5'\)"),
    (HEADER + "A,v100,0,2\n", r"line 2, column 'num_gpus': must be a whole number"),
    (HEADER + ",v100,1,2\n", r"line 2, column 'model': empty model name"),
    (HEADER + "A,,1,2\n", r"line 2, column 'gpu_type': empty GPU type"),
    (HEADER + "A,v100,1,2\nB,v100,1,3\n a ,V100,1,4\n",
     r"line 4, column 'num_gpus': duplicate row: \('a', 'V100', 1 GPUs\) is already on line 2"),
    (HEADER + "A,v100,1,2,9\n", r"line 2: has 5 field\(s\); the header has 4"),
    ("model,gpu_type,num_gpus,iters_per_s,multi_node_factor\nA,v100,1,2,1.5\n",
     r"line 2, column 'multi_node_factor': must be a number in \(0, 1\] .*\('1.5'\)"),
    ("model,gpu_type,num_gpus,iters_per_s,multi_node_factor\nA,v100,1,2,0\n",
     r"line 2, column 'multi_node_factor': must be a number in \(0, 1\]"),
    ("model,gpu_type,num_gpus,iters_per_s,multi_node_factor\nA,v100,1,2,0.5\nA,v100,2,3,\nA,p100,1,1,0.7\n",
     r"line 4, column 'multi_node_factor': 0.7 for 'A', which has 0.5 on line 2"),
    ("model,gpu_type,num_gpus,iters_per_s,multi_node_iters_per_s\nA,v100,2,2,-3\n",
     r"line 2, column 'multi_node_iters_per_s': must be > 0 or empty"),
    ('model,gpu_type,num_gpus,iters_per_s\n"A,v100,1,2\n', r"line \d+"),
]


@pytest.mark.parametrize("text,message", BAD_CSV)
def test_malformed_csv_names_file_line_and_column(tmp_path, text, message):
    f = write(tmp_path, "bad.csv", text)
    with pytest.raises(ConfigError, match=message) as e:
        ThroughputTable.read(f)
    assert str(f) in str(e.value)


BAD_JSON = [
    ("{", "cannot read as JSON"),
    ("{}", "empty"),
    ('{"v100": [1, 2]}', "worker type 'v100': expected"),
    ('{"v100": {"A": {"null": 1}}}', "worker type 'v100', entry 'A': the key is not"),
    ('{"v100": {"(\'A\', 0)": {"null": 1}}}', "whole scale_factor >= 1"),
    ('{"v100": {"(\'A\', 1)": {"null": -2}}}', "entry \"\\('A', 1\\)\", field 'null': throughput -2.0 must be >= 0"),
    ('{"v100": {"(\'A\', 1)": {"null": "fast"}}}', "field 'null': expected the isolated throughput"),
    ('{"v100": {"(\'A\', 1)": {"other": 1}}}', "field 'null': expected the isolated throughput"),
    ('{"v100": {"(\'A\', 1)": {"null": 1}, "(\'a\', 1)": {"null": 2}}}', "duplicate entry"),
    ('{"v100_unconsolidated": {"(\'A\', 1)": {"null": 1}}}', "has no consolidated worker type 'v100'"),
    ('{"v100": {"(\'A\', 1)": {"null": 0}}}', "has no non-zero throughput"),
]


@pytest.mark.parametrize("text,message", BAD_JSON)
def test_malformed_gavel_json(tmp_path, text, message):
    f = write(tmp_path, "bad.json", text)
    with pytest.raises(ConfigError, match=message) as e:
        ThroughputTable.read(f)
    assert str(f) in str(e.value)


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(ConfigError, match="no such throughput file"):
        ThroughputTable.read(tmp_path / "nope.csv")
    with pytest.raises(ConfigError, match="is a directory"):
        ThroughputTable.read(tmp_path)
    (tmp_path / "t.csv.gz").write_bytes(gzip.compress((HEADER + "A,v100,1,2\n").encode())[:20])
    with pytest.raises(ConfigError, match="gzip"):
        ThroughputTable.read(tmp_path / "t.csv.gz")


def test_constructor_checks():
    ok = dict(models=("A",), gpu_types=("v100",), sizes=(1,), iters_per_s=np.ones((1, 1, 1)),
              multi_node_factor=np.array([np.nan]), source="x")
    ThroughputTable(**ok)
    for change, msg in [
        (dict(gpu_types=("V100",)), "lower case"),
        (dict(sizes=(0,)), "sizes"),
        (dict(iters_per_s=np.zeros((1, 1, 1))), "must be > 0"),
        (dict(iters_per_s=np.ones((1, 1, 2))), "shape"),
        (dict(multi_node_factor=np.array([1.2])), r"in \(0, 1\]"),
        (dict(models=("A", " a"), iters_per_s=np.ones((2, 1, 1)), multi_node_factor=np.ones(2)), "same name"),
        (dict(iters_per_s=np.full((1, 1, 1), np.nan)), "no measurement"),
        (dict(multi_node_iters_per_s=np.ones((1, 1, 1)), iters_per_s=np.full((1, 1, 1), np.nan)), "no iters_per_s"),
    ]:
        with pytest.raises(ConfigError, match=msg):
            ThroughputTable(**{**ok, **change})


# ============================================================================ lookups
def test_model_codes_ignore_case_and_whitespace():
    tab = ThroughputTable.builtin()
    m = tab.models.index("LM (batch size 10)")
    codes = tab.model_codes(["lm (batch size 10)", "  LM  (BATCH size\t10) ", "LM (batch size 11)", None,
                             float("nan"), 3, ""])
    assert codes.dtype == np.int64
    assert codes.tolist() == [m, m, -1, -1, -1, -1, -1]
    assert tab.model_codes(np.array([["A3C", "x"]], dtype=object)).shape == (1, 2)
    assert tab.model_codes(list(tab.models)).tolist() == list(range(len(tab.models)))


def test_rates_unknown_type_and_bad_max_gpus():
    tab = ThroughputTable.builtin()
    with pytest.raises(ConfigError, match="GPU type 'a100' is not in the throughput table; it has v100, p100, k80"):
        tab.rates(["v100", "a100"], 4)
    with pytest.raises(ConfigError, match="untyped cluster"):
        tab.rates(Cluster.parse("4x4"), 4)
    with pytest.raises(ConfigError, match="max_gpus"):
        tab.rates(["v100"], -1)
    r = tab.rates(Cluster.parse("k80:2x4,V100:2x4"), 4)  # a Cluster, in the cluster's type order
    assert np.array_equal(r, tab.rates(["k80", "v100"], 4), equal_nan=True)
    assert np.array_equal(r[:, ::-1], tab.rates(["V100", " K80 "], 4), equal_nan=True)
    assert tab.rates(["v100"], 0).shape == (26, 1, 1) and (tab.rates(["v100"], 0) == 0).all()


def test_builtin_rates_rule_on_known_values():
    tab = ThroughputTable.builtin()
    m = tab.models.index("LM (batch size 10)")
    r = tab.rates(["v100"], 12)[m, 0]
    one, two, four, eight = tab.iters_per_s[m, 0]
    assert r[3] == pytest.approx(3 * (two / 2 + (four / 4 - two / 2) / 2))  # per-GPU halfway between 2 and 4
    assert r[12] == pytest.approx(12 * eight / 8)  # held beyond 8
    a3c = tab.models.index("A3C")
    assert tab.rates(["k80"], 4)[a3c, 0, 4] == pytest.approx(4 * tab.iters_per_s[a3c, 2, 0])  # 1-GPU-only models


def test_type_speed():
    tab = ThroughputTable.builtin()
    s = tab.type_speed(["v100", "p100", "k80"])
    assert s[0] == 1.0 and 0 < s[2] < s[1] < 1.5
    assert tab.type_speed(["k80"], reference="k80")[0] == 1.0
    assert tab.type_speed(["v100"], reference="K80")[0] == pytest.approx(1 / s[2])
    with pytest.raises(ConfigError, match="'h100'"):
        tab.type_speed(["v100"], reference="h100")
    t = ThroughputTable(("A", "B"), ("x", "y"), (1,), np.array([[[1.0], [np.nan]], [[np.nan], [2.0]]]),
                        np.full(2, np.nan), "t")
    assert np.isnan(t.type_speed(["y"], reference="x")[0])  # no model measured on both


def test_multi_node_rates_builtin():
    tab = ThroughputTable.builtin()
    mn = tab.multi_node_rates(["v100", "k80"], 16)
    r = tab.rates(["v100", "k80"], 16)
    assert (mn[:, :, 0] == 0).all()
    np.testing.assert_array_equal(mn[:, :, 1], r[:, :, 1])  # one GPU never spans nodes
    m = tab.models.index("ResNet-18 (batch size 16)")
    assert mn[m, 0, 8] == tab.multi_node_iters_per_s[m, 0, 3] and mn[m, 0, 8] < r[m, 0, 8]
    a3c = tab.models.index("A3C")
    assert np.isnan(mn[a3c, :, 2:]).all()  # no multi-node figure and no factor: unknown
    rn50 = tab.models.index("ResNet-50 (batch size 64)")
    assert np.isnan(mn[rn50, 1, 2:]).all()  # Gavel has no k80_unconsolidated entry for it
    # a factor fills in where no multi-node figure exists
    t = ThroughputTable(("A",), ("x",), (1, 2), np.array([[[1.0, 1.8]]]), np.array([0.5]), "t")
    np.testing.assert_allclose(t.multi_node_rates(["x"], 4)[0, 0], [0, 1.0, 0.9, 0.5 * 2.7, 0.5 * 3.6])


# ============================================================================ rates invariants (hypothesis)
@st.composite
def tables(draw):
    m_ = draw(st.integers(1, 3))
    t_ = draw(st.integers(1, 3))
    sizes = tuple(sorted(draw(st.sets(st.integers(1, 12), min_size=1, max_size=5))))
    s_ = len(sizes)
    vals = np.asarray(draw(st.lists(st.floats(0.01, 5000.0), min_size=m_ * t_ * s_, max_size=m_ * t_ * s_)))
    mask = np.asarray(draw(st.lists(st.booleans(), min_size=m_ * t_ * s_, max_size=m_ * t_ * s_))).reshape(m_, t_, s_)
    for i in range(max(m_, t_, s_)):  # every model, type and size measured at least once
        mask[i % m_, i % t_, i % s_] = True
    iters = np.where(mask, vals.reshape(m_, t_, s_), np.nan)
    mvals = np.asarray(draw(st.lists(st.floats(0.01, 5000.0), min_size=m_ * t_ * s_, max_size=m_ * t_ * s_)))
    mmask = mask & np.asarray(draw(st.lists(st.booleans(), min_size=m_ * t_ * s_, max_size=m_ * t_ * s_))).reshape(
        m_, t_, s_)
    factor = np.asarray(draw(st.lists(st.one_of(st.just(math.nan), st.floats(0.05, 1.0)), min_size=m_, max_size=m_)))
    return ThroughputTable(tuple(f"model {i}" for i in range(m_)), tuple(f"g{j}" for j in range(t_)), sizes, iters,
                           factor, "hypothesis", np.where(mmask, mvals.reshape(m_, t_, s_), np.nan))


def _close_le(a, b):
    return a <= b * (1 + 1e-12) + 1e-300


@given(tab=tables(), max_gpus=st.integers(0, 20), perm_seed=st.integers(0, 2**16))
def test_rates_invariants(tab, max_gpus, perm_seed):
    order = list(np.random.default_rng(perm_seed).permutation(len(tab.gpu_types)))
    types = [tab.gpu_types[j] for j in order]
    r = tab.rates(types, max_gpus)
    assert r.shape == (len(tab.models), len(types), max_gpus + 1) and r.dtype == np.float64
    assert (r[:, :, 0] == 0).all()
    sizes = np.asarray(tab.sizes)
    n = np.arange(max_gpus + 1)
    for m in range(len(tab.models)):
        for j, t in enumerate(order):
            meas = tab.iters_per_s[m, t]
            ok = np.isfinite(meas)
            if not ok.any():
                assert np.isnan(r[m, j, 1:]).all()
                continue
            row = r[m, j]
            assert np.isfinite(row).all() and (row[1:] > 0).all()
            xs, ys = sizes[ok], meas[ok]
            for x, y in zip(xs, ys):
                if x <= max_gpus:
                    assert row[x] == y  # measured sizes exact
            pg = row[1:] / n[1:]
            for i, k in enumerate(n[1:]):
                lo = np.searchsorted(xs, k, side="right") - 1  # last measured size <= k
                if lo < 0:
                    assert pg[i] == pytest.approx(ys[0] / xs[0], rel=1e-12)  # below the smallest: held
                elif lo == len(xs) - 1:
                    assert pg[i] == pytest.approx(ys[-1] / xs[-1], rel=1e-12)  # beyond the largest: held
                else:
                    a, b = ys[lo] / xs[lo], ys[lo + 1] / xs[lo + 1]
                    assert _close_le(min(a, b), pg[i]) and _close_le(pg[i], max(a, b))  # between neighbours
            # monotone per-GPU throughput between consecutive measured sizes
            for lo in range(len(xs) - 1):
                seg = [row[k] / k for k in range(xs[lo], min(xs[lo + 1], max_gpus) + 1)]
                d = np.diff(seg)
                up = ys[lo + 1] / xs[lo + 1] >= ys[lo] / xs[lo]
                tol = 1e-12 * max(abs(v) for v in seg) if seg else 0
                assert (d >= -tol).all() if up else (d <= tol).all()
        # per-job lookups agree with the dense table
        codes = np.repeat(np.arange(len(tab.models)), max_gpus + 1)
        ks = np.tile(n, len(tab.models))
        for j, t in enumerate(types):
            np.testing.assert_array_equal(tab.rates_at(codes, ks, t), r[codes, j, ks])


@given(tab=tables(), max_gpus=st.integers(0, 20))
def test_multi_node_rates_invariants(tab, max_gpus):
    mn = tab.multi_node_rates(tab.gpu_types, max_gpus)
    r = tab.rates(tab.gpu_types, max_gpus)
    assert mn.shape == r.shape
    assert (mn[:, :, 0] == 0).all()
    if max_gpus >= 1:
        np.testing.assert_array_equal(mn[:, :, 1], r[:, :, 1])
    for m in range(len(tab.models)):
        for t in range(len(tab.gpu_types)):
            meas = tab.multi_node_iters_per_s[m, t]
            multi = [(s, v) for s, v in zip(tab.sizes, meas) if s >= 2 and np.isfinite(v)]
            for s, v in multi:
                if s <= max_gpus:
                    assert mn[m, t, s] == v
            if not multi and max_gpus >= 2:
                expect = r[m, t, 2:] * tab.multi_node_factor[m]
                np.testing.assert_array_equal(mn[m, t, 2:], expect)


@given(tab=tables())
def test_type_speed_of_the_reference_is_one(tab):
    for ref in tab.gpu_types:
        s = tab.type_speed(tab.gpu_types, reference=ref)
        assert s[tab.gpu_types.index(ref)] == 1.0
        assert ((s > 0) | np.isnan(s)).all()


@given(tab=tables())
def test_csv_round_trip_random_tables(tab):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        # names come back in order of first appearance in the file: the same order unless a model
        # lacks one of the types, so align the order before comparing
        back = ThroughputTable.read(tab.write_csv(Path(d) / "t.csv"))
        assert back.models == tab.models and set(back.gpu_types) == set(tab.gpu_types)
        assert back.subset(gpu_types=tab.gpu_types).equals(tab)
        # Gavel's layout keeps no multi_node_factor; models come in order of first appearance in the file
        back = ThroughputTable.read(_json(tab, d)).subset(gpu_types=tab.gpu_types, models=tab.models)
        assert back.equals(ThroughputTable(tab.models, tab.gpu_types, tab.sizes, tab.iters_per_s,
                                           np.full(len(tab.models), np.nan), "x", tab.multi_node_iters_per_s))


def _json(tab, d):
    p = Path(d) / "t.json"
    p.write_text(json.dumps(tab.to_gavel_dict()))
    return p
