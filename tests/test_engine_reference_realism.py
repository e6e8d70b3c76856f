"""The native kernel against its plain-Python twin on the realism features: GPU types, racks, the
rate model, checkpoint loss, node fail/recover events, topology placement, user key functions
(full sort) and planners; plus the invariants of every run.

Runs go through ``fastblox.simulate`` with the drawn speed model patched in for the one built
from a throughput table (``fastblox.engine.build_speed_model``), so any positive throughput, a
zero ("cannot run there") and any node factor can be drawn.
"""

import io
import math
import struct
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import fastblox
from fastblox import engine as fengine
from fastblox import parts
from fastblox.cluster import Cluster
from fastblox.kernels import engine as kengine
from fastblox.kernels import enums
from fastblox.kernels.state import Rates
from fastblox.policies.tiresias import _prepare_gittins
from fastblox.reference.native import ANY_TYPE, NO_RUN, simulate_native_reference
from fastblox.speed import DEFAULT_SERIAL_FRACTION, SpeedModel, amdahl
from fastblox.throughput import ThroughputTable
from strategies import RealCase, node_events, per_item, real_case

# --------------------------------------------------------------------------- a test-only planner
_MASK = (1 << 64) - 1


def _mix(*xs) -> int:
    """splitmix64 folded over the arguments: a deterministic, well-spread hash."""
    h = 0x9E3779B97F4A7C15
    for x in xs:
        h = ((h ^ (int(x) & _MASK)) * 0xBF58476D1CE4E5B9) & _MASK
        h ^= h >> 31
        h = (h * 0x94D049BB133111EB) & _MASK
        h ^= h >> 29
    return h


def _tbits(t) -> int:
    return struct.unpack("<q", struct.pack("<d", float(t)))[0]


#: token -> what the planner of one example may choose from (options must be plain values)
PLAN_INFO: dict = {}


def hash_plan(idx, t, seed, volatility, info):
    """Keys (few distinct values: ties), GPU types and sizes from a hash of (seed, job); with
    ``volatility`` (percent) a job's plan is re-drawn from the time too. Mostly a (type, size)
    the job can run on, or "any type"; with volatility now and then "do not run" or an arbitrary
    (type, size)."""
    keys, types, sizes = [], [], []
    tb = _tbits(t)
    for i in idx:
        i = int(i)
        h = _mix(seed, i)
        if volatility and _mix(seed, i, tb, 1) % 100 < volatility:
            h = _mix(seed, i, tb, 2)
        keys.append(float(h % 5))
        choices = info["choices"][i]
        ty, sz = choices[(h >> 16) % len(choices)]
        r = (h >> 8) % 40
        if r < 8:
            ty = ANY_TYPE
        elif r < 10 and volatility:  # now and then (not for good): do not run, or a plan that may not fit
            h2 = _mix(seed, i, tb, 3)
            if h2 % 2:
                ty = NO_RUN
            else:
                ty, sz = (h2 >> 24) % info["n_types"], 1 + (h2 >> 32) % info["caps"][i]
        types.append(ty)
        sizes.append(sz)
    return keys, types, sizes


class HashPlanner:
    def __init__(self, state, opts):
        self.info = PLAN_INFO[opts["token"]]
        self.seed = opts["seed"]
        self.vol = opts["volatility"]

    def plan(self, idx, now):
        return hash_plan(idx, now, self.seed, self.vol, self.info)


PLANNER = "test-hash-planner"
parts.POLICIES.register(PLANNER, parts.Policy(
    PLANNER, enums.POL_PLAN, False, False, "test-only planner: plans from a hash of (seed, job, time)",
    kind=enums.KIND_PLAN, planner=HashPlanner,
    options=(parts.Option("seed", 0, int, "hash seed"), parts.Option("volatility", 0, int, "percent re-planned by time"),
             parts.Option("token", 0, int, "PLAN_INFO entry"), parts.Option("max_gpus_per_job", 0, int, "largest size"))),
    replace=True)


