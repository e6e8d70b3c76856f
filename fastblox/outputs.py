"""Where results go: output folders checked before any work, and JSON that is always valid.

A run or sweep that cannot write its results finds out before it simulates anything:
:func:`prepare_dir` creates the folder and writes, syncs and removes a probe file in it, so an
existing file in the way, a path under a file, a read-only mount or a full disk stop the command
with one line naming the option. :func:`json_text` renders what fastblox writes as JSON with no
``NaN`` or ``Infinity`` (which JSON does not have): a number that is not finite is written as
``null``.
"""

from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path

from .errors import ConfigError

PROBE_BYTES = 64 * 1024  # enough to hit a full disk, small enough to cost nothing


def prepare_dir(path, option: str = "--out") -> Path:
    """Create ``path`` (and its parents) and check that files can be written into it."""
    p = Path(path).expanduser()
    try:
        if p.exists() and not p.is_dir():
            raise ConfigError(f"{option} {p}: exists and is not a folder")
        p.mkdir(parents=True, exist_ok=True)
        probe = p / f".fastblox-probe-{os.getpid()}"
        try:
            with open(probe, "wb") as f:
                f.write(b"\0" * PROBE_BYTES)
                f.flush()
                os.fsync(f.fileno())
        finally:
            if probe.exists():
                probe.unlink()
    except ConfigError:
        raise
    except OSError as e:
        raise ConfigError(f"{option} {p}: cannot write there ({_why(e)})") from None
    return p


def _why(e: OSError) -> str:
    if e.errno in (errno.ENOTDIR, errno.EEXIST):
        return "a file is in the way of the folder"
    if e.errno == errno.ENOSPC:
        return "no space left on the device"
    if e.errno == errno.EROFS:
        return "read-only file system"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return e.strerror or str(e)


def finite(obj):
    """``obj`` with every float that is not finite replaced by None (dicts, lists, tuples)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    if hasattr(obj, "item") and getattr(obj, "shape", None) == ():  # a numpy scalar
        return finite(obj.item())
    return obj


def json_text(obj, **kw) -> str:
    """``json.dumps`` of ``obj`` that is always valid JSON (non-finite numbers become null)."""
    return json.dumps(finite(obj), allow_nan=False, **kw)
