"""User policies compiled into the kernel (``fastblox.policy(..., per_job=True)``, issue 18).

Each per-job function here is a kernel of its own (one compile per function and path on an
empty numba cache, ~30 CPU-s each): the tests share a few module-level functions, and those
that compile one more kernel than the first are marked slow.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fastblox
from fastblox import userpol
from fastblox.kernels import enums
from fastblox.reference.native import simulate_native_reference
from strategies import small_case


def las_job(job, now):
    return job.attained_s


def srtf_job(job, now):
    return job.remaining_s


def fewest_gpus_then_las(job, now):
    return job.num_gpus, job.attained_s


def aged_las(job, now):  # reads the time: re-keyed at every step
    return job.attained_s - 0.05 * (now - job.submit_s)


BAD_IDS = {"raise": 1_000_001, "nan": 1_000_002, "inf": 1_000_003}


def faulty(job, now):
    if job.job_id == 1_000_001:
        raise ValueError("boom")
    if job.job_id == 1_000_002:
        return np.nan
    if job.job_id == 1_000_003:
        return -np.inf
    return job.attained_s


def compiled(fn, preemptive=True):
    return userpol.make_policy(fn.__name__, fn, preemptive)


def workload(n=300, seed=3):
    return fastblox.gavel_like_workload(n, seed=seed)


def same_jobs(a, b):
    assert a.jobs.equals(b.jobs), "the same results, job by job"
    assert a.summary["num_steps"] == b.summary["num_steps"]


@pytest.mark.slow  # (compiles user-policy kernels of its own: ~10 s on an empty cache)
def test_las_per_job_runs_in_the_kernel_and_equals_builtin_and_python_form():
    w = workload()
    pol = compiled(las_job)
    assert pol.kind == enums.KIND_STATIC and pol.fn is None  # the sorted-queue path, no Python call
    calls = []

    def las_py(jobs, now):
        calls.append(now)
        return jobs.attained_s

    for tm in ("events", "rounds"):
        a = fastblox.simulate(w, cluster="4x8", policy=pol, time_model=tm, restart_s=20.0)
        b = fastblox.simulate(w, cluster="4x8", policy="las", time_model=tm, restart_s=20.0)
        c = fastblox.simulate(w, cluster="4x8", policy=las_py, time_model=tm, restart_s=20.0)
        same_jobs(a, b)
        assert a.jobs.equals(c.jobs)
        assert a.summary["num_preemptions"] > 0  # (the run exercises the preempting walk)
    assert len(calls) > 100  # the Python form really is called per step; the compiled one is not


@pytest.mark.slow  # (compiles user-policy kernels of its own: ~10 s on an empty cache)
def test_a_bad_compiled_policy_stops_the_run_naming_it_and_the_job():
    w = workload(60, seed=1)
    pol = compiled(faulty)
    ids = w.job_id.copy()
    for what, needle in (("raise", "raised an exception"), ("nan", "returned nan"), ("inf", "returned -inf")):
        bad = ids.copy()
        bad[20] = BAD_IDS[what]
        wb = fastblox.Workload.from_arrays(submit_s=w.submit_s, num_gpus=w.num_gpus, duration_s=w.duration_s,
                                           job_id=bad)
        with pytest.raises(fastblox.ConfigError) as e:
            fastblox.simulate(wb, cluster="2x8", policy=pol)
        msg = str(e.value)
        assert "\n" not in msg and "policy 'faulty'" in msg and needle in msg, msg
        assert f"job {BAD_IDS[what]}" in msg, msg
    ok = fastblox.simulate(w, cluster="2x8", policy=pol)  # the same function runs clean otherwise
    same_jobs(ok, fastblox.simulate(w, cluster="2x8", policy="las"))


@pytest.mark.parametrize("fn,needle", [
    (lambda job, now: job.attained_s.max(), "does not compile for one job"),
    (lambda job, now: np.zeros(3), "must return one real number per job"),
    (lambda job, now: "text", "must return one real number per job"),
    (lambda job, now: (job.attained_s, job.num_gpus), "must return one real number per job"),
    (lambda job, now: 1j * job.attained_s, "must return one real number per job"),
])
def test_a_per_job_policy_of_the_wrong_shape_or_type_is_refused_in_one_line(fn, needle):
    with pytest.raises(fastblox.ConfigError) as e:
        fastblox.simulate(workload(20), cluster="2x4", policy=userpol.make_policy("bad", fn))
    assert needle in str(e.value) and "policy 'bad'" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.slow  # (compiles a user-policy kernel: ~11 CPU-s on an empty cache)
def test_registered_with_the_decorator():
    # (the decorator applied to this module's LAS: its kernel is the one the first test compiled)
    mine = fastblox.policy("las-per-job-test", per_job=True, replace=True)(las_job)
    assert mine is las_job
    pol = fastblox.POLICIES.get("las-per-job-test")
    assert pol.job_fn is mine and pol.code == enums.POL_CUSTOM and pol.kind == enums.KIND_STATIC
    w = workload(100)
    same_jobs(fastblox.simulate(w, cluster="2x8", policy="las-per-job-test"),
              fastblox.simulate(w, cluster="2x8", policy="las"))


def test_reads_now_decides_the_path():
    assert not userpol.reads_now(las_job)
    assert userpol.reads_now(aged_las)
    assert userpol.reads_now(lambda job, now: (lambda: now)())  # a nested function reading it
    assert userpol.make_policy("a", aged_las).kind == enums.KIND_FULL


def test_the_digest_follows_code_constants_and_closures_not_line_numbers():
    def make(c):
        def f(job, now):
            return job.attained_s * c
        return f

    assert userpol.digest(make(1.0)) == userpol.digest(make(1.0))
    assert userpol.digest(make(1.0)) != userpol.digest(make(2.0))
    assert userpol.digest(las_job) != userpol.digest(srtf_job)
    src = "\n\ndef las_job(job, now):\n    return job.attained_s\n"
    ns1, ns2 = {}, {}
    exec(compile(src, "a.py", "exec"), ns1)
    exec(compile("\n\n\n" + src, "b.py", "exec"), ns2)
    assert userpol.digest(ns1["las_job"]) == userpol.digest(ns2["las_job"])


@pytest.mark.slow
def test_srtf_per_job_equals_builtin():
    w = workload(400, seed=11)
    for tm in ("events", "rounds"):
        same_jobs(fastblox.simulate(w, cluster="4x4", policy=compiled(srtf_job), time_model=tm, restart_s=20.0),
                  fastblox.simulate(w, cluster="4x4", policy="srtf", time_model=tm, restart_s=20.0))


@pytest.mark.slow
def test_two_keys_per_job_equals_python_form_and_reference():
    w = workload(300, seed=5)
    a = fastblox.simulate(w, cluster="4x8", policy=compiled(fewest_gpus_then_las))
    b = fastblox.simulate(w, cluster="4x8", policy=lambda jobs, now: jobs.num_gpus * 1e9 + jobs.attained_s)
    same_jobs(a, b)
    ref = simulate_native_reference(w.submit_s, w.num_gpus, w.duration_s, [8] * 4,
                                    key_fn=lambda j, t: (j.gpus, j.attained + (t - j.cur.t if j.state == "running"
                                                                               else 0.0)))
    np.testing.assert_array_equal(a.jobs["finish_s"].to_numpy(), np.asarray(ref["finish"], dtype=float))


@pytest.mark.slow
def test_a_policy_that_reads_the_time_is_rekeyed_every_step_in_the_kernel():
    w = workload(300, seed=7)
    for tm in ("events", "rounds"):
        a = fastblox.simulate(w, cluster="4x8", policy=compiled(aged_las), time_model=tm)
        b = fastblox.simulate(w, cluster="4x8", time_model=tm,
                              policy=lambda jobs, now: jobs.attained_s - 0.05 * (now - jobs.submit_s))
        same_jobs(a, b)


@pytest.mark.slow
def test_non_preemptive_per_job_policy_equals_python_form():
    w = workload(300, seed=9)
    a = fastblox.simulate(w, cluster="4x8", policy=compiled(las_job, preemptive=False))
    b = fastblox.simulate(w, cluster="4x8", policy=lambda jobs, now: jobs.attained_s, preempt=False)
    same_jobs(a, b)


@pytest.mark.slow
def test_the_kernel_of_a_user_policy_is_cached_on_disk(tmp_path):
    """A second process loads the compiled kernel of the same function from the cache."""
    script = tmp_path / "run.py"
    script.write_text(
        "import time, fastblox\n"
        "@fastblox.policy('mine', per_job=True)\n"
        "def mine(job, now):\n    return job.num_gpus * 1e6 + job.attained_s\n"
        "w = fastblox.gavel_like_workload(50, seed=0)\n"
        "r = fastblox.simulate(w, cluster='2x8', policy='mine')\n"
        "print(r.summary['compile_s'])\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    runs = [float(subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                                 check=True).stdout.split()[-1]) for _ in range(2)]
    assert runs[0] > 5.0 and runs[1] < 3.0, runs


def doc_examples() -> list[str]:
    """The python blocks of docs/policies.md's *Write your own policy*, in order."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "policies.md").read_text()
    section = text[text.index("# Write your own policy"):]
    return re.findall(r"```python\n(.*?)```", section, re.S)