def plan_info(case: RealCase, max_gpus_per_job: int) -> dict:
    """Per job the (type, size) plans it can run on; sizes up to its slot count (as simulate
    sizes them: ``min(max(num_gpus, max_gpus_per_job), largest type)``)."""
    cap_t = case.type_capacity()
    caps = [min(max(int(g), max_gpus_per_job), max(cap_t)) for g in case.gpus]
    choices = []
    for j, cap in enumerate(caps):
        ok = [(t, k) for t in range(len(cap_t)) for k in range(1, cap + 1) if k <= cap_t[t] and case.base_rate(j, t, k) > 0]
        choices.append(ok or [(ANY_TYPE, int(case.gpus[j]))])
    return {"choices": choices, "caps": caps, "n_types": len(cap_t)}


# --------------------------------------------------------------------------- user key functions
def _ref_remaining(restart):
    def key(j, t):
        run = j.state == "running"
        el = t - j.cur.t if run else 0.0
        return (j.work_left - (max(0.0, el - restart) * j.cur.rate if run else 0.0)) / j.ref_rate
    return key


def _ref_attained_gpu(j, t):
    return j.attained_gpu + ((t - j.cur.t) * len(j.cur.gpus) if j.state == "running" else 0.0)


def _rowwise(name, fn):
    """A row-wise Python policy (``fastblox.policy(rowwise=True)``: the sorted-queue path)."""
    return fastblox.parts.Policy(name, enums.POL_CUSTOM, True, True, "", fn=fn, rowwise=True)


#: name -> (kernel policy fn(JobView, now), reference key factory(restart) -> key(job, t))
KEY_FNS = {
    "fn-biggest": (lambda jobs, now: -jobs.num_gpus * 1e7 + jobs.submit_s,
                   lambda restart: (lambda j, t: -j.gpus * 1e7 + j.submit)),
    "fn-remaining": (lambda jobs, now: jobs.remaining_s, _ref_remaining),
    "fn-attained-gpu": (lambda jobs, now: jobs.attained_gpu_s, lambda restart: _ref_attained_gpu),
    "row-biggest": (_rowwise("row-biggest", lambda jobs, now: -jobs.num_gpus * 1e7 + jobs.submit_s),
                    lambda restart: (lambda j, t: -j.gpus * 1e7 + j.submit)),
    "row-remaining": (_rowwise("row-remaining", lambda jobs, now: jobs.remaining_s), _ref_remaining),
}
BUILTIN = ["fifo", "las", "las-gpu", "srtf", "sjf"]
POLICIES = BUILTIN + list(KEY_FNS) + [PLANNER]
PLACEMENTS = ["first-fit", "consolidated", "blox", "topology", "yarn"]


# --------------------------------------------------------------------------- running both
def speed_model(case: RealCase, mnf: float) -> SpeedModel:
    nf = np.where(np.isnan(case.node_factor), mnf, case.node_factor)
    rates = Rates(np.ascontiguousarray(case.tab, dtype=np.float64), np.asarray(case.type_speed, dtype=np.float64),
                  amdahl(np.arange(case.g_max + 1), DEFAULT_SERIAL_FRACTION), np.append(nf, mnf).astype(np.float64),
                  np.ascontiguousarray(case.spread, dtype=np.float64))
    return SpeedModel(case.cls.copy(), case.work.copy(), case.ref_rate.copy(), rates, None, "hypothesis",
                      int((case.cls >= 0).sum()))


def cluster_of(case: RealCase) -> Cluster:
    return Cluster(np.asarray(case.node_gpus, dtype=np.int64), np.asarray(case.node_type, dtype=np.int64),
                   tuple(case.type_names), "hypothesis-cluster",
                   None if case.node_rack is None else np.asarray(case.node_rack, dtype=np.int64))


#: no drawn case runs this long; a kernel still stepping then would step forever
HORIZON_S = 1e9
_drive = fengine.NativeState.drive


class KernelLoops(AssertionError):
    pass


def _bounded_drive(self, stop_t=np.inf, slicer=None):
    code = _drive(self, min(stop_t, HORIZON_S), slicer)
    if code == kengine.PAUSED and stop_t > HORIZON_S:
        raise KernelLoops(f"the kernel is still stepping at t = {self.now:g} s: it would never stop")
    return code


