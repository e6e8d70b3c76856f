"""Start-up (issue 13, part 4): what ``import fastblox`` and a plain run import, numba's BLAS probe
answered without scipy (and numba's own linear algebra still working), the command's exit, and the
two writers of ``jobs.parquet`` giving one table."""

import subprocess
import sys

import numpy as np

import fastblox

HEAVY = ("polars", "pyarrow", "scipy.linalg", "matplotlib")


def _python(code: str, *args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd)


def test_import_and_a_plain_run_import_no_table_or_scipy_library(tmp_path):
    code = (f"import sys\nimport fastblox\nheavy = {HEAVY!r}\n"
            "print([m for m in heavy if m in sys.modules])\n"
            "res = fastblox.simulate(fastblox.blox_paper_workload(load=6, num_jobs=50), cluster='4x4')\n"
            "print([m for m in heavy if m in sys.modules])\n"
            "res.jobs\n"
            "print('polars' in sys.modules)\n")
    r = _python(code, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["[]", "[]", "True"]


def test_user_njit_with_np_dot_after_a_run():
    """numba's BLAS probe is answered without scipy when a run compiles its kernels (and not made
    at all when it loads them from the cache: numba's registries are not loaded then); a user's
    np.dot still compiles (scipy's BLAS imported then) and gives numpy's answer."""
    code = ("import sys\nimport numpy as np, numba, fastblox\n"
            "fastblox.simulate(fastblox.blox_paper_workload(load=6, num_jobs=50), cluster='4x4')\n"
            "am = sys.modules.get('numba.np.arraymath')\n"
            "print('scipy.linalg' in sys.modules, am is None or (am._HAVE_BLAS and am.ensure_blas is "
            "sys.modules['numba.np.linalg'].ensure_blas))\n"
            "@numba.njit\n"
            "def f(a, b):\n    return np.dot(a, b), a @ b, np.linalg.inv(b)\n"
            "a = np.arange(4.0).reshape(2, 2); b = np.array([[2.0, 1.0], [1.0, 3.0]])\n"
            "d, m, inv = f(a, b)\n"
            "print(np.array_equal(d, a.dot(b)), np.array_equal(m, a @ b), np.allclose(inv, np.linalg.inv(b)))\n")
    for cache in ("cold", "warm"):  # (the first compiles the run's kernels into the empty cache)
        r = _python(code)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["False", "True", "True", "True", "True"], (cache, r.stdout)


def test_a_warm_run_loads_its_kernels_without_numba_s_registries():
    """A kernel loaded from the cache needs numba's runtime, not its implementation registries
    (kernels._jit._load_without_refresh: 0.08 s of a warm start)."""
    code = ("import sys, fastblox\n"
            "res = fastblox.simulate(fastblox.blox_paper_workload(load=6, num_jobs=50), cluster='4x4')\n"
            "print(res.summary['num_finished'], 'numba.np.arraymath' in sys.modules)\n")
    first = _python(code)  # (compiles the kernel if the cache is cold, which loads them)
    again = _python(code)
    assert first.returncode == 0 and again.returncode == 0, again.stderr
    assert again.stdout.split() == [first.stdout.split()[0], "False"]


def test_command_exit_code_and_output_survive_the_fast_exit(tmp_path):
    r = subprocess.run([sys.executable, "-m", "fastblox.cli", "run", "--num-jobs", "30", "--cluster", "4x4",
                        "--json", "--out", str(tmp_path / "o")], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().endswith("}")  # the whole summary, flushed
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["jobs.parquet", "summary.json"]
    r = subprocess.run([sys.executable, "-m", "fastblox.cli", "run", "--round-s", "-5"], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def _same_table(a, b) -> bool:
    """Same schema and values, NaN equal to NaN (Arrow's ``equals`` says NaN != NaN)."""
    if not a.schema.equals(b.schema) or a.num_rows != b.num_rows:
        return False
    for x, y in zip(a.columns, b.columns):
        if x.type.id == a.schema.field("finish_s").type.id:  # float64
            if not np.array_equal(x.to_numpy(), y.to_numpy(), equal_nan=True):
                return False
        elif x.to_pylist() != y.to_pylist():
            return False
    return True


def test_jobs_parquet_same_table_from_either_writer(tmp_path):
    """jobs.parquet from the run's columns through pyarrow (polars not imported) is the table
    polars writes: same schema, same values (NaNs, a string column with nulls)."""
    import polars as pl
    import pyarrow.parquet as pq

    from fastblox.results import JobColumns

    w = fastblox.gavel_like_workload(40)
    res = fastblox.simulate(w, cluster="v100:2x4,k80:2x4", max_sim_time=float(np.sort(w.submit_s)[30]))
    cols = res.__dict__["jobs"]()
    assert isinstance(cols, JobColumns)
    cols.write_parquet(tmp_path / "pa.parquet")
    df = cols.to_polars()
    df.write_parquet(tmp_path / "pl.parquet")
    a, b = pq.read_table(tmp_path / "pa.parquet"), pq.read_table(tmp_path / "pl.parquet")
    assert _same_table(a, b)
    assert a["gpu_type"].null_count > 0 and np.isnan(a["finish_s"].to_numpy()).any()
    assert pl.read_parquet(tmp_path / "pa.parquet").equals(res.jobs)
    # Result.write: polars is imported here, so it writes with polars; the same table again
    res.write(tmp_path / "out")
    assert _same_table(pq.read_table(tmp_path / "out" / "jobs.parquet"), a)