@pytest.mark.slow
def test_the_docs_examples_run():
    """Each block runs, in order, in one namespace (they assert what they show)."""
    blocks = doc_examples()
    assert len(blocks) >= 4
    ns: dict = {}
    for b in blocks:
        exec(compile(b.replace('fastblox.policy("', 'fastblox.policy(replace=True, name="'), "policies.md", "exec"),
             ns)
    assert fastblox.POLICIES.get("my-las").job_fn is ns["my_las"]


def numpy_job_view(st):
    """``NativeState.job_view`` as it was computed with numpy (the reference of ``view_columns``)."""
    from fastblox.kernels import engine as kengine

    idx = st.active_idx()
    t, r, w = st.now, st.run, st.w
    running = r.status[idx] == enums.RUNNING
    el = np.where(running, t - r.launch_t[idx], 0.0)
    left = r.work_left[idx] - np.maximum(0.0, el - st.cf[kengine.CF_RESTART_S]) * r.rate[idx] * running
    return fastblox.JobView(
        job_id=w.job_id[idx], submit_s=w.submit_s[idx], num_gpus=w.num_gpus[idx], duration_s=w.duration_s[idx],
        attained_s=r.attained[idx] + el, attained_gpu_s=r.attained_gpu[idx] + el * r.held[idx],
        remaining_s=left / st.jobs.ref_rate[idx], running=running.astype(np.int8), num_preemptions=r.n_preempt[idx],
        since_s=np.where(running, r.launch_t[idx], r.wait_t[idx]))