def run_kernel(case: RealCase, cfg: dict):
    """``fastblox.simulate`` on the case; None when it reports that the jobs can never all run."""
    w = fastblox.Workload.from_arrays(submit_s=case.submit, num_gpus=case.gpus, duration_s=case.work)
    sm = speed_model(case, cfg["mnf"])
    pol = cfg["policy"]
    sched = KEY_FNS[pol][0] if pol in KEY_FNS else pol
    opts = cfg.get("opts")  # a built-in policy's options (Tiresias, Gittins, Themis)
    if pol == PLANNER:
        token = len(PLAN_INFO)
        PLAN_INFO[token] = plan_info(case, cfg["max_gpus"])
        opts = {"seed": cfg["seed"], "volatility": cfg["vol"], "token": token, "max_gpus_per_job": cfg["max_gpus"]}
    with mock.patch.object(fengine, "build_speed_model", lambda *a, **k: sm), \
            mock.patch.object(fengine.NativeState, "drive", _bounded_drive):
        try:
            return fastblox.simulate(
                w, cluster=cluster_of(case), policy=sched, placement=cfg["placement"],
                admission=f"load:{cfg['theta']}" if cfg["theta"] else "accept-all", time_model=cfg["tm"],
                round_s=cfg["round_s"], restart_s=cfg["restart"], preempt=cfg["preempt"],
                checkpoint_s=cfg["ckpt"], throughput="none", multi_node_factor=cfg["mnf"], rack_factor=cfg["rf"],
                cluster_events=case.events or None, policy_opts=opts, record_series=True,
                track=_track(case, cfg))
        except fastblox.SimulationError:
            return None
        finally:
            if pol == PLANNER:
                PLAN_INFO.pop(opts["token"], None)


def _track(case: RealCase, cfg: dict):
    k = cfg.get("track")
    return None if k is None or k >= len(case.submit) else (0, k - 1)


def run_reference(case: RealCase, cfg: dict):
    pol = cfg["policy"]
    kw = {}
    tr = _track(case, cfg)
    if tr is not None:
        kw["tracked"] = [i <= tr[1] for i in range(len(case.submit))]
    if pol in KEY_FNS:
        kw["key_fn"] = KEY_FNS[pol][1](cfg["restart"])
    elif pol == PLANNER:
        info = plan_info(case, cfg["max_gpus"])
        kw["planner"] = lambda idx, t: hash_plan(idx, t, cfg["seed"], cfg["vol"], info)
        kw["dynamic"] = False
    else:
        kw["policy"] = pol
        kw.update(policy_kwargs(case, cfg))
    return simulate_native_reference(
        case.submit, case.gpus, case.work, case.node_gpus, placement=cfg["placement"], theta=cfg["theta"],
        time_model=cfg["tm"], round_s=cfg["round_s"], restart_s=cfg["restart"], preempt=cfg["preempt"],
        node_type=case.node_type, node_rack=case.node_rack, cls=case.cls, ref_rate=case.ref_rate, tab=case.tab.tolist(),
        type_speed=case.type_speed, node_factor=list(case.node_factor), spread=case.spread.tolist(),
        multi_node_factor=cfg["mnf"],
        rack_factor=cfg["rf"], checkpoint_s=cfg["ckpt"], events=case.events, max_steps=100_000, **kw)


def policy_kwargs(case: RealCase, cfg: dict) -> dict:
    """The reference's arguments for a built-in policy's options (``cfg["opts"]``, as given to
    simulate): Tiresias' thresholds and knob, the Gittins table simulate prepares from the same
    speed model, Themis' f."""
    pol, opts = cfg["policy"], cfg.get("opts") or {}
    if pol in ("tiresias", "tiresias-gittins"):
        full = parts.POLICIES.get(pol).resolve_options(opts)
        kw = {"thresholds": full["thresholds"], "promote": full["promote"]}
        if pol == "tiresias-gittins":
            w = fastblox.Workload.from_arrays(submit_s=case.submit, num_gpus=case.gpus, duration_s=case.work)
            prep = _prepare_gittins(full, w, speed_model(case, cfg["mnf"]))
            kw["gittins"] = (prep["_gittins_x"].tolist(), prep["_gittins_v"].tolist())
        return kw
    if pol == "themis":
        return {"themis_f": parts.POLICIES.get(pol).resolve_options(opts)["f"]}
    return {}


