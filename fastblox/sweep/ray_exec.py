"""The Ray executor of :func:`fastblox.sweep.run_sweep`.

* **Connecting.** Without an address a local Ray instance is started (``num_cpus = workers``,
  no dashboard) and shut down when the sweep ends. With ``ray_address`` the sweep joins a
  running cluster and disconnects at the end. The address is checked before Ray is called,
  because ``ray.init`` keeps retrying an address where no Ray cluster answers for minutes
  instead of failing: a host that does not resolve, a port where nothing listens, or a
  server that does not speak gRPC (e.g. the dashboard's HTTP port 8265) is a
  :class:`~fastblox.errors.ConfigError` of one line, within a few seconds. A process that
  called ``ray.init`` itself keeps its connection, and the sweep runs on it.
* **No shared file system needed.** A task returns its points' files as bytes
  (:func:`compute_point`); the driver writes them, so a multi-node cluster leaves the results
  on the driver's disk. A trace is read once by the driver and put in Ray's object store (a
  worker never opens the driver's path); generated workloads are built on the workers.
* **Failures.** A point that raises is recorded by the task as usual; a task that dies (a
  worker crash, out of memory) marks each of its points as failed with Ray's message.
"""

from __future__ import annotations

import json
import logging
import pickle
import socket

from ..errors import ConfigError
from .points import compute_point, get_workload, preload_workloads, write_point_files

PROBE_TIMEOUT_S = 5.0
INSTALL_HINT = "the ray executor needs Ray: pip install 'fastblox[ray]'"
# The client connection preface of HTTP/2 and an empty SETTINGS frame: a gRPC server (as Ray's
# GCS is) answers with a SETTINGS frame (frame type 4 at byte 3); anything else does not.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return ray


def _host_port(address: str, text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--ray-address {address!r}: expected HOST:PORT of the Ray head node (its GCS port, "
                          "6379 by default), ray://HOST:PORT (Ray Client) or 'auto'")
    return host, int(port)


def check_address(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise :class:`ConfigError` (one line) unless something that may be a Ray cluster answers
    at ``address`` (``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``) within ``timeout_s``."""
    if address == "auto":
        return  # ray.init(address="auto") fails at once when no cluster runs on this machine
    low = address.lower()
    if low.startswith(("http://", "https://")):
        raise ConfigError(f"--ray-address {address!r} is an HTTP address (the dashboard or the Jobs API); "
                          "give the head node's GCS address HOST:6379, or ray://HOST:10001 for Ray Client")
    client = low.startswith("ray://")
    host, port = _host_port(address, address[len("ray://"):] if client else address)
    where = f"--ray-address {address!r}"
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except socket.gaierror:
        raise ConfigError(f"{where}: unknown host {host!r}") from None
    except ConnectionRefusedError:
        raise ConfigError(f"{where}: nothing listens at {host}:{port} (no Ray head node there?)") from None
    except (TimeoutError, socket.timeout):
        raise ConfigError(f"{where}: no answer from {host}:{port} within {timeout_s:g} s") from None
    except OSError as e:
        raise ConfigError(f"{where}: cannot reach {host}:{port}: {e.strerror or e}") from None
    with sock:
        if client:
            return  # Ray Client's server: ray.init reports its own errors in bounded time
        try:
            sock.settimeout(timeout_s)
            sock.sendall(_H2_PREFACE)
            reply = sock.recv(9)
        except OSError:
            reply = b""
    if len(reply) < 4 or reply[3] != 4:
        raise ConfigError(f"{where}: {host}:{port} answers but is not a Ray cluster (no gRPC server there); "
                          "give the head node's GCS port (6379 by default), not the dashboard's")


def connect(ray_address: str | None, workers: int | None) -> bool:
    """Make sure this process is connected to Ray. Returns True when this call connected (so the
    sweep must disconnect at the end), False when the process was connected already."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    if ray_address:
        check_address(ray_address)
        kw = {"address": ray_address}
    else:
        kw = {"num_cpus": workers, "include_dashboard": False} if workers else {"include_dashboard": False}
    try:
        ray.init(log_to_driver=False, logging_level=logging.WARNING, **kw)
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as e:
        where = f"--ray-address {ray_address!r}" if ray_address else "ray executor: starting a local Ray instance"
        msg = " ".join(str(e).split())
        raise ConfigError(f"{where}: {msg}") from None
    return True


def disconnect() -> None:
    ray = import_ray()
    if ray.is_initialized():
        ray.shutdown()


def _compute_chunk(points: list, workloads: dict) -> list:
    """Ray task: compute a chunk of points; ``workloads`` maps a workload spec's JSON to an
    object reference of the workload read by the driver."""
    preload_workloads(workloads)
    return [compute_point(p) for p in points]


def run(todo: list, out_dir: str, prog, results: list) -> None:
    """Run ``todo`` as Ray tasks on the connected cluster; the driver writes every file and
    appends ``(id, error or None, error type or None)`` to ``results``. On Ctrl-C the tasks not
    finished are cancelled."""
    ray = import_ray()
    # traces: read once here, shipped through the object store
    shipped = {}
    for p in todo:
        spec = p.workload_spec
        key = json.dumps(spec, sort_keys=True)
        if spec["kind"] != "trace" or key in shipped:
            continue
        try:
            # pickled, not put as is: Ray hands numpy arrays back read-only, and numba compiles
            # a second copy of every kernel (minutes) for read-only arrays
            shipped[key] = ray.put(pickle.dumps(get_workload(spec), protocol=5))
        except Exception:  # noqa: BLE001 - the point's own run reports the problem, as on any executor
            shipped[key] = None
    shipped = {k: v for k, v in shipped.items() if v is not None}
    remote = ray.remote(_compute_chunk)
    cpus = max(1, int(ray.available_resources().get("CPU", 1)))
    chunk = max(1, len(todo) // (8 * cpus))
    chunks = [todo[i:i + chunk] for i in range(0, len(todo), chunk)]
    pending = {}
    for c in chunks:
        keys = {json.dumps(p.workload_spec, sort_keys=True) for p in c}
        pending[remote.remote(c, {k: v for k, v in shipped.items() if k in keys})] = c
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            _collect(ray, ref, pending.pop(ref), out_dir, prog, results)
    except KeyboardInterrupt:
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - a task that ended meanwhile; stopping anyway
                pass
        raise


def _collect(ray, ref, chunk: list, out_dir: str, prog, results: list) -> None:
    try:
        out = ray.get(ref)
    except ray.exceptions.RayError as e:
        msg = " ".join(str(e).split())[:500]
        out = [(p.id, None, f"the Ray task running this point failed: {msg}", type(e).__name__) for p in chunk]
    for pid, files, msg, typ in out:
        if files is not None:
            try:
                write_point_files(out_dir, files)
            except OSError as e:
                msg, typ = f"cannot write the point's files: {e}", type(e).__name__
        results.append((pid, msg, typ))
        prog.step(msg is not None)