def test_the_job_view_kernel_gives_numpy_s_columns_to_the_bit():
    w = workload(400, seed=2)
    st = fastblox.prepare_native(w, cluster="2x8", policy=lambda jobs, now: jobs.attained_s, restart_s=30.0).state
    seen = 0
    for stop in (5e4, 2e5, 6e5):
        st.drive(stop)
        got, want = st.job_view(), numpy_job_view(st)
        assert len(want.job_id) > 0
        for f in fastblox.JobView._fields:
            a, b = getattr(got, f), getattr(want, f)
            assert a.dtype == b.dtype, f
            np.testing.assert_array_equal(a, b, err_msg=f)
        seen += int(want.running.sum())
    assert seen > 0


def test_a_python_policy_reads_exact_columns_whichever_it_reads_and_whenever():
    """The kernel fills only the columns a Python policy has read before: a column read for the
    first time (by name, by index, by iteration, half way through the run) is filled then, and
    every column read is the state's at that step, to the bit."""
    w = workload(300, seed=5)
    t_switch = float(np.median(w.submit_s))
    calls = {"submit": 0, "index": 0, "iter": 0, "name": 0}

    def check(a, f):
        np.testing.assert_array_equal(a, getattr(numpy_job_view(nr.state), f), err_msg=f)

    def switching(jobs, now):
        if now < t_switch:  # FIFO's column only: the others are not filled
            calls["submit"] += 1
            check(jobs.submit_s, "submit_s")
            return jobs.submit_s
        k = calls["index"] + calls["iter"] + calls["name"]
        if k % 3 == 0:
            calls["index"] += 1
            check(jobs[6], "remaining_s")
        elif k % 3 == 1:
            calls["iter"] += 1
            for f, a in zip(fastblox.JobView._fields, jobs):
                check(a, f)
        else:
            calls["name"] += 1
        check(jobs.attained_s, "attained_s")
        return jobs.attained_s

    from fastblox.kernels.userpol import ALL_COLUMNS

    assert ALL_COLUMNS == (1 << len(fastblox.JobView._fields)) - 1
    nr = fastblox.prepare_native(w, cluster="2x8", policy=switching, restart_s=30.0)
    nr.drive()
    assert min(calls.values()) > 10, calls

    def eager(jobs, now):  # every column, every step
        cols = tuple(jobs)
        return cols[1] if now < t_switch else cols[4]

    assert nr.result(0.0).jobs.equals(fastblox.simulate(w, cluster="2x8", restart_s=30.0, policy=eager).jobs)