def _nan(x):
    a = np.asarray(x, dtype=np.float64)
    return np.where(a < 0, np.nan, a)


def assert_same(res, ref, case: RealCase):
    """Job by job: finish, first start, preemptions, failures, attained service, lost time, GPU type."""
    j = res.jobs
    np.testing.assert_array_equal(j["finish_s"].to_numpy(), _nan(ref["finish"]), err_msg="finish_s")
    np.testing.assert_array_equal(j["first_start_s"].to_numpy(), _nan(ref["first_start"]), err_msg="first_start_s")
    np.testing.assert_array_equal(j["num_preemptions"].to_numpy(), ref["n_preempt"], err_msg="num_preemptions")
    np.testing.assert_array_equal(j["num_failures"].to_numpy(), ref["n_fail"], err_msg="num_failures")
    np.testing.assert_array_equal(j["attained_s"].to_numpy(), ref["attained"], err_msg="attained_s")
    np.testing.assert_array_equal(j["attained_gpu_s"].to_numpy(), ref["attained_gpu"], err_msg="attained_gpu_s")
    np.testing.assert_array_equal(j["lost_s"].to_numpy(), ref["lost_s"], err_msg="lost_s")
    if len(case.type_names) > 1:
        # never launched: null
        assert j["gpu_type"].to_list() == [case.type_names[t] if t >= 0 else None for t in ref["gpu_type"]]
    s = res.summary
    assert s["num_steps"] == ref["steps"]
    assert s["end_s"] == ref["end_t"]
    assert s["num_failures"] == sum(ref["n_fail"])
    assert s["num_preemptions"] == sum(ref["n_preempt"])
    assert s.get("num_migrations", 0) == ref["n_migrate"]
    # a sum over jobs: the kernel adds in event order, the reference in its own
    assert math.isclose(s["lost_gpu_s"], ref["lost_gpu_s"], rel_tol=1e-12, abs_tol=1e-9)


def _up_gpu_seconds(case: RealCase, t0: float, t1: float) -> float:
    """The integral of GPUs in service over [t0, t1] from the node events."""
    up = [True] * len(case.node_gpus)
    seen = set()
    evs = sorted(case.events, key=lambda e: e[0])
    for _, e, nd in evs:
        if nd not in seen:
            seen.add(nd)
            up[nd] = e != "add"
    total, t = 0.0, t0
    for te, e, nd in evs:
        te = min(max(te, t0), t1)
        total += (te - t) * sum(g for g, u in zip(case.node_gpus, up) if u)
        t = te
        up[nd] = e in ("recover", "add")
    return total + (t1 - t) * sum(g for g, u in zip(case.node_gpus, up) if u)


