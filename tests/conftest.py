import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# CI draws 60 examples per property; a developer's `pytest -q` half as many (the 3-minute suite of
# issue 13); HYPOTHESIS_PROFILE chooses either way
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))

SHARED = Path(__file__).resolve().parents[2] / "shared"

# The tests run many policy x placement combinations: one generic kernel per scheduling path
# compiles far less than a kernel per combination (kernels/variants.py). Set here, before any test
# runs, so that the CLI's subprocesses inherit it; tests/test_variants.py checks that the
# specialized kernels, what a user's run compiles, give the same bytes.
os.environ.setdefault("FASTBLOX_KERNELS", "generic")


# ------------------------------------------------------------------ slow tests: CI's, or --slow
def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="also run the tests marked slow (they run whenever CI is set, as in .ci/run)")


def _run_slow(config) -> bool:
    """Slow tests run under CI, with ``--slow``, or when ``-m`` chooses by marker itself."""
    return bool(config.getoption("--slow") or os.environ.get("CI") or config.option.markexpr)


def pytest_collection_modifyitems(config, items):
    if _run_slow(config):
        return
    slow = [it for it in items if it.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [it for it in items if not it.get_closest_marker("slow")]
        config._fastblox_slow_left = len(slow)


def pytest_terminal_summary(terminalreporter, config):
    if not _run_slow(config):  # (under xdist the workers deselect them: the count is theirs)
        n = getattr(config, "_fastblox_slow_left", 0) or "the"
        terminalreporter.write_line(f"{n} tests marked slow were not run: add --slow (CI runs them; docs/testing.md)")


# ------------------------------------------------------------------ workers (pytest-xdist)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject's addopts): one worker a CPU, at most four (each imports numba and
    compiles the kernels its tests need; the compile lock keeps two from compiling the same one)."""
    return max(1, min(os.cpu_count() or 1, 4))


@pytest.fixture(autouse=True)
def _registries_restored():
    """Whatever a test registers (a user policy, a placement) is gone after it, so that tests do
    not depend on which ran before them in their worker."""
    from fastblox import parts

    saved = [(r, dict(r._items), dict(r._meaning)) for r in vars(parts).values() if isinstance(r, parts.Registry)]
    yield
    for r, items, meaning in saved:
        r._items.clear()
        r._items.update(items)
        r._meaning.clear()
        r._meaning.update(meaning)


def need_shared(path: Path = SHARED) -> Path:
    """``path`` (under ../shared); missing, the test is skipped on a developer's machine and
    fails under CI (``CI`` set), where ../shared is always laid beside the repository."""
    if not path.exists():
        msg = f"{path} is not there (../shared beside the repository)"
        if os.environ.get("CI"):
            pytest.fail(msg + ": CI must have it")
        pytest.skip(msg)
    return path


@pytest.fixture
def shared():
    return need_shared(SHARED)