def test_compose_refuses_unknown_parts_and_a_real_valued_rank():
    with pytest.raises(fastblox.ConfigError, match="unknown rank part 'fewest'; choose one of: fewest-gpus, "):
        userpol.compose("fewest", "las")
    with pytest.raises(fastblox.ConfigError, match="pair of an integer and a real number"):
        fastblox.simulate(workload(20), cluster="2x4", policy=userpol.compose("las", "fifo"))
    with pytest.raises(fastblox.ConfigError, match="ascending thresholds"):
        userpol.tiresias_queue([10.0, 5.0])


def test_composed_parts_digest_apart():
    a, b = userpol.compose("fewest-gpus", "las"), userpol.compose("fewest-gpus", "srtf")
    assert userpol.digest(a.job_fn) != userpol.digest(b.job_fn)
    assert userpol.digest(a.job_fn) == userpol.digest(userpol.compose("fewest-gpus", "las").job_fn)
    assert userpol.digest(userpol.tiresias_queue([1.0]).py_func) != userpol.digest(userpol.tiresias_queue([2.0]).py_func)
    assert a.kind == enums.KIND_STATIC
    assert userpol.compose("fewest-gpus", aged_las).kind == enums.KIND_FULL


@pytest.mark.slow
def test_a_composed_policy_equals_the_same_function_written_out():
    w = workload(300, seed=5)
    same_jobs(fastblox.simulate(w, cluster="4x8", policy=userpol.compose("fewest-gpus", "las")),
              fastblox.simulate(w, cluster="4x8", policy=compiled(fewest_gpus_then_las)))


def test_the_warm_kind_of_a_per_job_policy_names_its_kernel():
    from fastblox import engine

    pol = compiled(las_job)
    kind = engine.kind_of(pol)
    assert kind == f"native:static+user:{userpol.digest(las_job)}"
    st = fastblox.prepare_native(workload(20), cluster="2x4", policy=pol).state
    assert engine.state_kind(st) == kind
    assert engine.kind_of(compiled(las_job, preemptive=False)).startswith("native:queue+user:")
    assert engine.kind_of(compiled(aged_las)).startswith("native:full+user:")