def assert_invariants(res, ref, case: RealCase, cfg: dict):
    j = res.jobs
    sub = j["submit_s"].to_numpy()
    fin = j["finish_s"].to_numpy()
    start = j["first_start_s"].to_numpy()
    done = np.isfinite(fin)
    assert done[j["tracked"].to_numpy()].all(), "every tracked job finishes"
    assert (start[done] >= sub[done]).all() and (fin[done] >= start[done]).all()
    end = res.summary["end_s"]
    # no GPU given twice, none used while out of service: GPU-seconds held fit in the GPU-seconds up
    used = j["attained_gpu_s"].to_numpy().sum()
    assert used <= _up_gpu_seconds(case, float(sub.min()), end) * (1 + 1e-12) + 1e-6
    # the kernel's own step series: time never goes back, free GPUs within the GPUs up
    ser = res.series
    t = ser["t_s"].to_numpy()
    assert (np.diff(t) >= 0).all() and (t <= end).all(), "time went back"
    assert (ser["free_gpus"].to_numpy() >= 0).all() and (ser["free_gpus"] <= ser["gpus_up"]).all()
    # the reference's launches (equal to the kernel's job by job): each job finishes once, gangs
    # whole on one GPU type, failures only of jobs on a node failing then, work conserved
    fails = {(float(te), nd) for te, e, nd in case.events if e in ("fail", "remove")}
    node_of = [nd for nd, g in enumerate(case.node_gpus) for _ in range(g)]
    restart, ckpt = cfg["restart"], cfg["ckpt"]
    for i, hist in enumerate(ref["history"]):
        whys = [c.why for c in hist]
        if done[i]:
            assert whys.count("done") == 1 and whys[-1] == "done" and hist[-1].end == fin[i]
        else:
            assert "done" not in whys and "running" not in whys[:-1]
        if hist:
            assert hist[0].t == start[i]
        else:
            assert np.isnan(start[i])
        assert whys.count("fail") == ref["n_fail"][i]
        assert whys.count("preempt") == ref["n_preempt"][i]
        kept = 0.0
        for a, b in zip(hist, hist[1:]):
            assert a.end <= b.t
        for c in hist:
            assert len({case.node_type[node_of[g]] for g in c.gpus}) == 1 and case.node_type[node_of[c.gpus[0]]] == c.gtype
            assert len(set(c.gpus)) == len(c.gpus)
            assert c.el >= c.prod >= c.kept >= 0 and c.prod == max(0.0, c.el - restart)
            if ckpt and c.why in ("preempt", "fail"):
                assert c.kept % ckpt == 0
            if c.why == "fail":
                assert any((c.end, node_of[g]) in fails for g in c.gpus), "killed by a node it was not on"
            kept += c.kept * c.rate
        if done[i]:
            assert math.isclose(kept, case.work[i], rel_tol=1e-9, abs_tol=1e-6), "work conserved"
        else:
            assert kept <= case.work[i] * (1 + 1e-9), "more progress than work"
        assert math.isclose(sum(c.el for c in hist), ref["attained"][i], rel_tol=1e-12, abs_tol=1e-9)
        assert math.isclose(sum(c.prod - c.kept for c in hist), ref["lost_s"][i], rel_tol=1e-12, abs_tol=1e-9)
        assert ref["attained"][i] >= sum(c.prod for c in hist) - 1e-9, "attained covers the productive time"
    # no two launches overlapping in time share a GPU
    spans = sorted((c.t, c.end, i, g) for i, hist in enumerate(ref["history"]) for c in hist for g in c.gpus)
    last_end = {}
    for t0, t1, i, g in spans:
        assert last_end.get(g, -math.inf) <= t0, f"GPU {g} held twice at {t0}"
        last_end[g] = t1


def _jobs_bytes(res) -> bytes:
    buf = io.BytesIO()
    res.jobs.write_parquet(buf)
    return buf.getvalue()


DYNAMIC = {"las", "las-gpu", "srtf", *KEY_FNS}


@st.composite
def _cfg(draw, policies):
    cfg = draw(st.fixed_dictionaries({
        "policy": st.sampled_from(policies),
        "placement": st.sampled_from(PLACEMENTS),
        "theta": st.sampled_from([0.0, 0.0, 1.0, 1.5]),
        "tm": st.sampled_from(["events", "rounds"]),
        "round_s": st.sampled_from([300.0, 120.0]),
        "restart": st.sampled_from([0.0, 30.0]),
        "preempt": st.booleans(),
        "ckpt": st.sampled_from([0.0, 0.0, 50.0, 400.0]),
        "mnf": st.sampled_from([1.0, 0.8, 0.5]),
        "rf": st.sampled_from([1.0, 0.6]),
        "seed": st.integers(0, 2**32),
        "vol": st.sampled_from([0, 30, 100]),
        "max_gpus": st.sampled_from([0, 2, 4, 8]),
        "track": st.sampled_from([None, None, None, 1, 3]),  # jobs 0..k-1 tracked (None: all)
    }))
    if cfg["tm"] == "rounds" and cfg["ckpt"] > cfg["round_s"] - cfg["restart"]:
        # a job stopped every round would keep nothing: jobs taking turns forever (both engines)
        cfg["ckpt"] = 50.0
    return cfg


