"""Python (array) policies: called back from inside the kernel, and row-wise ones on the
sorted-queue path (``fastblox.policy(rowwise=True)``, issue 18 item 2)."""

import gc

import numpy as np
import pytest

import fastblox
from fastblox import parts
from fastblox.engine import NativeState
from fastblox.kernels import enums
from fastblox.kernels.userpol import PY_RUNS


def srtf(jobs, now):
    return jobs.remaining_s


def las(jobs, now):
    return jobs.attained_s


def two_key(jobs, now):
    return jobs.num_gpus * 1e9 + jobs.attained_s


def rowwise(fn, name=None, preemptive=True):
    return parts.Policy(name or fn.__name__, enums.POL_CUSTOM, preemptive, True, "", fn=fn, rowwise=True)


def workload(n=600, seed=4):
    return fastblox.gavel_like_workload(n, seed=seed)


KW = dict(cluster="2x8", restart_s=30.0)


@pytest.mark.parametrize("fn, builtin", [(srtf, "srtf"), (las, "las"), (two_key, None)])
def test_a_rowwise_policy_equals_the_builtin_and_the_python_form_job_by_job(fn, builtin):
    w = workload()
    rows = []

    def counted(jobs, now):
        rows.append(len(jobs.job_id))
        return fn(jobs, now)

    full = fastblox.simulate(w, policy=fn, **KW)
    a = fastblox.simulate(w, policy=rowwise(counted, fn.__name__), **KW)
    assert a.jobs.equals(full.jobs)
    assert a.summary["num_preemptions"] > 50  # (a loaded cluster: the order matters)
    if builtin:
        assert a.jobs.equals(fastblox.simulate(w, policy=builtin, **KW).jobs)
    # it is asked for the jobs that started waiting and the running ones, not for every active job
    all_rows = []
    fastblox.simulate(w, policy=lambda jobs, now: (all_rows.append(len(jobs.job_id)), fn(jobs, now))[1], **KW)
    assert np.mean(rows) < 0.5 * np.mean(all_rows), (np.mean(rows), np.mean(all_rows))


def test_a_non_preemptive_rowwise_policy_keys_only_the_jobs_that_start_waiting():
    w = workload(400)
    rows = []

    def counted(jobs, now):
        rows.append(int(jobs.running.sum()))
        return jobs.remaining_s

    a = fastblox.simulate(w, policy=rowwise(counted, preemptive=False), preempt=False, **KW)
    assert a.jobs.equals(fastblox.simulate(w, policy="srtf", preempt=False, **KW).jobs)
    assert sum(rows) == 0  # (without preemption the running jobs' keys are never used)


def test_a_rowwise_policy_equals_the_builtin_with_node_failures():
    w = workload(400)
    kw = dict(KW, failures=(20000.0, 3000.0))
    a = fastblox.simulate(w, policy=rowwise(las), **kw)
    b = fastblox.simulate(w, policy="las", **kw)
    assert a.jobs["num_failures"].sum() > 0
    assert a.jobs.equals(b.jobs)


def test_rowwise_refuses_a_function_that_reads_now():
    with pytest.raises(fastblox.ConfigError, match="rowwise=True needs a key that does not read now"):
        @fastblox.policy("aged", rowwise=True)
        def aged(jobs, now):
            return jobs.attained_s - 0.1 * (now - jobs.submit_s)


def test_a_function_that_breaks_the_rowwise_promise_stops_the_run_naming_it():
    def normalised(jobs, now):  # the key of a job depends on the others
        return jobs.attained_s / (1.0 + jobs.attained_s.max())

    with pytest.raises(fastblox.ConfigError, match=r"policy 'normalised' is declared rowwise=True, but job \d+ got "
                                                   r"key .* when it started waiting and .* drop rowwise=True"):
        fastblox.simulate(workload(), policy=rowwise(normalised), **KW)


@pytest.mark.parametrize("form", ["full", "rowwise"])
def test_a_python_policy_that_raises_stops_the_run_in_one_line(form):
    calls = []

    def flaky(jobs, now):
        calls.append(now)
        if len(calls) == 40:
            raise ValueError("boom")
        return jobs.attained_s

    pol = flaky if form == "full" else rowwise(flaky)
    with pytest.raises(fastblox.ConfigError, match=r"policy 'flaky' raised ValueError at t = \S+ s: boom"):
        fastblox.simulate(workload(), policy=pol, **KW)


@pytest.mark.parametrize("form", ["full", "rowwise"])
def test_ctrl_c_inside_a_python_policy_leaves_the_kernel_and_is_raised_as_itself(form):
    calls = []

    def interrupted(jobs, now):
        calls.append(now)
        if len(calls) == 25:
            raise KeyboardInterrupt
        return jobs.attained_s

    pol = interrupted if form == "full" else rowwise(interrupted)
    with pytest.raises(KeyboardInterrupt):
        fastblox.simulate(workload(), policy=pol, **KW)
    assert len(calls) == 25  # (the kernel stopped at that call: not a SystemError from inside it)


def test_the_kernel_returns_to_python_once_a_slice_not_once_a_step(monkeypatch):
    calls = {"advance": 0, "policy": 0}
    real = NativeState.advance

    def advance(self):
        calls["advance"] += 1
        return real(self)

    def pol(jobs, now):
        calls["policy"] += 1
        return jobs.attained_s

    monkeypatch.setattr(NativeState, "advance", advance)
    fastblox.simulate(workload(), policy=pol, **KW)
    assert calls["policy"] > 500
    assert calls["advance"] < 10


@pytest.mark.parametrize("form", ["full", "rowwise"])
def test_a_copied_run_calls_its_own_policy_back(form):
    """A look-ahead copy has a call back of its own: the two runs go on apart, each as the
    run that was never copied."""
    w = workload(400)
    pol = las if form == "full" else rowwise(las)
    whole = fastblox.simulate(w, policy=pol, **KW)
    nr = fastblox.prepare_native(w, policy=pol, **KW)
    st = nr.state
    st.drive(float(np.median(w.submit_s)))
    other = st.copy()
    other.drive()
    st.drive()
    assert nr.result(0.0).jobs.equals(whole.jobs)
    assert other.run.finish.tolist() == st.run.finish.tolist()


def test_a_finished_run_leaves_no_call_back_behind():
    before = set(PY_RUNS)
    fastblox.simulate(workload(200), policy=las, **KW)
    fastblox.simulate(workload(200), policy=rowwise(las), **KW)
    gc.collect()
    assert not set(PY_RUNS) - before  # (the two runs' entries left with them)


def test_the_decorator_registers_a_rowwise_policy():
    @fastblox.policy("row-srtf", rowwise=True)
    def row_srtf(jobs, now):
        return jobs.remaining_s

    pol = fastblox.parts.POLICIES.get("row-srtf")
    assert pol.rowwise and pol.fn is row_srtf
    w = workload(300)
    assert fastblox.simulate(w, policy="row-srtf", **KW).jobs.equals(fastblox.simulate(w, policy="srtf", **KW).jobs)