@pytest.mark.slow  # (compiles a user-policy kernel: ~11 CPU-s on an empty cache)
def test_a_paused_run_switched_to_a_compiled_policy_goes_on_as_the_builtin():
    """Switching from ``las`` to the per-job LAS halfway changes nothing: the same keys."""
    w = workload(300, seed=4)
    st = fastblox.prepare_native(w, cluster="4x8", policy="las").state
    st.drive(float(w.submit_s[150]))
    st.set_policy(compiled(las_job))
    assert st.drive() == fastblox.DriveCode.FINISHED
    ref = fastblox.prepare_native(w, cluster="4x8", policy="las").state
    ref.drive()
    np.testing.assert_array_equal(st.run.finish, ref.run.finish)
    np.testing.assert_array_equal(st.run.n_preempt, ref.run.n_preempt)
    assert st.counter("steps") == ref.counter("steps")


@pytest.mark.slow  # (compiles user-policy kernels of its own: ~10-18 s on an empty cache)
@given(case=small_case(), placement=st.sampled_from(["first-fit", "consolidated", "blox", "topology"]),
       theta=st.sampled_from([0.0, 1.5]), tm=st.sampled_from(["events", "rounds"]),
       restart=st.sampled_from([0.0, 30.0]), preempt=st.booleans())
def test_per_job_las_matches_the_builtin_and_the_reference_on_random_cases(case, placement, theta, tm, restart,
                                                                           preempt):
    """The compiled per-job LAS against the built-in LAS and the plain-Python reference twin
    (``key_fn``: LAS's key computed for every active job at every step)."""
    submit, gpus, dur, node_gpus = case
    w = fastblox.Workload.from_arrays(submit_s=submit, num_gpus=gpus, duration_s=dur)
    kw = dict(cluster=",".join(f"1x{g}" for g in node_gpus), placement=placement, time_model=tm, restart_s=restart,
              preempt=preempt, admission=f"load:{theta}" if theta else "accept-all")
    ref = simulate_native_reference(submit, gpus, dur, node_gpus, placement=placement, theta=theta, time_model=tm,
                                    restart_s=restart, preempt=preempt,
                                    key_fn=lambda j, t: j.attained + (t - j.cur.t if j.state == "running" else 0.0))
    try:
        a = fastblox.simulate(w, policy=compiled(las_job, preemptive=preempt), **kw)
    except fastblox.SimulationError:
        assert ref["deadlock"]
        return
    same_jobs(a, fastblox.simulate(w, policy="las", **kw))
    np.testing.assert_array_equal(a.jobs["finish_s"].to_numpy(), np.where(np.asarray(ref["finish"]) < 0, np.nan,
                                                                         np.asarray(ref["finish"], dtype=float)))
    np.testing.assert_array_equal(a.jobs["num_preemptions"].to_numpy(), np.asarray(ref["n_preempt"]))


# ------------------------------------------------------------------ policies with state (item 3)
def tiresias_jobs_equal(w, promote, **kw):
    """The stateful rewrite (``fastblox.examples.tiresias_user``) against the built-in, job by job."""
    from fastblox.examples.tiresias_user import STATE, tiresias

    a = fastblox.simulate(w, policy=tiresias(promote=promote), **kw)
    b = fastblox.simulate(w, policy="tiresias", policy_opts={"promote": promote}, **kw)
    assert a.jobs.select(b.jobs.columns).equals(b.jobs), "job by job the built-in tiresias"
    assert a.summary["num_steps"] == b.summary["num_steps"]
    assert list(a.jobs.columns[-len(STATE) - 3:-3]) == list(STATE)  # the state columns, in the per-job results
    return a, b


@pytest.mark.slow  # (compiles user-policy kernels of its own: ~10-18 s on an empty cache)
def test_tiresias_as_a_stateful_user_policy_reproduces_the_builtin_job_by_job():
    w = workload(300, seed=3)
    a, b = tiresias_jobs_equal(w, 2.0, cluster="4x8", restart_s=20.0)
    assert b.summary["num_preemptions"] > 100  # demotions and promotions both happen
    assert (a.jobs["queue"].to_numpy() > 0).any() and (a.jobs["exec0"].to_numpy() > 0).any()