def check_case(case: RealCase, cfg: dict):
    ref = run_reference(case, cfg)
    res = run_kernel(case, cfg)
    if res is None:
        assert ref["deadlock"], "the kernel reports jobs that can never run; the reference ran them all"
        return None, ref
    assert not ref["deadlock"], "the reference found jobs that can never run; the kernel ran them all"
    assert_same(res, ref, case)
    assert_invariants(res, ref, case, cfg)
    return res, ref


@pytest.mark.parametrize("policy", BUILTIN)
@per_item()
@given(case=real_case(), cfg=_cfg([None]))
def test_builtin_policies_match_reference(policy, case, cfg):
    """FIFO, LAS, LAS-GPU, SRTF, SJF on heterogeneous clusters with racks, rates, failures (an
    item per policy: each draws the placements and time models)."""
    cfg = dict(cfg, policy=policy)
    res, _ = check_case(case, cfg)
    if res is not None:
        again = run_kernel(case, cfg)
        assert _jobs_bytes(again) == _jobs_bytes(res), "same input, different output"


@pytest.mark.slow  # (compiles user-policy kernels of its own: ~10-18 s on an empty cache)
@given(case=real_case(), cfg=_cfg(list(KEY_FNS)))
def test_user_key_functions_match_reference(case, cfg):
    """The full-sort path: every active job re-keyed by a Python function at every step."""
    check_case(case, cfg)


@given(case=real_case(), cfg=_cfg(["row-biggest", "row-remaining"]))
def test_rowwise_key_functions_match_reference(case, cfg):
    """The row-wise path (``rowwise=True``): a Python function on the sorted-queue path, called
    for the jobs that start waiting (arrivals, victims, jobs of failed nodes) and the running ones."""
    check_case(case, cfg)


@given(case=real_case(max_jobs=10), cfg=_cfg([PLANNER]))
def test_planner_matches_reference(case, cfg):
    """The planner path: plans that move, resize, hold back and re-order jobs."""
    res, _ = check_case(case, cfg)
    if res is not None:
        again = run_kernel(case, cfg)
        assert _jobs_bytes(again) == _jobs_bytes(res), "same input, different output"


@given(case=real_case(with_events=False, max_types=1), cfg=_cfg(BUILTIN + list(KEY_FNS)))
def test_one_type_with_rates_matches_reference(case, cfg):
    """No node events, one GPU type: the rate model, checkpoints, placements and policies on their own."""
    check_case(case, cfg)


# --------------------------------------------------------------------------- kernel bugs found by these tests (fixed)
def test_rounds_node_failure_is_scheduled_at_the_next_boundary():
    """LAS, rounds of 300 s, one job on node 0 of two 1-GPU nodes; node 0 fails at 450. The
    next boundary after the failure is 600: the job restarts there on node 1 and ends at 1150.
    The kernel used to step at 0 + 300 = 300 < 450 (it had skipped to the boundary of the
    completion, 1200, before the event) and restart the killed job in the past."""
    w = fastblox.Workload.from_arrays(submit_s=[0.0], num_gpus=[1], duration_s=[1000.0])
    ev = [(450.0, "fail", 0)]
    ref = simulate_native_reference([0.0], [1], [1000.0], [1, 1], policy="las", time_model="rounds", events=ev)
    assert ref["finish"] == [1150.0] and ref["n_fail"] == [1]
    assert [c.t for c in ref["history"][0]] == [0.0, 600.0]
    res = fastblox.simulate(w, cluster="2x1", policy="las", time_model="rounds", round_s=300.0, cluster_events=ev)
    assert res.jobs["finish_s"].to_list() == [1150.0]


