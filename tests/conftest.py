import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

SHARED = Path(__file__).resolve().parents[2] / "shared"


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