@pytest.mark.slow
def test_tiresias_as_a_stateful_user_policy_without_promotion_in_both_time_models():
    w = workload(400, seed=8)
    for tm in ("events", "rounds"):
        tiresias_jobs_equal(w, 0.0, cluster="4x8", time_model=tm)


@pytest.mark.parametrize("state,needle", [
    ({"level": ("complex128", 0)}, "state column 'level' has dtype 'complex128'; choose one of: bool, int8"),
    ({"level": ("nonsense", 0)}, "state column 'level' has dtype 'nonsense'"),
    ({"attained_s": (np.float64, 0.0)}, "state column 'attained_s' clashes with a JobView field"),
    ({"finish_s": (np.float64, 0.0)}, "state column 'finish_s' clashes with a per-job result column"),
    ({"level": (np.int32, 0.5)}, "state column 'level': initial value 0.5 is not a int32"),
    ({"level": np.int32}, "state column 'level' must be given as (dtype, initial value)"),
    ({"2x": (np.int32, 0)}, "state column '2x' must be a Python name"),
])
def test_bad_state_columns_are_refused_in_one_line_naming_policy_and_column(state, needle):
    with pytest.raises(fastblox.ConfigError) as e:
        fastblox.policy("bad-state", per_job=True, state=state, replace=True)(lambda job, now, s: 0.0)
    msg = str(e.value)
    assert "policy 'bad-state'" in msg and needle in msg and "\n" not in msg, msg


def test_state_needs_the_per_job_form():
    with pytest.raises(fastblox.ConfigError, match="policy 'np-state': state= needs per_job=True"):
        fastblox.policy("np-state", state={"level": (np.int32, 0)}, replace=True)(lambda jobs, now: jobs.attained_s)


def test_a_stateful_policy_cannot_be_switched_to_on_a_paused_run():
    from fastblox.examples.tiresias_user import tiresias

    st = fastblox.prepare_native(workload(50), cluster="2x8", policy="las").state
    st.drive(float(workload(50).submit_s[20]))
    with pytest.raises(fastblox.ConfigError, match="keeps per-job state"):
        st.set_policy(tiresias())


@pytest.mark.slow  # (compiles user-policy kernels of its own: ~10-18 s on an empty cache)
@given(case=small_case(), placement=st.sampled_from(["first-fit", "consolidated"]), tm=st.sampled_from(["events", "rounds"]),
       restart=st.sampled_from([0.0, 30.0]), theta=st.sampled_from([0.0, 1.5]))
def test_stateful_tiresias_matches_the_reference_twin_on_random_cases(case, placement, tm, restart, theta):
    """The stateful user policy in the kernel against the same policy in the plain-Python reference
    (``job_policy``: its function called as plain Python at the same events): the same finish
    times, preemptions and final state records, to the bit."""
    from fastblox.examples.tiresias_user import tiresias

    submit, gpus, dur, node_gpus = case
    pol = tiresias(promote=2.0)
    w = fastblox.Workload.from_arrays(submit_s=submit, num_gpus=gpus, duration_s=dur)
    ref = simulate_native_reference(submit, gpus, dur, node_gpus, placement=placement, time_model=tm, restart_s=restart,
                                    theta=theta, job_policy=pol, job_ids=w.job_id)
    try:
        a = fastblox.simulate(w, policy=pol, cluster=",".join(f"1x{g}" for g in node_gpus), placement=placement,
                              time_model=tm, restart_s=restart, admission=f"load:{theta}" if theta else "accept-all")
    except fastblox.SimulationError:
        assert ref["deadlock"]
        return
    np.testing.assert_array_equal(a.jobs["finish_s"].to_numpy(), np.where(np.asarray(ref["finish"]) < 0, np.nan,
                                                                         np.asarray(ref["finish"], dtype=float)))
    np.testing.assert_array_equal(a.jobs["num_preemptions"].to_numpy(), np.asarray(ref["n_preempt"]))
    for c in ref["state"].dtype.names:
        np.testing.assert_array_equal(a.jobs[c].to_numpy(), ref["state"][c], err_msg=c)