def test_rounds_no_gpu_left_in_service_is_a_deadlock_not_a_hang():
    """Every round skipped its step (nothing free, no preemption) before the deadlock check: the
    kernel used to step forever."""
    w = fastblox.Workload.from_arrays(submit_s=[0.0], num_gpus=[1], duration_s=[1000.0])
    ev = [(100.0, "fail", 0)]
    ref = simulate_native_reference([0.0], [1], [1000.0], [1], policy="las", time_model="rounds", preempt=False,
                                    events=ev)
    assert ref["deadlock"]
    with mock.patch.object(fengine.NativeState, "drive", _bounded_drive):
        with pytest.raises(fastblox.SimulationError, match="never be placed"):
            fastblox.simulate(w, cluster="1x1", policy="las", time_model="rounds", preempt=False, cluster_events=ev)


def test_rounds_admission_held_jobs_behind_unplaceable_ones_is_a_deadlock_not_a_hang():
    """Two 3-GPU jobs that Blox's exact-sum placement never puts on an empty 2x2 cluster are
    admitted (demand 6 > 1.0 x 4 GPUs), so the 1-GPU job behind them is held back for good. The
    deadlock check used to wait for the admission queue to empty, which it never does."""
    w = fastblox.Workload.from_arrays(submit_s=[0.0, 0.0, 0.0], num_gpus=[3, 3, 1], duration_s=[100.0] * 3)
    kw = dict(cluster="2x2", policy="las", placement="blox", admission="load:1.0")
    ref = simulate_native_reference(w.submit_s, w.num_gpus, w.duration_s, [2, 2], policy="las", placement="blox",
                                    theta=1.0, time_model="rounds")
    assert ref["deadlock"] and ref["stuck"] == {"waiting": 2, "overflow": 1, "in_service": 4}
    with pytest.raises(fastblox.SimulationError, match="never be placed"):
        fastblox.simulate(w, time_model="events", **kw)
    with mock.patch.object(fengine.NativeState, "drive", _bounded_drive):
        with pytest.raises(fastblox.SimulationError, match="never be placed"):
            fastblox.simulate(w, time_model="rounds", **kw)


# --------------------------------------------------------------------------- through a real table
@st.composite
def table_case(draw):
    """A cluster spec string with GPU types and racks, a ThroughputTable over those types (NaN:
    not measured), and jobs of known and unknown models, some with iterations."""
    types = draw(st.sampled_from([("v100",), ("v100", "k80"), ("p100", "v100", "k80"), ("k80", "p100")]))
    groups = [(t, draw(st.integers(1, 2)), draw(st.sampled_from([1, 2, 4]))) for t in types]
    per_rack = draw(st.sampled_from([None, 1, 2]))
    spec = ",".join(f"{t}:{k}x{g}" for t, k, g in groups) + (f"@{per_rack}" if per_rack else "")
    c = Cluster.parse(spec)
    n_models = draw(st.integers(1, 3))
    sizes = (1, 2, 4)
    iters = np.asarray(draw(st.lists(st.one_of(st.just(np.nan), st.floats(0.5, 50.0)), min_size=n_models * len(types) * 3,
                                     max_size=n_models * len(types) * 3))).reshape(n_models, len(types), 3)
    iters[:, 0, 0] = np.where(np.isnan(iters[:, 0, 0]), 1.0, iters[:, 0, 0])  # every model, type and size measured
    iters[0, :, 0] = np.where(np.isnan(iters[0, :, 0]), 1.0, iters[0, :, 0])
    iters[0, 0, :] = np.where(np.isnan(iters[0, 0, :]), 1.0, iters[0, 0, :])
    factor = np.asarray([draw(st.sampled_from([np.nan, 1.0, 0.6])) for _ in range(n_models)])
    # measured multi-node throughputs (Gavel's unconsolidated workers) for some models, sizes >= 2
    spread = np.full_like(iters, np.nan)
    for m in range(n_models):
        if draw(st.booleans()):
            spread[m, :, 1:] = iters[m, :, 1:] * draw(st.sampled_from([0.5, 0.9, 1.1]))
    models = tuple(f"model-{m}" for m in range(n_models))
    table = ThroughputTable(models=models, gpu_types=types, sizes=sizes, iters_per_s=iters, multi_node_factor=factor,
                            source="hypothesis", multi_node_iters_per_s=spread)
    n = draw(st.integers(1, 10))
    submit = np.cumsum(np.asarray(draw(st.lists(st.integers(0, 600), min_size=n, max_size=n)), dtype=np.float64))
    largest = c.largest_gang()
    gpus = np.asarray(draw(st.lists(st.sampled_from([s for s in (1, 2, 3, 4) if s <= largest]), min_size=n, max_size=n)))
    dur = np.asarray(draw(st.lists(st.integers(1, 2000), min_size=n, max_size=n)), dtype=np.float64)
    names = np.asarray(draw(st.lists(st.sampled_from(list(models) + ["Model-0 ", "unknown"]), min_size=n, max_size=n)),
                       dtype=object)
    its = np.asarray(draw(st.lists(st.one_of(st.just(np.nan), st.integers(1, 5000).map(float)), min_size=n, max_size=n)))
    w = fastblox.Workload.from_arrays(submit_s=submit, num_gpus=gpus, duration_s=dur, iterations=its, model=names)
    return spec, c, table, w, draw(node_events(c.num_nodes))


def spec_speed(c: Cluster, table, w, g_max: int) -> dict:
    """The speed model as docs/semantics.md states it, from the table's public methods: a known
    model works in iterations (given, else its run time times its throughput on the reference
    type, v100 if the table has it) at ``tab[c, t, n]``, and when spread over nodes at its
    measured multi-node throughput where the table has one (else the node factor); an unknown
    model (or one with no throughput on the reference type at its size) works in seconds at
    ``type_speed[t]``."""
    ref = "v100" if "v100" in table.gpu_types else table.gpu_types[0]
    cls = table.model_codes(w.extra["model"]).astype(np.int64)
    rr = np.ones(len(w))
    known = cls >= 0
    rr[known] = table.rates_at(cls[known], w.num_gpus[known], ref)
    bad = known & ~(rr > 0)
    cls[bad], rr[bad] = -1, 1.0
    known = cls >= 0
    work = np.where(known, np.where(w.iterations > 0, w.iterations, w.duration_s * rr), w.duration_s)
    return {"cls": cls, "ref_rate": rr, "work": work, "tab": np.nan_to_num(table.rates(c.gpu_types, g_max), nan=0.0),
            "type_speed": table.type_speed(c.gpu_types, ref), "node_factor": np.asarray(table.multi_node_factor),
            "spread": np.nan_to_num(table.multi_node_rates(c.gpu_types, g_max), nan=0.0)}


@given(tc=table_case(), cfg=_cfg(BUILTIN))
def test_simulate_with_a_throughput_table_matches_reference(tc, cfg):
    """End to end through ``simulate``: a cluster string with types and racks, a ThroughputTable,
    a model column, node events as records, checkpoints and factors."""
    spec, c, table, w, events = tc
    sp = spec_speed(c, table, w, int(w.num_gpus.max()))
    case = RealCase(w.submit_s, w.num_gpus, sp["work"], list(c.node_gpus), list(c.node_type), c.gpu_types,
                    None if c.node_rack is None else list(c.node_rack), sp["cls"], sp["ref_rate"], sp["tab"],
                    sp["type_speed"], sp["node_factor"], sp["spread"], events, int(w.num_gpus.max()))
    ref = run_reference(case, cfg)
    try:
        with mock.patch.object(fengine.NativeState, "drive", _bounded_drive):
            res = fastblox.simulate(
                w, cluster=spec, policy=cfg["policy"], placement=cfg["placement"],
                admission=f"load:{cfg['theta']}" if cfg["theta"] else "accept-all", time_model=cfg["tm"],
                round_s=cfg["round_s"], restart_s=cfg["restart"], preempt=cfg["preempt"], checkpoint_s=cfg["ckpt"],
                throughput=table, multi_node_factor=cfg["mnf"], rack_factor=cfg["rf"], cluster_events=events or None,
                record_series=True, track=_track(case, cfg))
    except fastblox.WorkloadError:
        assume(False)  # a job no GPU type can run (simulate refuses the workload)
    except fastblox.SimulationError:
        assert ref["deadlock"]
        return
    assert not ref["deadlock"]
    assert_same(res, ref, case)
    assert_invariants(res, ref, case, cfg)
